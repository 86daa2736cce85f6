"""Pipeline parallelism run for real: split a model into stages, run a schedule, time every step.

Each rank holds one stage (a contiguous run of layers), or several with an interleaved
schedule. A schedule (GPipe, 1F1B, interleaved 1F1B) feeds micro-batches through the
stages; :func:`timeline` records when each stage ran the forward and the backward of each
micro-batch, so the bubble (the time a stage waits) can be seen and measured rather than
only computed from the formula, and :func:`idle_gaps` says where on each rank it falls.
"""

import contextlib
import functools
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

from . import memory, timing
from .launch import init_distributed, launch

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


@dataclass
class Work:
    """One forward (``"F"``) or backward (``"B"``) of one micro-batch on one rank, in seconds.

    ``stage`` is the pipeline stage that ran it, when a rank holds several (interleaved schedules).
    """

    rank: int
    kind: str
    micro: int
    start: float
    end: float
    stage: int | None = None


def bubble_formula(stages, micro_batches, stages_per_rank=1):
    """The idle fraction of a pipeline with equal stages: (p - 1) / (v·m + p - 1).

    ``stages`` is p, the ranks of the pipeline; ``stages_per_rank`` is v, how many stages each
    rank holds (1 for GPipe and 1F1B: (p - 1) / (m + p - 1)). Narayanan et al. (2021) give
    interleaving's bubble as (p - 1) / (v·m) of the ideal time: the bubble shrinks v times,
    and as a share of the whole step that is (p - 1) / (v·m + p - 1).

    >>> bubble_formula(4, 1), bubble_formula(2, 8)
    (0.75, 0.1111111111111111)
    >>> bubble_formula(2, 4, stages_per_rank=2)    # p = 2, m = 4: 20 % with one stage per rank
    0.1111111111111111
    """
    if stages < 1 or micro_batches < 1 or stages_per_rank < 1:
        raise ValueError(f"need at least one stage, micro-batch and stage per rank, "
                         f"got {stages}, {micro_batches} and {stages_per_rank}")
    return (stages - 1) / (stages_per_rank * micro_batches + stages - 1)


def bubble_fraction(works):
    """Measured idle fraction: 1 - (mean busy time per rank) / (time from first start to last end).

    >>> bubble_fraction([Work(0, "F", 0, 0.0, 1.0), Work(1, "F", 0, 1.0, 2.0)])
    0.5
    """
    ranks = {w.rank for w in works}
    span = max(w.end for w in works) - min(w.start for w in works)
    busy = sum(w.end - w.start for w in works) / len(ranks)
    return 1 - busy / span


def idle_gaps(works):
    """Where each rank waited, in seconds: ``{rank: {"start": ..., "middle": ..., "end": ...}}``.

    ``start`` is the time from the first record of any rank to this rank's first, ``end`` from
    this rank's last record to the last end of any rank, ``middle`` the waiting in between.
    The three add up to the rank's share of the bubble.

    >>> gaps = idle_gaps([Work(0, "F", 0, 0.0, 1.0), Work(1, "F", 0, 1.0, 2.0),
    ...                   Work(1, "B", 0, 2.0, 3.0), Work(0, "B", 0, 3.0, 4.0)])
    >>> gaps[0], gaps[1]
    ({'start': 0.0, 'middle': 2.0, 'end': 0.0}, {'start': 1.0, 'middle': 0.0, 'end': 1.0})
    """
    first, last = min(w.start for w in works), max(w.end for w in works)
    gaps = {}
    for rank in sorted({w.rank for w in works}):
        mine = [w for w in works if w.rank == rank]
        start, end = min(w.start for w in mine), max(w.end for w in mine)
        busy = sum(w.end - w.start for w in mine)
        gaps[rank] = {"start": start - first, "middle": end - start - busy, "end": last - end}
    return gaps


def layer_stack(width=1024, layers=8, seed=0):
    """``layers`` blocks of Linear(width, width) + ReLU, the same on every rank.

    >>> layer_stack(16, 4)[0]
    Sequential(
      (0): Linear(in_features=16, out_features=16, bias=True)
      (1): ReLU()
    )
    """
    torch.manual_seed(seed)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers)])


def split(model, stages):
    """The ``nn.Sequential`` ``model`` cut into ``stages`` contiguous parts, as even as possible.

    Earlier stages take the extra layers when they do not divide evenly.

    >>> [len(part) for part in split(layer_stack(8, 5), 2)]
    [3, 2]
    """
    if not 1 <= stages <= len(model):
        raise ValueError(f"cannot cut {len(model)} layers into {stages} stages")
    cuts = torch.arange(len(model)).tensor_split(stages)  # layer numbers, earlier stages first
    return [model[int(layers[0]):int(layers[-1]) + 1] for layers in cuts]


@contextlib.contextmanager
def work(works, rank, kind, micro, device):
    """Time the block as one :class:`Work` and append it to ``works``.

    On a GPU the clock is read only once the device has finished what was queued before
    the block (a received tensor included) and what the block queued: CUDA calls and
    NCCL's ``recv(...).wait()`` return before the work is done, so a bare clock would time
    the launches, not the computation. On a CPU the clock is right as it is.

    >>> works = []
    >>> with work(works, 0, "F", 0, torch.device("cpu")):
    ...     _ = torch.ones(4) * 2
    >>> works[0].kind, works[0].end >= works[0].start
    ('F', True)
    """
    timing.wait(device)
    start = time.perf_counter()
    yield
    timing.wait(device)
    works.append(Work(rank, kind, micro, start, time.perf_counter()))


@contextlib.contextmanager
def timeline(stage, rank):
    """Record every forward and backward ``stage`` runs while the block is open, as :class:`Work`.

    Times are ``time.perf_counter()`` seconds, one clock for every process of a machine,
    read around each call with the stage's device synchronised (:func:`work`). Only the
    computation is timed: a schedule waits for its received tensors before it calls the
    stage, so waiting shows up as gaps between the records.
    """
    works = []

    def timed(name, kind):
        original = getattr(stage, name)

        def run(micro, *args, **kwargs):
            with work(works, rank, kind, micro, stage.device):
                out = original(micro, *args, **kwargs)
            return out
        setattr(stage, name, run)
        return original

    originals = {name: timed(name, kind) for name, kind in [("forward_one_chunk", "F"), ("backward_one_chunk", "B")]}
    try:
        yield works
    finally:
        for name, original in originals.items():
            setattr(stage, name, original)


def _step(run, rank, world, x, target):
    """One schedule step: the first stage feeds the input, the last the target, the rest relay."""
    if rank == 0:
        run.step(x)
    elif rank == world - 1:
        run.step(target=target)
    else:
        run.step()


def _schedule_rank(micro_batches, schedule, width, layers, batch, repeats):
    """On each rank: its stage's part of the model, run ``repeats`` times; the last run's timeline."""
    rank, world, device = init_distributed()
    part = split(layer_stack(width, layers), world)[rank].to(device)
    stage = PipelineStage(part, rank, world, device)
    run = SCHEDULES[schedule](stage, micro_batches, loss_fn=nn.functional.mse_loss)
    g = torch.Generator().manual_seed(0)
    x, target = torch.randn(batch, width, generator=g).to(device), torch.randn(batch, width, generator=g).to(device)
    for _ in range(repeats):  # the first runs warm up; the last one is kept
        dist.barrier()
        with timeline(stage, rank) as works:
            _step(run, rank, world, x, target)
        part.zero_grad(set_to_none=True)
    return works


def run_schedule(micro_batches, schedule="gpipe", stages=2, width=1024, layers=8, batch=1024, repeats=2):
    """Run a pipeline schedule on ``stages`` fresh ranks and return the timeline (a list of :class:`Work`).

    >>> works = run_schedule(2, stages=2, width=32, layers=2, batch=8)
    >>> sorted((w.rank, w.kind, w.micro) for w in works)[:3]
    [(0, 'B', 0), (0, 'B', 1), (0, 'F', 0)]
    """
    per_rank = launch(_schedule_rank, micro_batches, schedule, width, layers, batch, repeats,
                      nprocs=stages, timeout=120, show_output=False)
    return sorted((w for works in per_rank for w in works), key=lambda w: w.start)


def _interleaved_rank(micro_batches, per_rank, width, layers, batch, repeats):
    """On each rank: ``per_rank`` stages, placed in a loop (rank r holds stages r, r + p, ...)."""
    rank, world, device = init_distributed()
    parts = split(layer_stack(width, layers), world * per_rank)
    mine = [rank + k * world for k in range(per_rank)]
    stages = [PipelineStage(parts[i].to(device), i, world * per_rank, device) for i in mine]
    run = ScheduleInterleaved1F1B(stages, micro_batches, loss_fn=nn.functional.mse_loss)
    g = torch.Generator().manual_seed(0)
    x, target = torch.randn(batch, width, generator=g).to(device), torch.randn(batch, width, generator=g).to(device)
    for _ in range(repeats):  # the first runs warm up; the last one is kept
        dist.barrier()
        with contextlib.ExitStack() as timed:
            per_stage = [timed.enter_context(timeline(stage, rank)) for stage in stages]
            _step(run, rank, world, x, target)  # stage 0 sits on rank 0, the last stage on the last rank
        for stage in stages:
            stage.submod.zero_grad(set_to_none=True)
    for index, works in zip(mine, per_stage):
        for w in works:
            w.stage = index
    return [w for works in per_stage for w in works]


def run_interleaved(micro_batches, stages_per_rank=2, ranks=2, width=1024, layers=8, batch=1024, repeats=2):
    """Run ``ScheduleInterleaved1F1B`` with ``stages_per_rank`` stages on each of ``ranks`` fresh
    ranks; the timeline, each :class:`Work` naming its ``stage``.

    The model is :func:`run_schedule`'s, cut into ``ranks x stages_per_rank`` stages; rank r holds
    stages r, r + ranks, ... (the looped placement of Narayanan et al., 2021), so a
    micro-batch crosses from rank to rank ``stages_per_rank`` times more often than with one
    stage per rank. Compare its bubble with ``bubble_formula(ranks, micro_batches, stages_per_rank)``.

    >>> works = run_interleaved(2, width=32, layers=4, batch=8)
    >>> sorted({(w.rank, w.stage) for w in works})
    [(0, 0), (0, 2), (1, 1), (1, 3)]
    """
    per_rank = launch(_interleaved_rank, micro_batches, stages_per_rank, width, layers, batch, repeats,
                      nprocs=ranks, timeout=120, show_output=False)
    return sorted((w for works in per_rank for w in works), key=lambda w: w.start)


def _peak_rank(make_model, x, micro_batches, schedule):
    rank, world, device = init_distributed()
    part = split(make_model(), world)[rank].to(device)
    stage = PipelineStage(part, rank, world, device)
    run = SCHEDULES[schedule](stage, micro_batches, loss_fn=lambda out, target: out.mean())
    x = x.to(device)
    for measure in (False, True):  # the first step also infers the shapes stages exchange
        with memory.saved_activations(part) if measure else contextlib.nullcontext() as saved:
            _step(run, rank, world, x, x)
    return saved.peak


def activation_peaks(make_model, x, micro_batches, schedule="gpipe", stages=2):
    """The most activation bytes each stage held during one schedule step on batch ``x``, per rank.

    ``make_model`` builds the whole ``nn.Sequential`` (the same on every rank: pass a
    module-level function or a ``functools.partial``); each rank keeps its part of the split.

    >>> make = functools.partial(layer_stack, 32, 4)
    >>> activation_peaks(make, torch.ones(8, 32), 4, "gpipe") > activation_peaks(make, torch.ones(8, 32), 4, "1f1b")
    True
    """
    return launch(_peak_rank, make_model, x, micro_batches, schedule, nprocs=stages, timeout=120, show_output=False)
