"""Collectives, measured: time against message size, the bandwidths nccl-tests reports, a
latency-bandwidth fit, DDP's buckets, and a training step's compute against its communication.

:func:`collective_times` times a collective on N ranks over a range of message sizes: warm-up
calls, then every rank starts together, and the slowest rank's time counts (nccl-tests
averages over ranks by default and takes the slowest with ``-a 3``; a collective is done only
when its last rank is). :func:`bandwidths` turns a time into the *algorithm bandwidth*
(bytes / seconds) and the *bus bandwidth* (the algorithm bandwidth times :func:`bus_factor`,
the share of the data each rank's link carries), which compares across rank counts and with a
link's own speed; :func:`copy_bandwidth` measures that speed here. :func:`fit_alpha_beta` fits
the latency-bandwidth model t = α + β · bytes to measured points, and :func:`crossover` is the
size from which the bandwidth term outweighs the latency.

:func:`buckets` is DDP's rule for grouping gradients into all-reduce messages, and
:func:`bucket_times` measures what buckets save over one message per parameter;
:func:`compute_and_communication` sets a training step's backward beside the all-reduce of its
gradients, to say when a step is communication-bound; :func:`profile_step` shows one step as
``torch.profiler`` saw it, computation and communication in time, and how much of the
communication the computation hid.

Sizes follow nccl-tests: the tensor for all-reduce, broadcast and reduce; the gathered
output for all-gather; the input for reduce-scatter; a rank's whole buffer for all-to-all.
"""

import functools
import statistics
import time
from dataclasses import dataclass

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


# The tensor forms of all-gather and reduce-scatter; torch 2.13 renamed them (the old names warn).
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def _run(op, source, out):
    """One call of the collective ``op``."""
    if op == "all_reduce":
        dist.all_reduce(source)
    elif op == "all_gather":
        _ALL_GATHER(out, source)
    elif op == "reduce_scatter":
        _REDUCE_SCATTER(out, source)
    elif op == "all_to_all":
        dist.all_to_all_single(out, source)
    elif op == "broadcast":
        dist.broadcast(source, 0)
    else:
        dist.reduce(source, 0)


def _slowest(seconds, device):
    """The largest of every rank's ``seconds``: a collective ends when its slowest rank does."""
    mine = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return mine.item()


def _timed_together(run, iters, device):
    """Seconds per call of ``run()`` over ``iters`` calls, every rank starting the clock together
    (the device's queued work done, then a barrier); the slowest rank's."""
    timing.wait(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        run()
    timing.wait(device)
    return _slowest((time.perf_counter() - start) / iters, device)


def _rank_times(op, sizes, iters, warmup):
    """On each rank: the seconds per call of ``op`` at each size, the slowest rank's."""
    rank, world, device = init_distributed()
    times = []
    for nbytes in sizes:
        source, out = _buffers(op, nbytes, world, device)
        for _ in range(warmup):
            _run(op, source, out)
        times.append(_timed_together(lambda: _run(op, source, out), iters, device))
    return times


def collective_times(op, sizes, ranks=2, iters=5, warmup=2, backend=None):
    """Seconds per call of the collective ``op`` at each message size in ``sizes`` (bytes), on
    ``ranks`` ranks (gloo CPU ranks, or NCCL with a GPU per rank): the slowest rank's time.

    >>> seconds = collective_times("all_reduce", [4096, 4 << 20], ranks=2, iters=3)
    >>> len(seconds) == 2 and all(s > 0 for s in seconds)
    True
    """
    if op not in OPS:  # fails here, not on the ranks
        raise ValueError(f"unknown collective {op!r}: one of {', '.join(OPS)}")
    if not sizes or min(sizes) <= 0 or iters < 1 or warmup < 0:
        raise ValueError("sizes must be positive byte counts, iters at least 1 and warmup not negative")
    return launch(_rank_times, op, list(sizes), iters, warmup, nprocs=ranks, backend=backend,
                  timeout=MEASURE_TIMEOUT, show_output=False)[0]


def buckets(sizes, cap_bytes):
    """Parameters grouped into all-reduce buckets by DDP's rule: parameter indices from the last to
    the first (the order backward produces their gradients), a bucket closed once it holds at least
    ``cap_bytes``; what is left at the end is the last bucket.

    ``sizes`` are the gradients' sizes in bytes, in the order of ``model.parameters()``.

    >>> buckets([400, 400, 400, 400], cap_bytes=800)
    [[3, 2], [1, 0]]
    >>> buckets([100, 4000, 100, 100], cap_bytes=1000)   # a large gradient closes its bucket alone
    [[3, 2, 1], [0]]
    """
    if cap_bytes <= 0:
        raise ValueError(f"a bucket's cap must be positive, got {cap_bytes} bytes")
    done, bucket, held = [], [], 0
    for i in reversed(range(len(sizes))):
        bucket.append(i)
        held += sizes[i]
        if held >= cap_bytes:
            done.append(bucket)
            bucket, held = [], 0
    return done + [bucket] if bucket else done


def gradient_sizes(model):
    """The bytes of each parameter's gradient, in the order of ``model.parameters()``.

    >>> from grader.models import transformer
    >>> sizes = gradient_sizes(transformer(layers=4))
    >>> len(sizes), sum(sizes)
    (48, 799744)
    """
    return [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]


def _reduce_in_buckets(grads, plan):
    """All-reduce ``grads`` bucket by bucket (each bucket flattened into one message, launched
    without waiting), then wait for all and copy the sums back out, as DDP does."""
    flats = [grads[b[0]] if len(b) == 1 else torch.cat([grads[i].flatten() for i in b]) for b in plan]
    works = [dist.all_reduce(flat, async_op=True) for flat in flats]
    for work in works:
        work.wait()
    for flat, b in zip(flats, plan):
        if len(b) > 1:
            offset = 0
            for i in b:
                grads[i].copy_(flat[offset:offset + grads[i].numel()].view_as(grads[i]))
                offset += grads[i].numel()


def _bucket_rank_times(sizes, caps, iters, warmup, rounds):
    """On each rank: seconds to all-reduce gradients of ``sizes`` once, per parameter (cap 0) and in
    buckets of each cap, measured in turn ``rounds`` times; the slowest rank's, best round kept."""
    rank, world, device = init_distributed()
    grads = [torch.ones(max(1, n // 4), device=device) for n in sizes]
    plans = [[[i] for i in reversed(range(len(sizes)))] if cap == 0 else buckets(sizes, cap) for cap in caps]
    best = [float("inf")] * len(plans)
    for _ in range(rounds):
        for k, plan in enumerate(plans):
            for _ in range(warmup):
                _reduce_in_buckets(grads, plan)
            best[k] = min(best[k], _timed_together(lambda: _reduce_in_buckets(grads, plan), iters, device))
    return best


def bucket_times(bucket_mbs, sizes, ranks=2, iters=10, warmup=2, rounds=3, backend=None):
    """Seconds to all-reduce gradients of ``sizes`` (bytes) once on ``ranks`` ranks: one message per
    parameter, then in buckets of each size in ``bucket_mbs`` (MB), measured in turn in the same
    processes (best of ``rounds``, the slowest rank's time).

    >>> per_parameter, bucketed = bucket_times([1.0], [4096] * 20, iters=3, rounds=1)
    >>> per_parameter > 0 and bucketed > 0
    True
    """
    caps = [0] + [int(mb * 2**20) for mb in bucket_mbs]
    if min(caps[1:], default=1) <= 0:
        raise ValueError(f"bucket sizes must be positive, got {bucket_mbs}")
    return launch(_bucket_rank_times, list(sizes), caps, iters, warmup, rounds, nprocs=ranks, backend=backend,
                  timeout=MEASURE_TIMEOUT, show_output=False)[0]


def bucket_speedup(bucket_mb, sizes, ranks=2, **kwargs):
    """How many times faster gradients of ``sizes`` all-reduce in buckets of ``bucket_mb`` MB than one
    message per parameter, measured in fresh processes.

    >>> bucket_speedup(25, [4096] * 20, iters=3, rounds=1) > 0
    True
    """
    per_parameter, bucketed = bucket_times([bucket_mb], sizes, ranks, **kwargs)
    return per_parameter / bucketed


def copy_bandwidth(nbytes=64 << 20, device=None, repeats=5):
    """Bytes per second one copy of a ``nbytes`` tensor reaches on ``device`` (the CPU by default):
    on one CPU host, the memory bandwidth that gloo's ranks share, the ceiling of their bus bandwidth.
    With ``device="peer"`` and two GPUs, a copy from GPU 0 to GPU 1: the link between them
    (NVLink or PCIe), measured.

    >>> copy_bandwidth(1 << 20) > 0   # bytes per second; how many depends on the machine and its load
    True
    """
    source_device = target_device = torch.device("cpu") if device is None else device
    if device == "peer":
        source_device, target_device = torch.device("cuda", 0), torch.device("cuda", 1)
    source = torch.ones(nbytes // 4, device=source_device)
    target = torch.empty(nbytes // 4, device=target_device)
    target.copy_(source)  # warm-up: pages touched, peer access set up
    best = float("inf")
    for _ in range(repeats):
        timing.wait(source_device)
        start = time.perf_counter()
        target.copy_(source)
        timing.wait(source_device)
        timing.wait(target_device)
        best = min(best, time.perf_counter() - start)
    return nbytes / best


def _split_rank_times(per_rank_batches, hidden, iters):
    """On each rank: the seconds of one all-reduce of all the gradients in one bucket, and for each
    per-rank batch the seconds of its backward pass; medians, the slowest rank's."""
    from .models import mlp, synthetic_batch

    rank, world, device = init_distributed()
    model = mlp(hidden=hidden).to(device)
    flat = torch.ones(sum(p.numel() for p in model.parameters()), device=device)

    def median_seconds(prepare, repeats):  # prepare() sets one run up, untimed, and returns it to time
        times = []
        for _ in range(repeats + 1):  # the first, a warm-up
            run = prepare()
            timing.wait(device)
            dist.barrier()
            start = time.perf_counter()
            run()
            timing.wait(device)
            times.append(time.perf_counter() - start)
        return _slowest(statistics.median(times[1:]), device)

    communication = median_seconds(lambda: functools.partial(dist.all_reduce, flat), 3 * iters)
    backward = []
    for batch in per_rank_batches:
        x, y = (t.to(device) for t in synthetic_batch(batch))

        def forward():
            model.zero_grad()
            return torch.nn.functional.cross_entropy(model(x), y).backward  # timed: the backward alone

        backward.append(median_seconds(forward, iters))
    return [(b, communication) for b in backward]


def compute_and_communication(per_rank_batches, ranks=2, hidden=1024, iters=5, backend=None):
    """For each per-rank batch: ``(backward, communication)`` seconds of one training step of the
    course's MLP (``mlp(hidden=hidden)``, 1.6 M parameters at 1024) on ``ranks`` ranks: its
    backward pass, and the all-reduce of its gradients (6.3 MB at 1024) in one message, measured
    once since it does not depend on the batch. Backward grows with the batch. The all-reduce can
    hide only behind backward: where it is the longer, the step is communication-bound.

    >>> (backward, comm), = compute_and_communication([2], iters=1)
    >>> backward > 0 and comm > 0
    True
    """
    return launch(_split_rank_times, list(per_rank_batches), hidden, iters, nprocs=ranks, backend=backend,
                  timeout=MEASURE_TIMEOUT, show_output=False)[0]


@dataclass
class Timeline:
    """One training step on one rank as ``torch.profiler`` saw it: when something computed and when
    something communicated, as (start, end) intervals in milliseconds from the step's first event,
    overlapping intervals merged. On CPU ranks, computation is the profiled operators on the
    forward and backward threads and communication gloo's own threads' work; on GPUs, the CUDA
    kernels, NCCL's among them the communication."""

    compute: list
    communication: list

    def hidden(self):
        """The share of the communication's time during which computation went on too (0 to 1): the
        part of the communication that overlap hid.

        >>> Timeline(compute=[(0, 10)], communication=[(8, 12)]).hidden()
        0.5
        """
        total = sum(end - start for start, end in self.communication)
        both = sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in self.communication for s2, e2 in self.compute)
        return both / total if total else 0.0


def _merged(intervals):
    """Overlapping (start, end) intervals joined, in order.

    >>> _merged([(5, 6), (0, 2), (1, 3)])
    [(0, 3), (5, 6)]
    """
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def profile_step(step):
    """Run ``step()`` once under ``torch.profiler`` and return its :class:`Timeline`.

    On GPUs (CUDA kernels recorded) computation and communication are the kernels, NCCL's
    (``nccl`` in the name) the communication. Without them, communication is the work on gloo's
    threads (events named ``gloo:...``), and computation the operators at the top of the
    profiler's tree on every other thread (forward, autograd's backward, the optimizer).

    >>> line = profile_step(lambda: torch.ones(64, 64).matmul(torch.ones(64, 64)))
    >>> len(line.compute) >= 1 and line.communication == []
    True
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        step()
        if cuda:
            torch.cuda.synchronize()
    events = [e for e in prof.events() if e.time_range.end > e.time_range.start]
    kernels = [e for e in events if e.device_type == DeviceType.CUDA]
    if kernels:
        talk = [e for e in kernels if "nccl" in e.name.lower()]
        work = [e for e in kernels if "nccl" not in e.name.lower()]
    else:
        talk = [e for e in events if e.name.startswith("gloo:")]
        threads = {e.thread for e in talk}
        work = [e for e in events if e.cpu_parent is None and e.thread not in threads
                and not e.name.startswith(("c10d::", "record_param_comms", "nccl:", "gloo:"))]
    if not work and not talk:
        return Timeline([], [])
    t0 = min(e.time_range.start for e in work + talk)

    def ms(chosen):
        return _merged([((e.time_range.start - t0) / 1e3, (e.time_range.end - t0) / 1e3) for e in chosen])

    return Timeline(compute=ms(work), communication=ms(talk))
