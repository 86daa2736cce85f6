"""Honest timers: warm-up, device synchronisation, repeats, median and spread.

CUDA kernels run asynchronously: a Python call returns as soon as the work is
queued, so a stopwatch around it measures the queueing, not the work. On a GPU,
:func:`measure` brackets every run with CUDA events and waits for them; on a CPU
there is nothing to wait for and a plain clock is already right.
"""

import contextlib
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from . import hardware
from .launch import init_distributed, launch
from .models import mlp, synthetic_batch


@dataclass
class Timing:
    """Seconds per run of one measured function."""

    times: list
    label: str = ""
    synchronized: bool = True
    hardware: str = field(default_factory=hardware.describe)

    @property
    def median(self):
        return statistics.median(self.times)

    @property
    def spread(self):
        """Half the distance between the fastest and slowest run, in seconds."""
        return (max(self.times) - min(self.times)) / 2

    def __str__(self):
        name = f"{self.label}: " if self.label else ""
        note = "" if self.synchronized else " (NOT synchronised)"
        return (f"{name}{_fmt(self.median)} ± {_fmt(self.spread)} "
                f"(median of {len(self.times)}){note} on {self.hardware}")

    __repr__ = __str__


def _fmt(seconds):
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def measure(fn, *, repeats=10, warmup=2, device=None, sync=True, label=""):
    """Time ``fn()`` honestly and return a :class:`Timing`.

    ``warmup`` runs are thrown away (first calls pay for allocation and kernel
    selection). On a CUDA ``device`` each run is timed with CUDA events and waited
    for; ``sync=False`` uses a bare wall clock with no waiting, which is the common
    mistake the course shows next to the right way.

    >>> t = measure(lambda: sum(range(1000)), repeats=5)
    >>> len(t.times), t.median > 0
    (5, True)
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    device = torch.device(device) if device is not None else hardware.device()
    on_gpu = device.type == "cuda"
    # Events are recorded on the current stream of the current device: make it the measured one.
    with torch.cuda.device(device) if on_gpu else contextlib.nullcontext():
        for _ in range(warmup):
            fn()
        if on_gpu:
            torch.cuda.synchronize(device)
        times = []
        for _ in range(repeats):
            if on_gpu and sync:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        if on_gpu and not sync:
            torch.cuda.synchronize(device)  # leave no queued work behind for the next cell
    return Timing(times, label=label, synchronized=sync or not on_gpu)


def speedup(t1, tn):
    """How many times faster N workers are than one: T1 / TN.

    >>> round(speedup(100, 30), 2)
    3.33
    """
    t1, tn = _seconds(t1), _seconds(tn)
    if t1 <= 0 or tn <= 0:
        raise ValueError(f"times must be positive, got T1={t1}, TN={tn}")
    return t1 / tn


def efficiency(t1, tn, n):
    """Speedup per worker: (T1 / TN) / N, 1.0 being perfect scaling.

    >>> round(efficiency(100, 30, 4), 3)
    0.833
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return speedup(t1, tn) / n


def _seconds(t):
    return t.median if isinstance(t, Timing) else float(t)


def _ddp_step_times(per_rank_batches, steps, warmup):
    """On each rank: median seconds of one DDP training step for each per-rank batch.

    With one process there is no DDP. The batches take turns step by step, so anything
    else running on the machine slows each of them alike.
    """
    rank, world, device = init_distributed()
    model = mlp().to(device)
    if world > 1:
        # Small buckets: each layer's gradients are all-reduced while backward still works
        # on the layers before it. This 6 MB model fits one default 25 MB bucket, whose
        # all-reduce could only start once backward had finished.
        model = DDP(model, bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [tuple(t.to(device) for t in synthetic_batch(b, seed=rank)) for b in per_rank_batches]
    # GPU work (NCCL's all-reduce included) is queued: wait for it before reading the clock.
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(warmup):
        for x, y in batches:
            step(x, y)
    sync()
    dist.barrier()
    times = [[] for _ in batches]
    for _ in range(steps):  # no barrier needed: DDP's all-reduce ends each step in step
        for (x, y), seconds in zip(batches, times):
            t0 = time.perf_counter()
            step(x, y)
            sync()
            seconds.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def _ddp_speedups(per_rank_batches, ranks, steps, warmup):
    """DDP speedups of several per-rank batches, measured in turn in the same processes."""
    common = dict(backend=ddp_backend(ranks), threads_per_rank=1, show_output=False)
    t1 = launch(_ddp_step_times, [b * ranks for b in per_rank_batches], steps, warmup, nprocs=1, **common)[0]
    tn = [max(times) for times in zip(*launch(_ddp_step_times, per_rank_batches, steps, warmup,
                                              nprocs=ranks, **common))]
    return [one / many for one, many in zip(t1, tn)]


def ddp_backend(ranks):
    """The backend :func:`ddp_speedup` measures with for ``ranks`` ranks.

    NCCL with one GPU per rank when the machine has that many GPUs (against one process
    on one GPU); otherwise gloo CPU processes with one thread each (against one CPU
    process with one thread).

    >>> ddp_backend(1)   # one rank: nothing to compare across GPUs
    'gloo'
    """
    return "nccl" if ranks >= 2 and hardware.gpu_count() >= ranks else "gloo"


def ddp_measured_on(ranks):
    """In words, what :func:`ddp_speedup` compares for ``ranks`` ranks on this machine.

    >>> ddp_measured_on(2)   # e.g. '2 CPU processes (gloo, 1 thread each) against 1 CPU process (1 thread)'
    '2 ...'
    """
    if ddp_backend(ranks) == "nccl":
        return f"{ranks} GPUs (NCCL, one rank per GPU) against 1 GPU"
    return f"{ranks} CPU processes (gloo, 1 thread each) against 1 CPU process (1 thread)"


def ddp_speedup(per_rank_batch, ranks=None, steps=5, warmup=2):
    """Measured speedup of DDP on ``ranks`` ranks over one process, same global batch.

    With at least ``ranks`` GPUs the ranks are NCCL processes, one per GPU, against one
    process on one GPU, timed with device synchronisation. Otherwise they are gloo CPU
    processes with one thread each, against one process with one thread, so the figure
    says how well the work spreads over ranks (not over threads); :func:`ddp_measured_on`
    says which. Runs in fresh processes through :func:`grader.launch.launch`, so nothing
    in the calling kernel can change it.

    >>> ddp_speedup(64, ranks=2, steps=1, warmup=1) > 0
    True
    """
    return _ddp_speedups([per_rank_batch], ranks or hardware.parallel_ranks(), steps, warmup)[0]


def _ddp_rule(ranks):
    rules = json.loads((Path(__file__).parent / "content" / "thresholds.json").read_text())["ddp_speedup"]
    return rules[ddp_backend(ranks)]


def expected_ddp_speedup(ranks):
    """The DDP speedup a graded challenge asks for on ``ranks`` ranks of a quiet machine.

    A fraction of the rank count, kept per backend in ``grader/content/thresholds.json``
    (the backend :func:`ddp_backend` measures with), never a figure tuned on one machine.

    >>> expected_ddp_speedup(2)   # e.g. 1.5 with CPU ranks (0.75 x 2), 1.0 with GPUs (0.5 x 2)
    1...
    """
    return _ddp_rule(ranks)["fraction_of_ranks"] * ranks


@dataclass
class SpeedupGrade:
    """A learner's DDP speedup measured beside a reference configuration, and the verdict."""

    per_rank_batch: int
    speedup: float  # the learner's batch, best of the rounds
    reference_batch: int
    reference: float  # the reference batch, best of the same rounds
    needed: float
    measured_on: str

    @property
    def passed(self):
        return self.speedup >= self.needed

    def __str__(self):
        return (f"per-rank batch {self.per_rank_batch}: {self.speedup:.2f}x; reference batch "
                f"{self.reference_batch}, measured in turn with it: {self.reference:.2f}x; needed "
                f"{self.needed:.2f}x ({'passed' if self.passed else 'not reached'}), on {self.measured_on}")


def grade_ddp_speedup(per_rank_batch, ranks=2, rounds=2, steps=5):
    """Measure the DDP speedup of ``per_rank_batch`` fairly, even on a busy grading machine.

    The learner's batch and a reference batch (``reference_per_rank_batch`` in
    ``thresholds.json``) take turns step by step in the same fresh processes, so other
    work on the machine slows both alike; the best of ``rounds`` is kept for each. The bar
    is :func:`expected_ddp_speedup`, lowered to ``fraction_of_reference`` of what the
    reference reached when the machine could not give the reference that much, and never
    below 1 (the ranks must beat one process).

    >>> g = grade_ddp_speedup(64, rounds=1, steps=1)   # doctest: +ELLIPSIS
    >>> str(g)
    'per-rank batch 64: ...'
    """
    rule = _ddp_rule(ranks)
    reference_batch = rule["reference_per_rank_batch"]
    batches = list(dict.fromkeys([per_rank_batch, reference_batch]))  # once if they are the same
    best = [max(s) for s in zip(*(_ddp_speedups(batches, ranks, steps, 2) for _ in range(rounds)))]
    mine, reference = best[0], best[-1]
    needed = max(1.0, min(expected_ddp_speedup(ranks), rule["fraction_of_reference"] * reference))
    return SpeedupGrade(per_rank_batch, mine, reference_batch, reference, needed, ddp_measured_on(ranks))
