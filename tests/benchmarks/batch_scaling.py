"""Benchmarks for lesson 04's measurements, printed as tables from one run.

    python tests/benchmarks/batch_scaling.py [--repeats 5] [--quick] [--beside 1]

1. Throughput (samples per second, all ranks together) of DDP training steps of the course
   MLP against the per-rank batch, on 1 rank and on 2 (:func:`grader.scaling.throughput`),
   and the efficiency of 2 ranks at each batch: the median and min–max over the repeats.
2. Strong scaling (global batch 2048) and weak scaling (1024 per rank) on 1 and 2 ranks
   (:func:`grader.scaling.strong_scaling`, :func:`~grader.scaling.weak_scaling`), each
   N-rank point timed in turn with its own one-process baseline.
3. Amdahl's serial fraction fitted to the strong-scaling speedups of lesson 04's challenge 4
   (global batch 512), once per repeat: the spread the challenge's tolerance comes from.
4. Lesson 04's challenge 5 as autograde grades its solution, once per repeat: the sweep's
   efficiencies, the batch it picks, and the hidden test's verdict (passes, fails, or manual
   grading when the reference misses too): how often the target decides automatically.

``--beside N`` runs it all beside N CPU-heavy processes (endless loops), as a busy grader.

2 ranks are gloo CPU processes with one thread each, or NCCL ranks with a GPU each where the
machine has two. ``--quick`` runs small sizes once, in seconds, to check the script works.
"""

import argparse
import statistics
import subprocess
import sys

from grader import hardware, scaling
from grader.grading import fairness

RANKS = 2
SIZES = {"full": dict(batches=[16, 64, 256, 1024, 4096], strong=2048, weak=1024, serial=512, steps=5,
                      sweep=[64, 2048, 4096]),  # challenge 5's solution sweeps these
         "quick": dict(batches=[16, 64], strong=128, weak=64, serial=128, steps=1, sweep=[16])}


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--beside", type=int, default=0, help="CPU-heavy processes running beside")
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.beside)]
    try:
        tables(args)
    finally:
        for hog in hogs:
            hog.kill()


def tables(args):
    size = SIZES["quick" if args.quick else "full"]
    repeats, steps = (1 if args.quick else args.repeats), size["steps"]
    backend = scaling.ddp_backend(RANKS)
    print(f"{hardware.describe()}; {scaling.ddp_measured_on(RANKS)}; {repeats} repeat(s); "
          f"beside {args.beside} CPU-heavy process(es)\n")

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

    target = scaling.expected_ddp_speedup(RANKS) / RANKS
    print(f"\n## Lesson 04's challenge 5, graded as autograde grades its solution (target {target:.0%})\n")
    print(f"| {' | '.join(f'efficiency at {b}' for b in size['sweep'])} | batch picked | hidden test |")
    print("|" + "---|" * (len(size["sweep"]) + 2))
    outcomes = []
    for _ in range(repeats):
        efficiency = {b: s / RANKS for b, s in zip(size["sweep"], scaling.ddp_speedups(size["sweep"], ranks=RANKS, steps=3))}
        reaching = [b for b, e in efficiency.items() if e >= target]
        try:
            if reaching:
                grade = fairness.decide(lambda: fairness.grade_ddp_speedup(min(reaching), ranks=RANKS), grading=True)
            else:
                grade = fairness.decide(lambda: fairness.efficiency_missed(efficiency, target), grading=True)
            outcomes.append("passes" if grade.passed else "fails")
        except fairness.Inconclusive:
            outcomes.append("manual grading")
        print(f"| {' | '.join(f'{e:.0%}' for e in efficiency.values())} | {min(reaching) if reaching else '-'} | "
              f"{outcomes[-1]} |")
    print(f"\n{outcomes.count('passes')} of {repeats} graded automatically as passing, "
          f"{outcomes.count('manual grading')} left to manual grading, {outcomes.count('fails')} failed")


if __name__ == "__main__":
    main()
