"""Benchmarks for lesson 03's measurements, the bubble and the bytes, printed as tables from one run.

    python tests/benchmarks/model_parallel.py [--repeats 3] [--quick]

1. The pipeline bubble of GPipe and 1F1B on 2 stages (8 layers of width 1024, a batch of
   2048) for 1, 2, 4 and 8 micro-batches, measured from the timeline of a real run
   (:func:`grader.pipeline.run_schedule`, fresh ranks each repeat) against the formula
   (p - 1) / (m + p - 1): the median and the min–max over the repeats. torch's 1F1B
   refuses fewer micro-batches than stages, so its m = 1 cells stay empty.
2. The bytes of parameters, gradients and Adam's state on each of 2 gloo ranks after one
   step on the course MLP (1.6 M parameters) with DDP, ZeRO-1 (ZeroRedundancyOptimizer)
   and FSDP2 (fully_shard), measured with :func:`grader.memory.state_bytes` next to
   :func:`grader.memory.per_rank`'s prediction for ZeRO stage 0, 1 and 3.

``--quick`` runs the same tables at small sizes, in seconds, to check that the script works.
"""

import argparse
import statistics

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from grader import hardware, memory, pipeline
from grader.launch import init_distributed, launch
from grader.models import mlp, synthetic_batch

RANKS = 2
MICRO_BATCHES = (1, 2, 4, 8)
SIZES = {"full": {"pipeline": dict(width=1024, layers=8, batch=2048), "mlp": dict(in_features=512, hidden=1024)},
         "quick": {"pipeline": dict(width=64, layers=2, batch=64), "mlp": dict(in_features=64, hidden=128)}}
METHODS = {"DDP": 0, "ZeRO-1": 1, "FSDP2": 3}  # the ZeRO stage each one is
MB = 1e6


def bubble_rows(repeats, sizes):
    """Per micro-batch count: the formula, then (median, min, max) of the measured bubble per schedule.

    torch's 1F1B needs at least as many micro-batches as stages: below that its cell is None.
    """
    rows = []
    for m in MICRO_BATCHES:
        measured = []
        for schedule in ("gpipe", "1f1b"):
            if schedule == "1f1b" and m < RANKS:
                measured.append(None)
                continue
            fractions = [pipeline.bubble_fraction(pipeline.run_schedule(m, schedule, stages=RANKS, **sizes))
                         for _ in range(repeats)]
            measured.append((statistics.median(fractions), min(fractions), max(fractions)))
        rows.append((m, pipeline.bubble_formula(RANKS, m), *measured))
    return rows


def _one_adam_step(method, mlp_sizes):
    """On each rank: the course MLP wrapped by ``method``, one Adam step; the state's bytes here."""
    rank, world, _ = init_distributed()
    model = mlp(**mlp_sizes)
    if method == "FSDP2":
        model = fully_shard(model, mesh=init_device_mesh("cpu", (world,)))
    else:
        model = DDP(model)
    if method == "ZeRO-1":
        zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam)
        optimizer, state = zero, zero.optim  # the rank's shard of Adam's state lives in the inner optimizer
    else:
        optimizer = state = torch.optim.Adam(model.parameters())
    x, y = synthetic_batch(32, in_features=mlp_sizes["in_features"], seed=rank)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    return memory.state_bytes(model, state)


def memory_rows(mlp_sizes):
    """Per method: a row per rank measured, then the predicted row."""
    params = sum(p.numel() for p in mlp(**mlp_sizes).parameters())
    rows = []
    for method, zero in METHODS.items():
        per_rank = launch(_one_adam_step, method, mlp_sizes, nprocs=RANKS, backend="gloo", show_output=False)
        rows += [(method, f"rank {r} measured", b) for r, b in enumerate(per_rank)]
        rows.append((method, f"predicted (zero={zero})", memory.per_rank(params, data=RANKS, zero=zero)))
    return params, rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes: check the script in seconds")
    args = parser.parse_args()
    sizes = SIZES["quick" if args.quick else "full"]
    print(f"# on {hardware.describe()}\n")

    p = sizes["pipeline"]
    print(f"## Pipeline bubble, {RANKS} stages ({p['layers']} layers of width {p['width']}, batch {p['batch']}), "
          f"median and min–max of {args.repeats}\n")
    print("| micro-batches m | formula | GPipe | GPipe min–max | 1F1B | 1F1B min–max |")
    print("|---|---|---|---|---|---|")
    for m, formula, *schedules in bubble_rows(args.repeats, p):
        cells = ["— | —" if cell is None else "{:.0%} | {:.0%}–{:.0%}".format(*cell) for cell in schedules]
        print(f"| {m} | {formula:.0%} | {' | '.join(cells)} |")

    params, rows = memory_rows(sizes["mlp"])
    print(f"\n## Bytes per rank after one Adam step, {RANKS} gloo ranks, MLP of {params:,} parameters, "
          f"MB (10^6 bytes)\n")
    print("| method | rank | parameters | gradients | optimizer | total |")
    print("|---|---|---|---|---|---|")
    for method, who, b in rows:
        mb = [b["parameters"] / MB, b["gradients"] / MB, b["optimizer"] / MB]
        print(f"| {method} | {who} | {' | '.join(f'{v:.2f}' for v in mb)} | {sum(mb):.2f} |")


if __name__ == "__main__":
    main()
