"""Collectives, measured: time against message size, the bandwidths nccl-tests reports, and a
latency-bandwidth fit.

:func:`collective_times` times a collective on N ranks over a range of message sizes as
nccl-tests does (warm-up, then every rank starts together, and the slowest rank's time
counts). :func:`bandwidths` turns a time into the *algorithm bandwidth* (bytes / seconds) and
the *bus bandwidth* (the algorithm bandwidth times :func:`bus_factor`, the share of the data
each rank's link carries), which compares across rank counts and with a link's own speed.
:func:`fit_alpha_beta` fits the latency-bandwidth model t = α + β · bytes to measured points,
and :func:`crossover` is the size from which the bandwidth term outweighs the latency.

Sizes follow nccl-tests: the tensor for all-reduce, broadcast and reduce; the gathered
output for all-gather; the input for reduce-scatter; a rank's whole buffer for all-to-all.
"""

import statistics
import time

import torch
import torch.distributed as dist

from . import timing
from .launch import init_distributed, launch

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")
MEASURE_TIMEOUT = 300  # seconds on the ranks: a busy machine slows them, only a hang should stop them


def bus_factor(op, world):
    """The bus bandwidth over the algorithm bandwidth of ``op`` on ``world`` ranks (nccl-tests' rule).

    All-reduce moves each byte twice around the ring (reduce-scatter, then all-gather), less the
    rank's own share: 2(n - 1)/n. All-gather, reduce-scatter and all-to-all move it once: (n - 1)/n.
    Broadcast and reduce send the whole buffer along one chain: 1.

    >>> bus_factor("all_reduce", 2), bus_factor("all_reduce", 8), bus_factor("all_gather", 4)
    (1.0, 1.75, 0.75)
    """
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}: one of {', '.join(OPS)}")
    if world < 1:
        raise ValueError(f"world must be at least 1 rank, got {world}")
    if op in ("broadcast", "reduce"):
        return 1.0
    return (2 if op == "all_reduce" else 1) * (world - 1) / world


def bandwidths(op, nbytes, seconds, world):
    """(algorithm bandwidth, bus bandwidth) in bytes per second of ``op`` moving ``nbytes`` in ``seconds``.

    >>> algbw, busbw = bandwidths("all_reduce", 100e6, 0.01, world=4)
    >>> f"{algbw / 1e9:.1f} GB/s algorithm, {busbw / 1e9:.1f} GB/s bus"
    '10.0 GB/s algorithm, 15.0 GB/s bus'
    """
    if nbytes <= 0 or seconds <= 0:
        raise ValueError(f"bytes and seconds must be positive, got {nbytes} and {seconds}")
    algbw = nbytes / seconds
    return algbw, algbw * bus_factor(op, world)


def fit_alpha_beta(sizes, seconds):
    """Least-squares fit of t = α + β · bytes: (α in seconds, β in seconds per byte).

    α is the latency (a message of nothing still costs it), 1/β the bandwidth that large
    messages approach.

    >>> alpha, beta = fit_alpha_beta([1e3, 1e6, 1e7], [20e-6 + b / 5e9 for b in (1e3, 1e6, 1e7)])
    >>> f"{alpha * 1e6:.0f} us, {1 / beta / 1e9:.0f} GB/s"
    '20 us, 5 GB/s'
    """
    if len(sizes) != len(seconds) or len(sizes) < 2 or len(set(sizes)) < 2:
        raise ValueError("fit_alpha_beta needs at least two different sizes, each with its time")
    mean_x, mean_y = statistics.fmean(sizes), statistics.fmean(seconds)
    beta = sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes, seconds)) / \
        sum((x - mean_x) ** 2 for x in sizes)
    return mean_y - beta * mean_x, beta


def crossover(alpha, beta):
    """The message size in bytes at which the bandwidth term β · bytes equals the latency α.

    Below it a collective's time is mostly latency (batch small messages together: DDP's
    buckets); above it, mostly bandwidth.

    >>> crossover(20e-6, 1 / 5e9)
    100000.0
    """
    if beta <= 0:
        raise ValueError(f"the fit gave no bandwidth term (beta = {beta}): measure larger messages")
    return alpha / beta


def _buffers(op, nbytes, world, device):
    """The input and output tensors of ``op`` for a message of ``nbytes`` (float32) on ``world`` ranks."""
    n = max(world, nbytes // 4 // world * world)  # elements, divisible by the rank count
    if op == "all_gather":
        return torch.ones(n // world, device=device), torch.empty(n, device=device)
    if op == "reduce_scatter":
        return torch.ones(n, device=device), torch.empty(n // world, device=device)
    return torch.ones(n, device=device), torch.empty(n, device=device)


def _run(op, source, out):
    """One call of the collective ``op``."""
    if op == "all_reduce":
        dist.all_reduce(source)
    elif op == "all_gather":
        dist.all_gather_into_tensor(out, source)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(out, source)
    elif op == "all_to_all":
        dist.all_to_all_single(out, source)
    elif op == "broadcast":
        dist.broadcast(source, 0)
    else:
        dist.reduce(source, 0)


def _rank_times(op, sizes, iters, warmup):
    """On each rank: the seconds per call of ``op`` at each size, the slowest rank's."""
    rank, world, device = init_distributed()
    times = []
    for nbytes in sizes:
        source, out = _buffers(op, nbytes, world, device)
        for _ in range(warmup):
            _run(op, source, out)
        timing.wait(device)
        dist.barrier()  # every rank starts the clock together
        start = time.perf_counter()
        for _ in range(iters):
            _run(op, source, out)
        timing.wait(device)
        mine = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=device)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)  # a collective ends when its slowest rank does
        times.append(mine.item())
    return times


def collective_times(op, sizes, ranks=2, iters=5, warmup=2, backend=None):
    """Seconds per call of the collective ``op`` at each message size in ``sizes`` (bytes), on
    ``ranks`` ranks (gloo CPU ranks, or NCCL with a GPU per rank): the slowest rank's time.

    >>> seconds = collective_times("all_reduce", [4096, 4 << 20], ranks=2, iters=3)
    >>> len(seconds) == 2 and all(s > 0 for s in seconds)
    True
    """
    bus_factor(op, ranks)  # an unknown collective fails here, not on the ranks
    if not sizes or min(sizes) <= 0 or iters < 1 or warmup < 0:
        raise ValueError("sizes must be positive byte counts, iters at least 1 and warmup not negative")
    return launch(_rank_times, op, list(sizes), iters, warmup, nprocs=ranks, backend=backend,
                  timeout=MEASURE_TIMEOUT, show_output=False)[0]
