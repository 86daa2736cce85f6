"""Benchmarks for lesson 04's measurements, printed as tables from one run.

    python tests/benchmarks/batch_scaling.py [--repeats 5] [--quick]

1. Throughput (samples per second, all ranks together) of DDP training steps of the course
   MLP against the per-rank batch, on 1 rank and on 2 (:func:`grader.scaling.throughput`),
   and the efficiency of 2 ranks at each batch: the median and min–max over the repeats.
2. Strong scaling (global batch 2048) and weak scaling (1024 per rank) on 1 and 2 ranks
   (:func:`grader.scaling.strong_scaling`, :func:`~grader.scaling.weak_scaling`), each
   N-rank point timed in turn with its own one-process baseline.
3. Amdahl's serial fraction fitted to the strong-scaling speedups of lesson 04's challenge 4
   (global batch 512), once per repeat: the spread the challenge's tolerance comes from.

2 ranks are gloo CPU processes with one thread each, or NCCL ranks with a GPU each where the
machine has two. ``--quick`` runs small sizes once, in seconds, to check the script works.
"""

import argparse
import statistics

from grader import hardware, scaling

RANKS = 2
SIZES = {"full": dict(batches=[16, 64, 256, 1024, 4096], strong=2048, weak=1024, serial=512, steps=5),
         "quick": dict(batches=[16, 64], strong=128, weak=64, serial=128, steps=1)}


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    repeats, steps = (1 if args.quick else args.repeats), size["steps"]
    backend = scaling.ddp_backend(RANKS)
    print(f"{hardware.describe()}; {scaling.ddp_measured_on(RANKS)}; {repeats} repeat(s)\n")

    print("## Throughput against the per-rank batch\n")
    print("| batch per rank | 1 rank (samples/s) | 2 ranks (samples/s) | efficiency of 2 ranks |")
    print("|---|---|---|---|")
    runs = [(scaling.throughput(size["batches"], 1, steps, backend=backend),
             scaling.throughput(size["batches"], RANKS, steps, backend=backend)) for _ in range(repeats)]
    for i, batch in enumerate(size["batches"]):
        one, two = [r[0][i] for r in runs], [r[1][i] for r in runs]
        eff = [b / a / RANKS for a, b in zip(one, two)]
        print(f"| {batch} | {spread(one, '{:.0f}'.format)} | {spread(two, '{:.0f}'.format)} | "
              f"{spread(eff, '{:.0%}'.format)} |")

    print("\n## Strong and weak scaling on 1 and 2 ranks\n")
    print("| sweep | batch per rank on 2 ranks | speedup of 2 ranks | efficiency |")
    print("|---|---|---|---|")
    for name, sweep, batch in (("strong, global batch", scaling.strong_scaling, size["strong"]),
                               ("weak, batch per rank", scaling.weak_scaling, size["weak"])):
        rows = [sweep(batch, ranks=[1, RANKS], steps=steps)[1] for _ in range(repeats)]
        print(f"| {name} {batch} | {rows[0].per_rank_batch} | {spread([r.speedup for r in rows], '{:.2f}x'.format)} | "
              f"{spread([r.efficiency for r in rows], '{:.0%}'.format)} |")

    print(f"\n## Serial fraction fitted to strong scaling, global batch {size['serial']}\n")
    fits = []
    for _ in range(repeats):
        rows = scaling.strong_scaling(size["serial"], ranks=[1, RANKS], steps=3 * steps)  # as challenge 4: 15
        fits.append(scaling.fit_serial_fraction([r.ranks for r in rows], [r.speedup for r in rows]))
    print(f"serial fraction {spread(fits, '{:.3f}'.format)}; max − min {max(fits) - min(fits):.3f}; "
          f"each repeat: {', '.join(f'{f:.3f}' for f in fits)}")


if __name__ == "__main__":
    main()
