"""How often autograde decides the measured challenges by itself: each one's solution graded as its
test cells grade it, repeated, counted as passed, left to manual grading, or failed.

    python tests/benchmarks/measured_grades.py [--repeats 5] [--beside 1] [--quick]

The measured challenges, each with its solution's answer and its visible check and hidden
test in the same order and with the same functions as the lesson's test cells:

- lesson 02 c5: ``PER_RANK_BATCH = 2048``; ``scaling.ddp_speedup``, then the hidden
  ``fairness.grade_ddp_speedup`` beside the reference batch;
- lesson 04 c4: the strong-scaling sweep and Amdahl fit of the solution, then the hidden
  repeats (``strong_scaling_rounds``) it must lie among;
- lesson 04 c5: the solution's sweep (64, 2048, 4096), the batch it picks, then the hidden
  ``grade_ddp_speedup`` (or ``efficiency_missed`` when no batch reached the target);
- lesson 05 c5: ``BUCKET_MB = 25``; ``comms.bucket_speedup``, then the hidden
  ``fairness.grade_bucket_speedup`` beside the reference bucket size.

A right answer must never fail: a busy machine sends it to manual grading with the numbers.
``--beside N`` runs N CPU-heavy processes (endless loops) beside it, as a busy grader.
``--quick`` runs each once with small sizes, to check that the script works.
"""

import argparse
import subprocess
import sys

from grader import comms, hardware, scaling
from grader.grading import fairness
from grader.models import transformer

RANKS = 2


def lesson_02_c5(quick):
    batch = 64 if quick else 2048
    mine = scaling.ddp_speedup(batch, ranks=RANKS, steps=1 if quick else 5)
    if mine <= 1 and not fairness.decide(lambda: fairness.grade_ddp_speedup(batch, ranks=RANKS, rounds=1, steps=3),
                                         grading=True).passed:
        return False, f"visible: {mine:.2f}x"
    grade = fairness.decide(lambda: fairness.grade_ddp_speedup(batch, ranks=RANKS, rounds=1 if quick else 2,
                                                               steps=1 if quick else 5), grading=True)
    return grade.passed, str(grade)


def lesson_04_c4(quick):
    ranks = [n for n in (1, 2, 4, 8) if n <= max(2, hardware.parallel_ranks())]
    batch, steps = scaling.strong_batch(max(ranks)), 3 if quick else 15
    points = scaling.strong_scaling(batch, ranks=ranks, steps=steps)
    mine = scaling.fit_serial_fraction([p.ranks for p in points], [p.speedup for p in points])

    def measured_again():
        tables = scaling.strong_scaling_rounds(batch, ranks=ranks, steps=steps, rounds=2 if quick else 5)
        repeats = [scaling.fit_serial_fraction([p.ranks for p in t], [p.speedup for p in t]) for t in tables]
        return fairness.among(mine, repeats, 0.25, "serial fraction", busy_from=1)

    verdict = fairness.decide(measured_again, grading=True)
    return verdict.passed, str(verdict)


def lesson_04_c5(quick):
    target = scaling.expected_ddp_speedup(RANKS) / RANKS
    sweep = [16, 64] if quick else [64, 2048, 4096]
    efficiency = {b: s / RANKS for b, s in zip(sweep, scaling.ddp_speedups(sweep, ranks=RANKS, steps=1 if quick else 3))}
    reaching = [b for b, e in efficiency.items() if e >= target]
    if reaching:
        grade = fairness.decide(lambda: fairness.grade_ddp_speedup(min(reaching), ranks=RANKS), grading=True)
    else:
        grade = fairness.decide(lambda: fairness.efficiency_missed(efficiency, target), grading=True)
    return grade.passed, f"sweep {', '.join(f'{b}: {e:.0%}' for b, e in efficiency.items())}; {grade}"


def lesson_05_c5(quick):
    sizes = comms.gradient_sizes(transformer(layers=1 if quick else 4))
    if comms.bucket_speedup(25, sizes, ranks=RANKS) < 2 and not fairness.decide(
            lambda: fairness.grade_bucket_speedup(25, sizes), grading=True).passed:
        return False, "visible check"
    grade = fairness.decide(lambda: fairness.grade_bucket_speedup(25, sizes), grading=True)
    return grade.passed, str(grade)


CHALLENGES = {"02 c5 DDP speedup": lesson_02_c5, "04 c4 serial fraction": lesson_04_c4,
              "04 c5 efficiency": lesson_04_c5, "05 c5 bucket speedup": lesson_05_c5}


def graded(challenge, quick):
    """'passes', 'manual grading' or 'fails', and what the grader said."""
    try:
        passed, said = challenge(quick)
        return ("passes" if passed else "fails"), said
    except fairness.Inconclusive as busy:
        return "manual grading", str(busy).splitlines()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--beside", type=int, default=0, help="CPU-heavy processes running beside")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.beside)]
    try:
        print(f"{hardware.describe()}; {scaling.ddp_measured_on(RANKS)}; {repeats} repeat(s); "
              f"beside {args.beside} CPU-heavy process(es)\n")
        print("| challenge | passes | manual grading | fails | what the grader said (last repeat) |")
        print("|---|---|---|---|---|")
        for name, challenge in CHALLENGES.items():
            outcomes = [graded(challenge, args.quick) for _ in range(repeats)]
            counts = [sum(o == kind for o, _ in outcomes) for kind in ("passes", "manual grading", "fails")]
            print(f"| {name} | {' | '.join(map(str, counts))} | {outcomes[-1][1][:160]} |", flush=True)
    finally:
        for hog in hogs:
            hog.kill()


if __name__ == "__main__":
    main()
