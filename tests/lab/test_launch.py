"""The notebook launcher: results, output, failures, hangs, interrupts, clean-up, torchrun."""

import contextlib
import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import nbformat
import pytest
import torch
import torch.distributed as dist
from nbclient import NotebookClient

from grader import hardware
from grader.launch import (LaunchTimeout, RankError, init_distributed, launch, progress, rank_backend,
                           start_method_for, torchrun, write_script)
from grader.launch.rank import BACKEND
from grader.models import mlp, synthetic_batch

from conftest import free_port


def children():
    """Live processes whose parent is this one (multiprocessing's own helpers left out: its resource
    tracker, and the fork server that lives as long as this process)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            cmd = open(f"/proc/{entry}/cmdline").read()
        except OSError:
            continue
        helper = "resource_tracker" in cmd or "forkserver" in cmd
        if int(stat[1]) == os.getpid() and stat[0] != "Z" and not helper:
            found.add(int(entry))
    return found


def running(pid):
    """Whether a process is alive (a zombie has finished)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(autouse=True)
def no_process_outlives_the_call():
    before = children()
    yield
    deadline = time.monotonic() + 5
    while children() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children() - before == set(), "a worker process outlived its launch"


def rank_info():
    return {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}


def test_results_come_back_by_rank_with_torchrun_environment():
    infos = launch(rank_info, nprocs=2, backend="gloo", show_output=False)
    assert [i["RANK"] for i in infos] == ["0", "1"]
    assert all(i["WORLD_SIZE"] == "2" and i["MASTER_ADDR"] for i in infos)
    assert infos[0]["MASTER_PORT"] == infos[1]["MASTER_PORT"] != ""


def test_collectives_work_and_threads_are_shared_out():
    def reduce_and_count():
        rank, world, _ = init_distributed()
        t = torch.tensor([rank + 1.0])
        dist.all_reduce(t)
        return t.item(), torch.get_num_threads()

    out = launch(reduce_and_count, nprocs=2, backend="gloo")
    assert [s for s, _ in out] == [3.0, 3.0]
    assert [n for _, n in out] == [max(1, hardware.cpu_cores() // 2)] * 2
    assert launch(reduce_and_count, nprocs=2, backend="gloo", threads_per_rank=1, show_output=False)[0][1] == 1


def test_forked_ranks_start_with_what_ddp_imports_on_first_use():
    # DDP imports torch._dynamo the first time a process builds one (1.5 s); forked ranks inherit it
    # from the launching process, which imports it once. A fresh interpreter, where nothing has yet.
    probe = textwrap.dedent("""
        import sys
        import torch
        from grader.launch import init_distributed, launch

        def imported_before_ddp():
            init_distributed()
            there = "torch._dynamo" in sys.modules
            torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
            return there

        if __name__ == "__main__":
            print("torch._dynamo" in sys.modules, launch(imported_before_ddp, nprocs=2, backend="gloo",
                                                         start_method="fork", show_output=False))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines()[-1:] == ["False [True, True]"], out.stdout + out.stderr


def test_closures_and_local_classes_travel_by_value():
    class Box:
        def __init__(self, v):
            self.v = v

    offset = 10
    results = launch(lambda: Box(offset + int(os.environ["RANK"])), nprocs=2, backend="gloo", show_output=False)
    assert [b.v for b in results] == [10, 11]


def test_output_is_live_and_prefixed_by_rank(capfd):
    def talk():
        print(f"hello from {os.environ['RANK']}")
        os.write(2, b"raw stderr line\n")  # C-level output is captured as well

    launch(talk, nprocs=2, backend="gloo")
    out, err = capfd.readouterr()
    assert "[rank 0] hello from 0" in out and "[rank 1] hello from 1" in out
    assert "[rank 1] raw stderr line" in out
    assert err == ""  # nothing reaches the caller's stderr


def test_output_appears_while_the_ranks_still_run(monkeypatch):
    class Clocked:
        """A stdout that notes when each line arrives."""
        def __init__(self):
            self.lines = []

        def write(self, text):
            self.lines += [(time.monotonic(), line) for line in text.splitlines() if line]

        def flush(self):
            pass

    def early_then_slow():
        print("early", flush=True)
        time.sleep(2)

    out = Clocked()
    monkeypatch.setattr(sys, "stdout", out)
    launch(early_then_slow, nprocs=2, backend="gloo")
    returned = time.monotonic()
    shown = [t for t, line in out.lines if line.endswith("early")]
    assert len(shown) == 2 and all(returned - t > 1 for t in shown), out.lines


def test_progress_bar_follows_rank_zero(capfd):
    def loop():
        return sum(progress(range(4)))

    assert launch(loop, nprocs=2, backend="gloo", show_output=False) == [6, 6]
    assert "4/4" in capfd.readouterr().out


@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_failures_and_hangs_write_nothing_to_the_callers_stderr(tmp_path, start_method):
    # In a plain process, as in a kernel: pytest would catch log records before stderr.
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(f"""
        import time
        import torch.distributed as dist
        from grader.launch import LaunchTimeout, RankError, init_distributed, launch

        def fail_on_one():
            rank, _, _ = init_distributed()
            if rank == 1:
                raise ValueError("bad shard on rank one")
            time.sleep(60)

        def hang_on_zero():
            rank, _, _ = init_distributed()
            if rank == 0:
                dist.barrier()

        if __name__ == "__main__":
            for fn, error in ((fail_on_one, RankError), (hang_on_zero, LaunchTimeout)):
                try:
                    launch(fn, nprocs=2, backend="gloo", start_method="{start_method}", timeout=3)
                except error:
                    print("raised", error.__name__)
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.stdout.count("raised") == 2, proc.stdout + proc.stderr
    assert proc.stderr == ""  # e.g. no "Terminating process ... via signal SIGTERM"


def test_the_timeout_counts_from_when_every_rank_runs():
    def brief():
        time.sleep(0.5)
        return int(os.environ["RANK"])

    start = time.monotonic()  # spawned ranks import torch afresh: over a second here
    assert launch(brief, nprocs=2, backend="gloo", start_method="spawn", timeout=1, show_output=False) == [0, 1]
    assert time.monotonic() - start > 1


def test_a_rank_that_raises_stops_everyone_fast():
    def fail_on_one():
        rank, _, _ = init_distributed()
        if rank == 1:
            raise ValueError("bad shard on rank one")
        time.sleep(60)  # would run for a minute if not stopped

    start = time.monotonic()
    with pytest.raises(RankError) as e:
        launch(fail_on_one, nprocs=2, backend="gloo", timeout=120)
    assert time.monotonic() - start < 10
    msg = str(e.value)
    assert msg.startswith("rank 1 of 2 raised")
    assert "ValueError: bad shard on rank one" in msg and "in fail_on_one" in msg


def test_a_rank_whose_set_up_fails_shows_why():
    with pytest.raises(RankError, match=r"^rank \d of 2 raised") as e:
        launch(rank_info, nprocs=2, backend="gloo", threads_per_rank=0, show_output=False)
    assert "set_num_threads" in str(e.value) and "no Python exception" not in str(e.value)


def test_a_rank_that_dies_without_an_exception_is_reported():
    def die_on_one():
        if os.environ["RANK"] == "1":
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer would
        return "fine"

    start = time.monotonic()
    with pytest.raises(RankError, match=r"ranks \[1\] of 2 did not finish and raised no Python exception"):
        launch(die_on_one, nprocs=2, backend="gloo", timeout=60)
    assert time.monotonic() - start < 10


def test_a_hang_ends_at_the_timeout_naming_the_stuck_rank():
    def only_rank_zero_reduces():
        rank, _, _ = init_distributed()
        if rank == 0:
            dist.all_reduce(torch.ones(1))  # rank 1 never joins
        return rank

    start = time.monotonic()
    with pytest.raises(LaunchTimeout) as e:
        launch(only_rank_zero_reduces, nprocs=2, backend="gloo", timeout=3)
    assert time.monotonic() - start < 15
    msg = str(e.value)
    assert "ranks [0] of 2 were still running after 3 s" in msg
    assert "all_reduce" in msg and "only_rank_zero_reduces" in msg


def precision():
    from torch.backends import cuda, cudnn

    return (os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"), torch.get_float32_matmul_precision(),
            cuda.matmul.allow_tf32, cudnn.allow_tf32)


def test_ranks_compute_in_full_float32_even_where_the_image_forces_tf32(monkeypatch):
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    torch.set_float32_matmul_precision("high")  # as a kernel that allowed TF32
    try:
        assert launch(precision, nprocs=2, backend="gloo", show_output=False) == [(None, "highest", False, False)] * 2
    finally:
        torch.set_float32_matmul_precision("highest")


def test_a_rank_stuck_after_its_result_is_named():
    def never_leaves():
        rank, _, _ = init_distributed()
        if rank == 0:  # as a rank whose NCCL work is still queued when it leaves the group
            dist.destroy_process_group = lambda *args, **kwargs: time.sleep(60)
        return rank

    with pytest.raises(LaunchTimeout, match=r"ranks \[0\] of 2") as e:
        launch(never_leaves, nprocs=2, backend="gloo", timeout=3, show_output=False)
    assert "in <lambda>" in str(e.value)


def test_on_a_machine_with_gpus_cpu_ranks_come_from_a_fork_server_and_see_no_gpu(monkeypatch):
    """The GPU-only path, checked on any machine (tests/lab/test_gpu.py runs it on GPUs): where
    torch says it has GPUs (here four, CUDA started), a CPU rank forked from here could not run a
    backward pass, so CPU ranks come from a fork server: they inherit none of this process's
    modules (the mark below), and they touch no GPU."""
    def seen():
        return hasattr(torch, "_course_parent_mark"), hardware.gpu_count(), hardware.device().type

    monkeypatch.setattr(torch, "_course_parent_mark", True, raising=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert hardware.gpu_count() == 4  # the kernel still sees its GPUs
    assert (start_method_for("gloo"), start_method_for("nccl")) == ("forkserver", "spawn")
    assert launch(seen, nprocs=2, backend="gloo", show_output=False) == [(False, 0, "cpu")] * 2


def _where_the_rank_is():
    return os.environ["RANK"], os.environ.get("COURSE_SET_AFTER"), "COURSE_REMOVED_AFTER" in os.environ, os.getcwd()


def test_ranks_from_the_fork_server_see_the_launchers_environment_and_folder_as_they_are_now(tmp_path, monkeypatch):
    """The server started long before (a kernel's first launch); what the kernel changed since holds for its ranks."""
    monkeypatch.setenv("COURSE_REMOVED_AFTER", "1")
    assert launch(os.getpid, nprocs=1, backend="gloo", start_method="forkserver", show_output=False)[0] != os.getpid()
    monkeypatch.setenv("COURSE_SET_AFTER", "yes")
    monkeypatch.delenv("COURSE_REMOVED_AFTER")
    monkeypatch.chdir(tmp_path)
    assert launch(_where_the_rank_is, nprocs=2, backend="gloo", start_method="forkserver", show_output=False) == \
        [("0", "yes", False, str(tmp_path)), ("1", "yes", False, str(tmp_path))]


def test_torchrun_ranks_use_nccl_only_with_a_gpu_for_each_rank_here(monkeypatch):
    monkeypatch.setattr(hardware, "gpu_count", lambda: 2)
    for ranks_here, backend in (("1", "nccl"), ("2", "nccl"), ("4", "gloo")):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", ranks_here)
        assert rank_backend() == backend
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert rank_backend() == "gloo"


def _backend_here():
    return os.environ[BACKEND]


@pytest.mark.parametrize("cores", [1, 2, 16])
def test_launch_picks_the_backend_for_the_ranks_it_was_asked_for(monkeypatch, cores):
    # A one-GPU pod limited to one core: parallel_ranks() is 1, whose backend is NCCL; two ranks
    # asked for there must be gloo CPU processes (the backend for 2 ranks), not refused as NCCL.
    monkeypatch.setattr(hardware, "cpu_cores", lambda: cores)
    for gpus in (0, 1, 2, 8):
        monkeypatch.setattr(hardware, "gpu_count", lambda: gpus)
        assert hardware.backend(2) == ("nccl" if gpus >= 2 else "gloo")
        assert hardware.backend(1) == ("nccl" if gpus >= 1 else "gloo")
        assert hardware.backend(gpus + 1) == "gloo"
        assert hardware.backend() == ("nccl" if gpus >= 2 else "gloo")
    # Where the rule says gloo, the ranks really run over gloo, one thread each or more.
    for gpus, nprocs in ((0, 2), (1, 2), (2, 3)):
        monkeypatch.setattr(hardware, "gpu_count", lambda: gpus)
        assert launch(_backend_here, nprocs=nprocs, timeout=30, show_output=False) == ["gloo"] * nprocs


def test_bad_arguments_are_refused_before_any_rank_starts():
    import threading

    with pytest.raises(TypeError, match="needs a function"):
        launch("train", nprocs=2, backend="gloo")
    with pytest.raises(ValueError, match="nprocs must be at least 1"):
        launch(rank_info, nprocs=0)
    with pytest.raises(TypeError, match="cannot be sent to the ranks"):
        launch(rank_info, threading.Lock(), nprocs=2, backend="gloo")


def test_nccl_without_enough_gpus_is_refused():
    if hardware.gpu_count() >= 2:
        pytest.skip("this machine has the GPUs for nccl")
    with pytest.raises(ValueError, match="one GPU per rank"):
        launch(rank_info, nprocs=2, backend="nccl")


SLEEPER = textwrap.dedent("""
    import faulthandler, os, signal, sys, time
    from grader.launch import launch

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # where every thread is, should it hang
    # A Ctrl-C raises KeyboardInterrupt, as in a terminal or a kernel, even where the suite runs as a
    # background job: a shell without job control starts those with SIGINT ignored, and Python keeps that.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def sleeper(folder):
        open(os.path.join(folder, os.environ["RANK"]), "w").write(str(os.getpid()))
        time.sleep(60)

    if __name__ == "__main__":
        try:
            launch(sleeper, sys.argv[1], nprocs=2, backend="gloo", timeout=120)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(3)
""")


def test_interrupt_stops_every_rank(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not all((tmp_path / r).exists() and (tmp_path / r).read_text() for r in "01"):
        assert time.monotonic() < deadline and proc.poll() is None, "ranks did not start"
        time.sleep(0.05)
    pids = [int((tmp_path / r).read_text()) for r in "01"]
    proc.send_signal(signal.SIGINT)
    try:  # the launcher waits up to 30 s for torch's elastic agent to end (grader/launch/cell.py)
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the interrupted launcher had not ended after 60 s; its threads:\n{err[-8000:]}") from None
    finally:
        proc.kill()
    assert proc.returncode == 3 and "interrupted" in out, err[-3000:]
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1][:3]


CONCURRENT = textwrap.dedent("""
    import torch, torch.distributed as dist
    from grader.launch import launch, init_distributed

    def total():
        rank, _, _ = init_distributed()
        t = torch.tensor([float(rank)])
        dist.all_reduce(t)
        return t.item()

    if __name__ == "__main__":
        for _ in range(3):
            assert launch(total, nprocs=2, backend="gloo", show_output=False) == [1.0, 1.0]
        print("ok")
""")


def test_concurrent_launches_on_one_machine_do_not_collide(tmp_path):
    script = tmp_path / "many_students.py"
    script.write_text(CONCURRENT)
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 and "ok" in out for p, out in zip(procs, outs)), outs


def test_notebook_functions_and_classes_with_fork_and_spawn(tmp_path):
    """In a real kernel, where __main__ is the notebook: both start methods (spawn is
    what NCCL ranks always use)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in [
        "import os\nfrom grader.launch import launch",
        "class Scaled:\n    def __init__(self, k):\n        self.k = k\n"
        "    def __call__(self):\n        return self.k * (int(os.environ['RANK']) + 1)",
        "def make(k):\n    helper = Scaled(k)\n    return lambda: helper()",
        "assert launch(make(5), nprocs=2, backend='gloo') == [5, 10]",
        "assert launch(make(7), nprocs=2, backend='gloo', start_method='spawn') == [7, 14]",
    ]]
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    for cell in nb.cells:
        for out in cell.outputs:
            assert out.output_type != "error", out
            assert not (out.output_type == "stream" and out.name == "stderr"), out.text


# The two functions below are written out as a script and run by torchrun.
def ddp_steps(rank, world):
    import json

    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(mlp(in_features=16, hidden=32))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = synthetic_batch(8 * world, in_features=16)
    shard = slice(rank * 8, (rank + 1) * 8)  # disjoint shards of one global batch
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[shard]), y[shard]).backward()
        opt.step()
    if rank == 0:
        flat = torch.cat([p.detach().flatten() for p in model.module.parameters()])
        with open(os.environ["RESULT_FILE"], "w") as f:
            json.dump(flat.tolist(), f)


def ddp_train():
    import gc

    rank, world, device = init_distributed("gloo")  # both "machines" are this one: CPU ranks
    ddp_steps(rank, world)
    # What DDP left in reference cycles goes before the group does. Without this, 9 exits of
    # 20 aborted under load (SIGABRT at interpreter exit, torch 2.13 on CPU); with it, none.
    gc.collect()
    dist.destroy_process_group()


def test_written_script_runs_under_two_torchrun_agents(tmp_path):
    import json

    script = write_script(tmp_path / "train.py", ddp_train, ddp_steps, imports=(
        "import os\n\nimport torch\nimport torch.distributed as dist\n\n"
        "from grader.launch import init_distributed\nfrom grader.models import mlp, synthetic_batch\n"))
    port = free_port()
    env = dict(os.environ, RESULT_FILE=str(tmp_path / "params.json"), OMP_NUM_THREADS="1")
    # Two "machines" on this one, started as a cluster's nodes are: each told its node rank and
    # the first node's address. Every address is 127.0.0.1, so nothing depends on how this
    # machine's hostname resolves.
    logs = [tmp_path / f"node{node}.log" for node in range(2)]
    agents = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
         f"--node-rank={node}", "--master-addr=127.0.0.1", f"--master-port={port}",
         "--local-addr=127.0.0.1", str(script)],
        env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,  # a full pipe could stall an agent
        start_new_session=True)
        for node, log in enumerate(logs)]
    try:
        codes = [a.wait(timeout=120) for a in agents]
    except subprocess.TimeoutExpired:
        codes = None
    finally:
        for a in agents:  # an agent and its workers, whatever happened
            with contextlib.suppress(ProcessLookupError):
                os.killpg(a.pid, signal.SIGKILL)
    assert codes == [0, 0], "\n\n".join(log.read_text() for log in logs)

    # One process on the full global batch must land on the same parameters.
    model = mlp(in_features=16, hidden=32)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = synthetic_batch(16, in_features=16)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    single = torch.cat([p.detach().flatten() for p in model.parameters()])
    ddp = torch.tensor(json.loads((tmp_path / "params.json").read_text()))
    torch.testing.assert_close(ddp, single, atol=1e-5, rtol=1e-5)


def sleeps_forever():
    import pathlib
    import time

    pathlib.Path(os.environ["PID_DIR"], os.environ["RANK"]).write_text(str(os.getpid()))
    time.sleep(600)


def rank_one_fails():
    if os.environ["RANK"] == "1":
        raise ValueError("rank 1 cannot go on")


def test_torchrun_from_a_cell_stops_every_worker_at_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("PID_DIR", str(tmp_path))
    script = write_script(tmp_path / "sleepy.py", sleeps_forever)
    start = time.monotonic()
    # Long enough for both workers to start (and write their pids) on a busy 2-core machine.
    with pytest.raises(LaunchTimeout, match="after 15 s"):
        torchrun(script, nprocs=2, timeout=15)
    assert time.monotonic() - start < 30
    pids = [int((tmp_path / rank).read_text()) for rank in ("0", "1")]
    assert not [pid for pid in pids if running(pid)], "a torchrun worker outlived the call"


def test_torchrun_failure_shows_the_rank_traceback(tmp_path):
    with pytest.raises(RankError, match="rank 1 cannot go on"):
        torchrun(write_script(tmp_path / "fails.py", rank_one_fails), nprocs=2, timeout=60)


def _frozen_objects():
    import gc
    return gc.get_freeze_count()


def test_forked_ranks_leave_the_inherited_objects_to_no_garbage_collection():
    assert launch(_frozen_objects, nprocs=1, backend="gloo", show_output=False)[0] > 0
    assert gc.get_freeze_count() == 0  # unfrozen again here
