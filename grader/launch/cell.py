"""Run a function defined in a notebook on N ranks, with torch's own elastic launcher.

``launch(train, nprocs=2)`` starts the same machinery as ``torchrun`` (an elastic agent,
a c10d rendezvous on a free local port, one worker process per rank with RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set) from inside a notebook cell:

- the function, and any closures or classes it uses, travel to the ranks by value
  (cloudpickle), so functions defined in the notebook work;
- each rank's output is shown live in the cell, prefixed with its rank, and every
  rank's return value comes back as a list ordered by rank;
- a rank that raises stops the run at once and its traceback is raised here; a run
  that hangs ends at ``timeout`` with the stuck ranks and where they were stuck;
  interrupting the cell stops every rank; no worker outlives the call.

The same function runs unchanged under ``torchrun`` when it joins the process group
with :func:`init_distributed` (see :func:`write_script`).
"""


import contextlib
import faulthandler
import functools
import gc
import json
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import uuid
from pathlib import Path

import cloudpickle
import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from .. import hardware
from .processes import alive, send, wait_gone
from .rank import BACKEND, RUN_DIR, full_float32

# A forked rank inherits every object of the launching process, some of them left half-made by
# threads that do not exist in the child (a rank once died of a segmentation fault in its first
# garbage collection). Frozen just before each fork, the inherited objects are never traversed
# by a child's collector; the parent unfreezes them at once.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=gc.freeze, after_in_parent=gc.unfreeze)

# The environment this module was imported with. In a rank forked from the fork server, that is
# the server's, from when it started; what differs from it is what the launcher set for the rank.
_IMPORT_ENVIRON = dict(os.environ)

START_LIMIT = 120  # seconds for every rank to be running (spawned ranks import torch afresh)
EXIT_LIMIT = 30  # seconds for the processes to exit once every rank has left its group


class RankError(RuntimeError):
    """A rank raised; the message holds its traceback."""


class LaunchTimeout(TimeoutError):
    """The ranks did not finish in time; the message says which and where they were."""


def launch(fn, *args, nprocs=None, backend=None, timeout=60, threads_per_rank=None,
           start_method=None, show_output=True, **kwargs):
    """Run ``fn(*args, **kwargs)`` on ``nprocs`` ranks and return their results by rank.

    ``nprocs`` defaults to :func:`hardware.parallel_ranks` and ``backend`` to
    ``hardware.backend(nprocs)`` (NCCL when this machine has a GPU for every rank; gloo
    on CPU processes otherwise). CPU ranks get ``threads_per_rank`` threads each, by
    default the cores divided among the ranks, so they do not fight over cores.
    Ranks are forked where that is safe (fast) and spawned otherwise: see
    :func:`start_method_for`. CPU ranks never touch a GPU: :func:`hardware.gpu_count`
    says 0 in them.

    >>> def hello(greeting):
    ...     return f"{greeting} from rank {os.environ['RANK']}"
    >>> launch(hello, "hi", nprocs=2, show_output=False)
    ['hi from rank 0', 'hi from rank 1']
    """
    if not callable(fn):
        raise TypeError(f"launch needs a function to run on each rank, got {type(fn).__name__}")
    from grader.grading import remote

    if remote.grading() and remote.reaches_answers((fn, args, kwargs)):
        # A test in the grader's kernel launching the student's code: the ranks start from the answer's
        # (sandboxed) kernel, and their results come back as data.
        return remote.run(launch, fn, *args, nprocs=nprocs, backend=backend, timeout=timeout,
                          threads_per_rank=threads_per_rank, start_method=start_method,
                          show_output=show_output, **kwargs)
    nprocs = hardware.parallel_ranks() if nprocs is None else nprocs
    if nprocs < 1 or timeout <= 0:
        raise ValueError(f"nprocs must be at least 1 and timeout positive, got {nprocs} and {timeout}")
    backend = backend or hardware.backend(nprocs)
    if backend == "nccl" and nprocs > hardware.gpu_count():
        raise ValueError(f"nccl needs one GPU per rank: {nprocs} ranks, {hardware.gpu_count()} GPUs")
    if backend == "nccl":
        for note in hardware.nccl_notes(nprocs):
            print("note:", note)
    if threads_per_rank is None:
        threads_per_rank = max(1, hardware.cpu_cores() // nprocs)
    if start_method is None:
        start_method = start_method_for(backend)
    if start_method == "forkserver":  # the server imports torch and this module once, for every launch after
        multiprocessing.set_forkserver_preload([__name__])
    elif start_method == "fork":
        preload()

    try:
        payload = cloudpickle.dumps((fn, args, kwargs))
    except Exception as e:
        raise TypeError(f"{getattr(fn, '__name__', fn)!s} or its arguments cannot be sent to the ranks: {e}") from e
    run_dir = Path(tempfile.mkdtemp(prefix="course-launch-"))
    (run_dir / "payload.pkl").write_bytes(payload)
    if start_method == "forkserver":  # the server's environment is from when it started: the ranks take this one's
        (run_dir / "environ.json").write_text(json.dumps(dict(os.environ)))  # (multiprocessing sends folder and path)
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nprocs, run_id=uuid.uuid4().hex,
        rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0",  # port 0: the OS picks a free one
        max_restarts=0, monitor_interval=0.05, start_method=start_method,
        logs_specs=DefaultLogsSpecs(log_dir=str(run_dir / "elastic")))
    run = _Run(run_dir, nprocs, show_output)
    agent_error = []
    # An Event, not Thread.is_alive(): an interrupted join() can mark a live thread stopped.
    agent_done = threading.Event()

    def agent():
        try:
            elastic_launch(config, _rank_main)(str(run_dir), backend, threads_per_rank)
        except BaseException as e:  # reported below, from the caller's thread
            agent_error.append(e)
        finally:
            agent_done.set()

    thread = threading.Thread(target=agent, name="elastic-agent", daemon=True)
    # ``timeout`` counts from the moment every rank runs: starting them (a second when
    # forked, several when spawned) is not the function's time. Starting has its own limit.
    deadline = time.monotonic() + START_LIMIT + timeout
    started = finished = timed_out = False
    with _quiet_elastic_logs():
        try:
            thread.start()
            while not agent_done.wait(0.05):
                run.show_new_output()
                if not started and len(run.pids()) == nprocs:
                    started, deadline = True, time.monotonic() + timeout
                # Once every rank has left its group the function is done; exiting a
                # process (slow on a busy machine) is not the function's time either.
                if started and not finished and run.all_left():
                    finished, deadline = True, time.monotonic() + EXIT_LIMIT
                if time.monotonic() > deadline:
                    timed_out = True
                    run.stop(dump_stacks=True)
                    break
        finally:
            # Until the agent is gone, stop any rank still running, including ranks that
            # were still starting when the run was interrupted.
            end = time.monotonic() + 30
            while not agent_done.is_set() and time.monotonic() < end:
                run.stop()
                agent_done.wait(0.1)
            try:
                run.show_new_output(final=True)
                run.close_progress()
                failures = run.failures()
                missing = [r for r in range(nprocs) if not (run_dir / f"result.{r}").exists()]
                # At a time-out, a rank that left its result but never got out of the group
                # (NCCL work still queued, say) is stuck too; one waiting for its peers is not.
                stuck = missing if not timed_out or missing else \
                    [r for r in range(nprocs) if not (run_dir / f"left.{r}").exists()]
                stacks = {r: run.read(f"stack.{r}") for r in stuck}
                results = [run.load(f"result.{r}") for r in range(nprocs) if r not in missing]
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)

    if failures:
        rank, tb = failures[0]
        others = f" (ranks {[r for r, _ in failures[1:]]} failed too)" if len(failures) > 1 else ""
        raise RankError(f"rank {rank} of {nprocs} raised{others}; the other ranks were stopped.\n\n{tb}")
    if timed_out:
        where = "\n".join(f"--- rank {r} ---\n{_innermost(stacks[r])}" for r in stuck)
        if finished:
            raise LaunchTimeout(f"every rank finished, but the processes had not exited "
                                f"{EXIT_LIMIT} s later and were stopped")
        if not started:
            raise LaunchTimeout(f"ranks {stuck} of {nprocs} had not started after {START_LIMIT + timeout} s "
                                f"and were stopped (a machine short of memory or processes?)")
        raise LaunchTimeout(
            f"ranks {stuck} of {nprocs} were still running after {timeout} s and were stopped. "
            f"The usual causes: a collective (all_reduce, barrier, broadcast...) that not every "
            f"rank calls waits forever; a blocking send (or recv) whose partner is itself blocked "
            f"in a send (or recv) does too. Where they were:\n{where}")
    if stuck:
        cause = f":\n{agent_error[0]}" if agent_error else ""
        raise RankError(f"ranks {stuck} of {nprocs} did not finish and raised no Python exception "
                        f"(killed, out of memory, or the launcher failed){cause}") from None
    return results


@functools.cache
def preload():
    """Import here, once, what DDP imports on its first use in a process: ``torch._dynamo`` and the
    compiler stack behind it, 1.4 to 1.7 s on a 2-core machine. Ranks forked from this process then
    start with it: a 2-rank launch that builds DDP took 1.8-2.1 s without it and 0.2-0.5 s with it.
    (Not for a fork server, which serves ranks on a machine with GPUs: it stays as light as it is.)"""
    import torch._dynamo  # noqa: F401


def start_method_for(backend):
    """How :func:`launch` starts ranks for ``backend``: "fork", "forkserver" or "spawn".

    - Without a GPU, every rank is forked: fast, no fresh interpreter importing torch.
    - NCCL ranks are spawned: they use CUDA, which a forked child cannot start once the
      parent has called into it (even ``torch.cuda.is_available()`` counts).
    - CPU ranks on a machine with a GPU are forked from a fork server, a process that
      imported torch and never trained. Forked from the kernel, they could not run a
      backward pass once the kernel has run one (autograd starts a thread per GPU then,
      and torch refuses: "Unable to handle autograd's threading in combination with
      fork-based multiprocessing"); spawned, every rank of every launch would import
      torch afresh (on an H200, lesson 02's autograde had not finished after 280 s
      spawned; forked, its launches failing, it took 72 s).

    >>> start_method_for("nccl")
    'spawn'
    >>> start_method_for("gloo") == ("forkserver" if torch.cuda.device_count() else "fork")
    True
    """
    if backend == "nccl" or not hasattr(os, "fork"):
        return "spawn"
    return "forkserver" if torch.cuda.device_count() else "fork"


class _Run:
    """The files one launch shares with its ranks, read from the caller's side."""

    def __init__(self, run_dir, nprocs, show_output):
        self.dir, self.nprocs, self.show = run_dir, nprocs, show_output
        self.offsets = [0] * nprocs
        self.partial = [""] * nprocs
        self.bar = None

    def read(self, name):
        path = self.dir / name
        return path.read_text(errors="replace") if path.exists() else ""

    def load(self, name):
        return cloudpickle.loads((self.dir / name).read_bytes())

    def all_left(self):
        return all((self.dir / f"left.{r}").exists() for r in range(self.nprocs))

    def pids(self):
        return [int(t) for r in range(self.nprocs) if (t := self.read(f"pid.{r}").strip())]

    def failures(self):
        """(rank, traceback) of every rank that raised, the first to fail first."""
        paths = [(p.stat().st_mtime_ns, r, p) for r in range(self.nprocs)
                 if (p := self.dir / f"error.{r}").exists()]
        return [(r, p.read_text(errors="replace")) for _, r, p in sorted(paths)]

    def show_new_output(self, final=False):
        for r in range(self.nprocs):
            path = self.dir / f"out.{r}"
            if not path.exists():
                continue
            with open(path, "rb") as f:
                f.seek(self.offsets[r])
                chunk = f.read()
            self.offsets[r] += len(chunk)
            lines = (self.partial[r] + chunk.decode(errors="replace")).split("\n")
            self.partial[r] = "" if final else lines.pop()
            if self.show:
                for line in lines if not final else [l for l in lines if l]:
                    print(f"[rank {r}] {line}", flush=True)
        self.update_progress()

    def update_progress(self):
        text = self.read("progress").split()
        if len(text) != 2:
            return
        done, total = map(int, text)
        if self.bar is None:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, desc="rank 0", file=sys.stdout, leave=True)
        self.bar.update(done - self.bar.n)

    def close_progress(self):
        if self.bar is not None:
            self.bar.close()

    def stop(self, dump_stacks=False):
        """Stop every rank still running (after asking each for its stack, if wanted)."""
        running = [p for p in self.pids() if alive(p)]
        if dump_stacks and running:
            for pid in running:
                send(pid, signal.SIGUSR1)
            time.sleep(0.5)
        for pid in running:
            send(pid, signal.SIGKILL)
        for pid in running:
            wait_gone(pid)


def _innermost(stack):
    """The frames of the rank's function from a faulthandler dump, innermost first."""
    if not stack:
        return "(no stack: the rank had not started its function)"
    blocks = stack.split("\n\n")
    main = next((b for b in blocks if "Current thread" in b), blocks[0])
    frames = []
    for line in main.splitlines():
        if "grader/launch/cell.py" in line:  # below this: the launcher and multiprocessing
            break
        if line.strip().startswith("File"):
            frames.append(line)
    return "\n".join(frames) or main


@contextlib.contextmanager
def _quiet_elastic_logs():
    """Keep the launcher's log lines out of the cell (stderr costs nbgrader points)."""
    loggers = [logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict)
               if name.startswith(("torch.distributed.elastic", "torch.distributed.launcher",
                                   "torch.multiprocessing"))]
    saved = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, saved):
            lg.disabled = was


def _rank_main(run_dir, backend, threads):
    """Entry point of every rank: set up output, run the function, leave its result."""
    run_dir = Path(run_dir)
    launcher = run_dir / "environ.json"
    if launcher.exists():  # forked from the fork server: the launching process's environment, as it is now
        for_this_rank = {k: v for k, v in os.environ.items() if _IMPORT_ENVIRON.get(k) != v}
        os.environ.clear()
        os.environ.update({**json.loads(launcher.read_text()), **for_this_rank})
    rank = int(os.environ["RANK"])
    (run_dir / f"pid.{rank}").write_text(str(os.getpid()))
    # fd level, so output from C++ (gloo, NCCL) is captured too
    out = os.open(run_dir / f"out.{rank}", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.stdout = sys.stderr = open(1, "w", buffering=1, closefd=False)
    stack_file = open(run_dir / f"stack.{rank}", "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    os.environ[RUN_DIR] = str(run_dir)
    os.environ[BACKEND] = backend
    if backend != "nccl":
        os.environ[hardware.CPU_RANK] = "1"  # a CPU rank sees no GPU, forked after CUDA or not
    try:
        full_float32()
        torch.set_num_threads(threads)  # CPU work (data, the CPU backend) shares the cores out
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        fn, args, kwargs = cloudpickle.loads((run_dir / "payload.pkl").read_bytes())
        blob = cloudpickle.dumps(fn(*args, **kwargs))
    except BaseException as e:
        # Start at the user's function; a failure in the rank's own set-up shows in full.
        tb = e.__traceback__.tb_next or e.__traceback__
        (run_dir / f"error.{rank}").write_text("".join(traceback.format_exception(type(e), e, tb)))
        sys.stdout.flush()
        os._exit(1)  # the agent sees the failure and stops the other ranks at once
    tmp = run_dir / f"result.{rank}.tmp"
    tmp.write_bytes(blob)
    tmp.rename(run_dir / f"result.{rank}")
    # Stay in the group until every rank is done, as a real job would: a rank still
    # waiting in a collective then hangs (and times out) instead of seeing its peer leave.
    world = int(os.environ["WORLD_SIZE"])
    while len(list(run_dir.glob("result.*[0-9]"))) < world:
        time.sleep(0.01)
    if dist.is_initialized():
        gc.collect()  # what the function left in reference cycles (a DDP model) goes first
        dist.destroy_process_group()
    (run_dir / f"left.{rank}").touch()
