"""Scaling experiments: how training time changes with ranks and batch, and the laws that fit it.

:func:`ddp_speedup` measures DDP on N ranks against one process on the same global batch
(:func:`ddp_speedups` for several batches at once);
:func:`grader.grading.fairness.grade_ddp_speedup` grades it fairly on a busy machine. :func:`step_times` and :func:`throughput` sweep the per-rank
batch; :func:`strong_scaling` and :func:`weak_scaling` sweep the rank count. :func:`amdahl`
and :func:`gustafson` are the two scaling laws; :func:`fit_serial_fraction` fits Amdahl's
serial fraction to measured speedups. :mod:`grader.timing` stays the honest timer.
"""

import statistics
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from . import hardware, timing
from .content import thresholds
from .launch import init_distributed, launch
from .models import mlp, synthetic_batch

# Seconds the toolkit's own measurements may take on their ranks: a busy machine slows them several
# times over, and only a hang (a bug, not a learner's answer) should stop them.
MEASURE_TIMEOUT = 300


def _trainer(model, device):
    """A function that takes one SGD training step of ``model`` and waits until it is done."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        timing.wait(device)  # GPU work (NCCL's all-reduce included) is queued: wait before the clock
    return step


def _ddp(model):
    # Small buckets: a bucket's all-reduce starts once its gradients are ready, while backward still
    # works on the layers before it. DDP's default caps the first bucket at 1 MiB too (the others at
    # 25 MiB); for this MLP both make the same two buckets: the last two layers', then the first's.
    return DDP(model, bucket_cap_mb=1)


def _ddp_step_times(per_rank_batches, steps, warmup):
    """On each rank: median seconds of one DDP training step for each per-rank batch.

    With one process there is no DDP. The batches take turns step by step, so anything
    else running on the machine slows each of them alike.
    """
    rank, world, device = init_distributed()
    step = _trainer(_ddp(mlp().to(device)) if world > 1 else mlp().to(device), device)
    batches = [tuple(t.to(device) for t in synthetic_batch(b, seed=rank)) for b in per_rank_batches]
    for _ in range(warmup):
        for x, y in batches:
            step(x, y)
    dist.barrier()
    times = [[] for _ in batches]
    for _ in range(steps):  # no barrier needed: DDP's all-reduce ends each step in step
        for (x, y), seconds in zip(batches, times):
            t0 = time.perf_counter()
            step(x, y)
            seconds.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def _one_and_ddp_step_times(pairs, steps, warmup, rounds=1):
    """On each rank: for each ``(one_batch, per_rank_batch)`` pair, median seconds of a
    one-process step on ``one_batch`` (rank 0 alone, while the others wait) and of a DDP step
    on ``per_rank_batch``. Everything takes turns step by step in the same processes, so
    anything else running on the machine slows each alike: the ratios stay fair on a busy one.
    ``rounds`` measures it all again that many times, one round after the other: a list per round.
    """
    rank, world, device = init_distributed()
    alone = _trainer(mlp().to(device), device) if rank == 0 else None
    together = _trainer(_ddp(mlp().to(device)), device)
    data = [[tuple(t.to(device) for t in synthetic_batch(b, seed=seed)) for b, seed in ((one, 0), (mine, rank))]
            for one, mine in pairs]
    measured = []
    for _ in range(rounds):
        times = [([], []) for _ in pairs]
        for i in range(warmup + steps):
            for (big, mine), (one, ddp) in zip(data, times):
                dist.barrier()
                if rank == 0:
                    t0 = time.perf_counter()
                    alone(*big)
                    one.append(time.perf_counter() - t0)
                dist.barrier()
                t0 = time.perf_counter()
                together(*mine)
                ddp.append(time.perf_counter() - t0)
        measured.append([(statistics.median(one[warmup:]) if rank == 0 else None, statistics.median(ddp[warmup:]))
                         for one, ddp in times])
    return measured


def _in_turn(pairs, ranks, steps, warmup, backend, rounds=1):
    """Per round, (one-process seconds, slowest rank's DDP seconds) for each pair, on ``ranks`` fresh ranks."""
    per_rank = launch(_one_and_ddp_step_times, pairs, steps, warmup, rounds, nprocs=ranks, backend=backend,
                      threads_per_rank=1, show_output=False, timeout=MEASURE_TIMEOUT)
    return [[(per_rank[0][r][i][0], max(mine[r][i][1] for mine in per_rank)) for i in range(len(pairs))]
            for r in range(rounds)]


def step_times(per_rank_batches, ranks, steps=5, warmup=2, backend=None):
    """Median seconds of one DDP training step of the course MLP on ``ranks`` fresh ranks, per batch.

    The batches take turns step by step in the same processes; a step lasts as long as its
    slowest rank. ``backend`` defaults to :func:`ddp_backend` of ``ranks`` (CPU ranks have
    one thread each); pass ``ddp_backend(n)`` to compare with a run on n ranks.

    >>> [t > 0 for t in step_times([16, 64], ranks=1, steps=1, warmup=1)]
    [True, True]
    """
    times = launch(_ddp_step_times, list(per_rank_batches), steps, warmup, nprocs=ranks,
                   backend=backend or ddp_backend(ranks), threads_per_rank=1, show_output=False,
                   timeout=MEASURE_TIMEOUT)
    return [max(t) for t in zip(*times)]


def throughput(per_rank_batches, ranks, steps=5, warmup=2, backend=None):
    """Training samples per second (all ranks together) for each per-rank batch: see :func:`step_times`.

    >>> [s > 0 for s in throughput([16, 64], ranks=1, steps=1, warmup=1)]
    [True, True]
    """
    times = step_times(per_rank_batches, ranks, steps, warmup, backend)
    return [b * ranks / t for b, t in zip(per_rank_batches, times)]


def ddp_speedups(per_rank_batches, ranks=None, steps=5, warmup=2, rounds=1):
    """:func:`ddp_speedup` of several per-rank batches, each DDP step taking turns with a step of
    one process on the same global batch, in the same fresh processes. With ``rounds`` > 1,
    the speedups of each round (measured one after the other in those processes): a list per round.

    >>> [s > 0 for s in ddp_speedups([64, 256], ranks=2, steps=1, warmup=1)]
    [True, True]
    >>> len(ddp_speedups([64], ranks=2, steps=1, warmup=1, rounds=2))
    2
    """
    ranks = ranks or hardware.parallel_ranks()
    pairs = [(b * ranks, b) for b in per_rank_batches]
    measured = [[one / many for one, many in per_round]
                for per_round in _in_turn(pairs, ranks, steps, warmup, ddp_backend(ranks), rounds)]
    _MEASURED.update(("ddp", b, ranks, s) for speedups in measured for b, s in zip(per_rank_batches, speedups))
    return measured if rounds > 1 else measured[0]


# What this process measured: a value graded as a measurement must be one of these, not an equal
# number typed in (a learner's cell cannot reach this private set: the grading scan refuses it).
_MEASURED = set()


def measured_speedups(per_rank_batch, ranks):
    """The speedups :func:`ddp_speedups` (or :func:`ddp_speedup`) measured here for this batch and rank count.

    >>> s = ddp_speedup(64, ranks=2, steps=1, warmup=1)
    >>> s in measured_speedups(64, 2), 1.9 in measured_speedups(64, 2)
    (True, False)
    """
    return {s for kind, b, n, s in _MEASURED if (kind, b, n) == ("ddp", per_rank_batch, ranks)}


def measured_scaling(kind, batch, ranks, speedups):
    """Whether a ``kind`` ("strong" or "weak") scaling sweep of ``batch`` (the global batch for
    strong scaling, the per-rank one for weak) here returned exactly these ``speedups`` on these ``ranks``.

    >>> points = strong_scaling(256, ranks=[1, 2], steps=1, warmup=1)
    >>> ranks, speedups = [p.ranks for p in points], [p.speedup for p in points]
    >>> [measured_scaling(k, b, ranks, speedups) for k, b in (("strong", 256), ("strong", 512), ("weak", 256))]
    [True, False, False]
    """
    return (kind, batch, tuple(ranks), tuple(speedups)) in _MEASURED


@dataclass
class ScalingPoint:
    """One row of a strong or weak scaling table."""

    ranks: int
    per_rank_batch: int
    seconds: float  # one training step (on 1 rank: one process, no DDP)
    speedup: float  # strong: T1 / TN; weak (scaled speedup): N x T1 / TN
    efficiency: float  # speedup / N

    def __str__(self):
        return (f"{self.ranks} rank(s) x batch {self.per_rank_batch}: {self.seconds * 1e3:.1f} ms per step, "
                f"speedup {self.speedup:.2f}x, efficiency {self.efficiency:.0%}")


def _scaling(kind, ranks, one_batch, per_rank, speedup, steps, warmup, rounds=1):
    """A table per round: rows for 1 rank and each larger count in ``ranks``. Every count is
    timed in its own fresh processes, in turn with its own one-process baseline
    (:func:`_one_and_ddp_step_times`), its rounds one after the other in the same processes."""
    ranks = list(ranks or range(1, hardware.parallel_ranks() + 1))
    if ranks[0] != 1 or len(ranks) < 2:
        raise ValueError(f"a scaling sweep starts at 1 rank, the baseline, and goes on to more; got {ranks}")
    backend = ddp_backend(max(ranks))
    measured = {n: _in_turn([(one_batch, per_rank(n))], n, steps, warmup, backend, rounds) for n in ranks[1:]}
    tables = []
    for r in range(rounds):
        rows, baselines = [], []
        for n, per_round in measured.items():
            ((t1, tn),) = per_round[r]
            baselines.append(t1)
            gain = speedup(n, t1, tn)
            rows.append(ScalingPoint(n, per_rank(n), tn, gain, gain / n))
        tables.append([ScalingPoint(1, per_rank(1), statistics.median(baselines), 1.0, 1.0), *rows])
    _MEASURED.update((kind, one_batch, tuple(p.ranks for p in table), tuple(p.speedup for p in table)) for table in tables)
    return tables


# A global batch each backend's ranks speed up: CPU ranks (one core each) gain from splitting
# 512 samples of the course's MLP; a GPU does 512 in a fraction of a millisecond, less than the
# kernel launches and the all-reduce cost, so GPU ranks get 64 times the work.
STRONG_BATCH = {"gloo": 512, "nccl": 32768}


def strong_batch(ranks):
    """The global batch to scale over 1 to ``ranks`` ranks here (:data:`STRONG_BATCH` for the
    backend :func:`ddp_backend` picks): enough work per step for the ranks to speed it up.

    >>> strong_batch(2) == (32768 if ddp_backend(2) == "nccl" else 512)
    True
    """
    return STRONG_BATCH[ddp_backend(ranks)]


def strong_scaling(global_batch, ranks=None, steps=5, warmup=2):
    """Strong scaling: the same ``global_batch`` split over 1, 2, ... ranks (default: up to
    :func:`hardware.parallel_ranks`). Speedup T1 / TN; perfect is N.

    >>> [p.ranks for p in strong_scaling(256, ranks=[1, 2], steps=1, warmup=1)]
    [1, 2]
    """
    return strong_scaling_rounds(global_batch, ranks, steps, warmup, rounds=1)[0]


def strong_scaling_rounds(global_batch, ranks=None, steps=5, warmup=2, rounds=5):
    """:func:`strong_scaling` measured ``rounds`` times: a table per round.

    Each rank count is started once and measures its rounds one after the other, so
    repeating costs no extra start of ranks (NCCL ranks take seconds each to spawn).

    >>> len(strong_scaling_rounds(256, ranks=[1, 2], steps=1, warmup=1, rounds=2))
    2
    """
    return _scaling("strong", ranks, global_batch, lambda n: global_batch // n, lambda n, t1, tn: t1 / tn, steps, warmup,
                    rounds)


def weak_scaling(per_rank_batch, ranks=None, steps=5, warmup=2):
    """Weak scaling: ``per_rank_batch`` on every rank, so the global batch grows with the ranks.
    Scaled speedup N x T1 / TN (samples per second against one rank); perfect is N.

    >>> [p.per_rank_batch for p in weak_scaling(64, ranks=[1, 2], steps=1, warmup=1)]
    [64, 64]
    """
    return _scaling("weak", ranks, per_rank_batch, lambda n: per_rank_batch, lambda n, t1, tn: n * t1 / tn, steps,
                    warmup)[0]


def ddp_backend(ranks):
    """The backend :func:`ddp_speedup` measures with for ``ranks`` ranks.

    :func:`hardware.backend`'s rule for two ranks or more: NCCL with one GPU per rank when the
    machine has that many GPUs (against one process on one GPU); otherwise gloo CPU processes
    with one thread each (against one CPU process with one thread). One rank is always a CPU
    process: on a one-GPU machine its throughput is compared with gloo ranks, never with a GPU.

    >>> ddp_backend(1)   # one rank: nothing to compare across GPUs
    'gloo'
    """
    return hardware.backend(ranks) if ranks >= 2 else "gloo"


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
    return ddp_speedups([per_rank_batch], ranks, steps, warmup)[0]


def expected_ddp_speedup(ranks):
    """The DDP speedup a graded challenge asks for on ``ranks`` ranks of a quiet machine.

    A fraction of the rank count, kept per backend in ``grader/content/thresholds.json``
    (the backend :func:`ddp_backend` measures with), never a figure tuned on one machine.

    >>> expected_ddp_speedup(2)   # e.g. 1.2 with CPU ranks (0.6 x 2), 1.0 with GPUs (0.5 x 2)
    1...
    """
    return thresholds("ddp_speedup")[ddp_backend(ranks)]["fraction_of_ranks"] * ranks


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


def serial_note(serial):
    """What a fitted serial fraction outside 0..1 means, in words ("" inside it, where it is a share of the work).

    >>> serial_note(0.05)
    ''
    >>> serial_note(1.436)[:61]
    'above 1, no share of the work: the ranks together were slower'
    """
    if serial > 1:
        return ("above 1, no share of the work: the ranks together were slower than one process, and what "
                "Amdahl's law reads as serial work is parallel overhead (communication, processes sharing cores)")
    if serial < 0:
        return ("below 0, no share of the work: the ranks were faster than linear (each one's data fits its caches, "
                "or noise), which Amdahl's law does not describe")
    return ""


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
