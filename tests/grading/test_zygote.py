"""Grading kernels forked from the zygote (grader/grading/zygote.py): a real kernel, started as
autograde starts it, that is what a kernel started from scratch would be, keeps nothing of the
zygote, and does not outlive whoever asked for it."""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from jupyter_client import KernelManager

from grader.grading import zygote
from grader.launch.processes import alive, descendants

PROBE = textwrap.dedent("""
    import json, os, sys, tempfile, torch
    fds = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")}
    print(json.dumps({"cwd": os.getcwd(), "path": sys.path, "env": os.environ.get("COURSE_PROBE"),
                      "tmp": tempfile.gettempdir(), "cores": sorted(os.sched_getaffinity(0)),
                      "threads": torch.get_num_threads(), "pgid": os.getpgid(0), "pid": os.getpid(),
                      "toolkit": sorted(m for m in sys.modules if m.startswith("grader.") and m != "grader.grading"),
                      "sockets": sorted(link for link in fds.values() if link.startswith("socket:"))}))
""")


def kernel(tmp_path, forked=True, **env):
    """A kernel manager whose kernel is forked from the zygote, as IsolatedExecute makes it (or started from scratch)."""
    km = KernelManager(kernel_name="python3")
    if forked:
        km.provisioner = zygote.ForkedProvisioner(kernel_id="probe", kernel_spec=km.kernel_spec, parent=km)
    km.start_kernel(cwd=str(tmp_path), env=dict(os.environ, PYTHONNOUSERSITE="1", TMPDIR=str(tmp_path), **env))
    return km


def run(km, code):
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        out = []
        reply = kc.execute_interactive(code, timeout=60, output_hook=lambda m: out.append(m["content"].get("text", "")))
        assert reply["content"]["status"] == "ok", reply["content"]
        return "".join(out)
    finally:
        kc.stop_channels()


def sockets_of(pid):
    return {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")} - {None}


pytestmark = pytest.mark.skipif(bool(glob.glob(zygote.GPUS)), reason="on a machine with GPUs kernels start from scratch")


@pytest.fixture
def own_zygote():
    zygote.stop()
    yield
    zygote.stop()


def test_a_forked_kernel_is_the_kernel_it_was_asked_for_and_holds_nothing_of_the_zygote(tmp_path, own_zygote):
    cores = sorted(os.sched_getaffinity(0))
    km = kernel(tmp_path, COURSE_PROBE="mine", OMP_NUM_THREADS="1")
    try:
        found = json.loads(run(km, PROBE))
        assert isinstance(km.provisioner.process, zygote.Forked)  # forked, not started from scratch
        assert found["pid"] in descendants(zygote._process.pid)  # the zygote's child
        assert (found["cwd"], found["env"], found["tmp"]) == (str(tmp_path), "mine", str(tmp_path))
        assert (found["cores"], found["threads"], found["pgid"]) == (cores, 1, found["pid"])  # a session of its own
        assert found["toolkit"] == []  # no toolkit module imported before the fork (the withheld ones come from the grading build)
        # No end of the zygote's sockets (which could ask for an unconfined process): its own, ZeroMQ's only.
        assert not set(found["sockets"]) & sockets_of(zygote._process.pid), found["sockets"]
    finally:
        km.shutdown_kernel(now=True)
    assert not alive(found["pid"])
    scratch = kernel(tmp_path, forked=False)
    try:
        assert json.loads(run(scratch, PROBE))["path"] == found["path"]  # what imports see
    finally:
        scratch.shutdown_kernel(now=True)


def test_a_forked_answer_kernel_is_locked_with_one_thread_and_then_takes_its_threads(tmp_path, own_zygote, capfd):
    # Landlock confines the thread that locks and the threads started after; torch's thread pool, which the
    # zygote's torch would start at set_num_threads, starts only once the sandbox has locked.
    km = KernelManager(kernel_name="python3")
    km.kernel_spec.argv[km.kernel_spec.argv.index("ipykernel_launcher")] = "grader.grading.sandbox"
    km.provisioner = zygote.ForkedProvisioner(kernel_id="answers", kernel_spec=km.kernel_spec, parent=km)
    folders = {name: tmp_path / name for name in ("HOME", "IPYTHONDIR", "TMPDIR")}
    for folder in folders.values():
        folder.mkdir()
    km.start_kernel(cwd=str(tmp_path), env=dict(os.environ, PYTHONNOUSERSITE="1", OMP_NUM_THREADS="2",
                                                **{k: str(v) for k, v in folders.items()}))
    try:
        assert isinstance(km.provisioner.process, zygote.Forked)
        assert run(km, "import torch; print(torch.get_num_threads())").strip() == "2"
    finally:
        km.shutdown_kernel(now=True)
    assert "threads at the lock" not in capfd.readouterr().err


def test_a_kernel_whose_requester_is_killed_goes_with_it_and_so_does_the_zygote(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys
        from jupyter_client import KernelManager
        from grader.grading import zygote
        km = KernelManager(kernel_name="python3")
        km.provisioner = zygote.ForkedProvisioner(kernel_id="k", kernel_spec=km.kernel_spec, parent=km)
        km.start_kernel(cwd={str(tmp_path)!r}, env=dict(os.environ, PYTHONNOUSERSITE="1"))
        print(km.provisioner.pid, flush=True)
        sys.stdin.read()
    """)
    requester = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        kernel_pid = int(requester.stdout.readline())
        forker = [p for p in descendants(requester.pid) if p != kernel_pid]
        assert alive(kernel_pid) and len(forker) == 1
        requester.send_signal(signal.SIGKILL)
        requester.wait(timeout=30)
        end = time.monotonic() + 30
        while (alive(kernel_pid) or alive(forker[0])) and time.monotonic() < end:
            time.sleep(0.1)
        assert not alive(kernel_pid) and not alive(forker[0])
    finally:
        requester.kill()


def test_what_the_zygote_cannot_serve_is_started_from_scratch(tmp_path, own_zygote):
    assert not zygote.servable([sys.executable, "-m", "ipykernel_launcher"], dict(os.environ))  # user site-packages on
    assert not zygote.servable([sys.executable, "-c", "print()"], dict(os.environ, PYTHONNOUSERSITE="1"))
    km = KernelManager(kernel_name="python3")
    km.provisioner = zygote.ForkedProvisioner(kernel_id="k", kernel_spec=km.kernel_spec, parent=km)
    km.start_kernel(cwd=str(tmp_path), env=dict(os.environ, PYTHONNOUSERSITE="1", PYTHONPATH="/elsewhere"))
    try:
        assert isinstance(km.provisioner.process, subprocess.Popen)
        assert "4" in run(km, "print(2 + 2)")
    finally:
        km.shutdown_kernel(now=True)


def test_a_zygote_gone_means_one_kernel_from_scratch_a_line_in_the_log_and_a_fresh_zygote(tmp_path, own_zygote, capfd):
    zygote.start()
    zygote._process.kill()
    zygote._process.wait()
    assert zygote.fork([sys.executable, "-m", "ipykernel_launcher", "--version"],
                       dict(os.environ, PYTHONNOUSERSITE="1"), tmp_path) is None
    assert "a kernel started without the zygote" in capfd.readouterr().err
    again = zygote.fork([sys.executable, "-m", "ipykernel_launcher", "--version"], dict(os.environ, PYTHONNOUSERSITE="1"), tmp_path)
    assert again is not None and again.wait(timeout=60) == 0  # a fresh zygote serves the next one


def test_the_zygote_serves_on_after_a_requester_goes_with_its_kernel_running(tmp_path, own_zygote):
    # A worker stopped at its time-out (its end of the reply socket closed): its kernel is killed, and
    # the kernels of the rest of the class, forked before or after, are untouched.
    first, gone = kernel(tmp_path), kernel(tmp_path)
    try:
        pid = gone.provisioner.pid
        gone.provisioner.process.reply.close()
        end = time.monotonic() + 30
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        assert not alive(pid)
        after = kernel(tmp_path)
        try:
            assert isinstance(after.provisioner.process, zygote.Forked)
            assert "4" in run(first, "print(2 + 2)") and "6" in run(after, "print(3 + 3)")
        finally:
            after.shutdown_kernel(now=True)
    finally:
        first.shutdown_kernel(now=True)
