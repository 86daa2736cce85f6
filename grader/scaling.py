"""Scaling experiments: how training time changes with ranks and batch, and the laws that fit it.

:func:`ddp_speedup` measures DDP on N ranks against one process on the same global batch;
:func:`grade_ddp_speedup` does it fairly on a busy grading machine. :func:`amdahl` and
:func:`gustafson` are the two scaling laws; :func:`fit_serial_fraction` fits Amdahl's
serial fraction to measured speedups. :mod:`grader.timing` stays the honest timer.
"""

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from . import hardware
from .launch import init_distributed, launch
from .models import mlp, synthetic_batch


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


def amdahl(serial, n):
    """Amdahl's law: the speedup on ``n`` workers of a fixed job whose ``serial`` fraction cannot be split.

    >>> round(amdahl(0.1, 4), 3), round(amdahl(0.1, 10**6), 2)   # never above 1 / serial
    (3.077, 10.0)
    """
    return 1 / (serial + (1 - serial) / n)


def gustafson(serial, n):
    """Gustafson's law: the scaled speedup on ``n`` workers when the job grows with them.

    >>> gustafson(0.1, 4)
    3.7
    """
    return n - serial * (n - 1)


def serial_fraction(n, speedup):
    """The serial fraction that Amdahl's law gives for one measured ``speedup`` on ``n`` workers.

    >>> round(serial_fraction(4, 100 / 30), 4)   # 100 min on one GPU, 30 min on four
    0.0667
    """
    if n < 2:
        raise ValueError(f"a serial fraction needs at least 2 workers, got {n}")
    return (n / speedup - 1) / (n - 1)


def fit_serial_fraction(ns, speedups):
    """The serial fraction s whose Amdahl curve best fits measured ``speedups`` on ``ns`` workers.

    Least squares on 1 / speedup = s + (1 - s) / n, which is linear in s:
    1/S - 1/n = s (1 - 1/n). Points with n = 1 say nothing about s and are skipped.

    >>> round(fit_serial_fraction([2, 4, 8], [amdahl(0.05, n) for n in (2, 4, 8)]), 6)
    0.05
    """
    pairs = [(1 - 1 / n, 1 / s - 1 / n) for n, s in zip(ns, speedups) if n > 1]
    if not pairs:
        raise ValueError("need a speedup measured on 2 workers or more")
    return sum(x * y for x, y in pairs) / sum(x * x for x, _ in pairs)
