"""Fair grades for measured challenges: a busy grader never fails a right answer.

A graded measurement (a speedup, a timing, a fitted serial fraction) is always taken beside
a reference, the lesson's own solution measured in the same run, so that a machine too busy
for the reference to reach its bar is told apart from a learner's answer that misses it:

- the learner's value reaches its bar: passed;
- it misses, and the reference reached its own bar: failed (the learner's answer), once it
  has missed twice so (one timing hit by a burst of other work is not the learner's);
- it misses, and so did the reference: the machine decided, not the learner. Measure again,
  a bounded number of times with a pause, then raise :class:`Inconclusive`, which the
  course's autograde turns into manual grading with the numbers (never 0).

:func:`decide` applies that rule to any :class:`Verdict`; :func:`near` makes one for a timing;
:func:`among` one for a value the learner measured once, beside the same value measured again;
:func:`efficiency_missed` one for a sweep where no batch reached its target;
:func:`grade_ddp_speedup` makes one for a DDP speedup and :func:`grade_bucket_speedup` one for
buckets, with the bars of ``grader/content/thresholds.json``.
"""

import os
import statistics
import time
from dataclasses import dataclass

from grader import comms, scaling
from grader.content import thresholds
from grader.launch import LaunchTimeout


# nbgrader_config.py's c.Execute.timeout (tests/grading/test_nbgrader.py keeps them equal): a
# graded cell that runs longer is stopped and scores 0, so measurements stop well before it.
CELL_SECONDS = 120
BUDGET = 0.75 * CELL_SECONDS


# Set by autograde in the kernels that grade (grader.grading.integrity.IsolatedExecute): there an
# undecided measurement raises Inconclusive; in a learner's own kernel it is said, not raised.
GRADING = "COURSE_GRADING"


class Inconclusive(Exception):
    """A measured grade this machine could not decide; autograde leaves it to the instructor, with the numbers."""


def undecided(reason, grading=None):
    """What an undecided measurement does: in autograde (``grading``, by default whether ``COURSE_GRADING``
    is set) raise :class:`Inconclusive`; in a learner's own kernel, say "could not confirm here" and
    return a passing :class:`Verdict` that says so, so a right answer's cell does not end in an error.

    >>> undecided("(measured 3 times): 0.9x; reference 0.97x, needed 1.00x", grading=False).passed
    could not confirm here (this machine is busy: 0.9x; reference 0.97x, needed 1.00x); autograde measures it again
    True
    """
    if grading if grading is not None else bool(os.environ.get(GRADING)):
        raise Inconclusive(f"re-grade on a quieter machine {reason}")
    verdict = Verdict(True, True, f"could not confirm here (this machine is busy: {reason.split(': ', 1)[-1]}); "
                                  "autograde measures it again")
    print(verdict)
    return verdict


@dataclass
class Verdict:
    """One measurement of a learner's value beside the reference, and what it says."""

    passed: bool  # the learner's value reached its bar
    busy: bool  # the reference, measured in the same run, missed its own bar
    text: str  # both figures, for the feedback

    def __str__(self):
        return self.text


def decide(measure, *, tries=3, pause=5.0, confirm=2, budget=BUDGET, grading=None):
    """Call ``measure()`` until its verdict is clear and return it; if it never is, :func:`undecided`
    (in autograde, or with ``grading=True``: raise :class:`Inconclusive`).

    ``measure`` returns a :class:`Verdict` (or anything with ``passed``, ``busy`` and a
    ``str``). A passing verdict is final; a failing one whose reference reached its bar is
    final once ``confirm`` measurements have said so (a burst of other work can hit the
    learner's timing and spare the reference's). A failing one whose reference missed too is
    measured again after ``pause`` seconds (other work on the machine may have ended), at
    most ``tries`` times in all. Ranks stopped at their time-out (:class:`~grader.launch.LaunchTimeout`)
    count as such a measurement: the machine was too busy for them. All of it must fit in
    ``budget`` seconds (three quarters of nbgrader's cell time-out): a measurement that would
    not (the time so far, a pause and the longest measurement yet) is not started, and the
    grade is :class:`Inconclusive` instead of a cell stopped at its time-out with 0 points.

    >>> decide(lambda: Verdict(True, False, "1.8x; reference 1.9x")).passed
    True
    >>> said = iter([Verdict(False, False, "205x"), Verdict(True, False, "1.0x")])
    >>> decide(lambda: next(said)).passed   # one wild timing is measured again
    True
    >>> decide(lambda: Verdict(False, True, "0.9x; reference 0.97x, needed 1.00x"), tries=2, pause=0, grading=True)
    Traceback (most recent call last):
    ...
    grader.grading.fairness.Inconclusive: re-grade on a quieter machine (measured 2 times): 0.9x; reference 0.97x, needed 1.00x
    >>> def stopped():
    ...     raise LaunchTimeout("ranks [0, 1] of 2 were stopped after 300 s")
    >>> decide(stopped, tries=2, pause=0, grading=True)
    Traceback (most recent call last):
    ...
    grader.grading.fairness.Inconclusive: re-grade on a quieter machine (measured 2 times): the measurement did not finish: ranks [0, 1] of 2 were stopped after 300 s
    >>> def slow():
    ...     time.sleep(0.2)
    ...     return Verdict(False, True, "0.9x; reference 0.97x, needed 1.00x")
    >>> decide(slow, pause=0, budget=0.3, grading=True)
    Traceback (most recent call last):
    ...
    grader.grading.fairness.Inconclusive: re-grade on a quieter machine (measured 1 time; another measurement would not fit in the cell's time): 0.9x; reference 0.97x, needed 1.00x
    >>> decide(slow, pause=0, budget=0.3, grading=False).passed   # in a learner's kernel: said, not raised
    could not confirm here (this machine is busy: 0.9x; reference 0.97x, needed 1.00x); autograde measures it again
    True
    """
    failed, started, longest = 0, time.monotonic(), 0.0
    for attempt in range(1, tries + 1):
        begun = time.monotonic()
        try:
            verdict = measure()
        except LaunchTimeout as stopped:  # ranks the machine was too busy to let finish: measured again
            verdict = Verdict(False, True, f"the measurement did not finish: {str(stopped).splitlines()[0]}")
        longest = max(longest, time.monotonic() - begun)
        if verdict.passed:
            return verdict
        if not verdict.busy:
            failed += 1
            if failed >= confirm:
                return verdict
        if attempt == tries:
            break
        wait = pause if verdict.busy else 0.0  # a learner's miss is confirmed at once
        if time.monotonic() - started + wait + longest > budget:
            return undecided(f"(measured {attempt} time{'s' if attempt > 1 else ''}; another measurement "
                             f"would not fit in the cell's time): {verdict}", grading)
        time.sleep(wait)
    return undecided(f"(measured {tries} times): {verdict}", grading)


def near(measure, want, rtol, reference, what):
    """A :class:`Verdict` on a timing: ``measure()`` within ``rtol`` of ``want`` seconds, beside
    ``reference()``, the toolkit's own timing of the same work (busy when it misses too).

    >>> str(near(lambda: 0.0102, 0.01, 0.8, lambda: 0.0101, "median of a 10 ms sleep"))
    'median of a 10 ms sleep: 0.0102 s, wanted 0.0100 s +/- 80%; the toolkit timed the same work at 0.0101 s'
    >>> near(lambda: 0.05, 0.01, 0.8, lambda: 0.04, "median").busy   # the machine, not the answer
    True
    """
    got, ref = float(measure()), float(reference())  # a number, whatever object an answer returned
    return Verdict(abs(got - want) <= rtol * want, abs(ref - want) > rtol * want,
                   f"{what}: {got:.4f} s, wanted {want:.4f} s +/- {rtol:.0%}; the toolkit timed the same work at {ref:.4f} s")


def among(mine, repeats, tolerance, what, *, busy_from=float("inf")):
    """A :class:`Verdict` on a value the learner measured once, beside ``repeats``: the same value
    measured again by the grader (five times or more).

    Passed when ``mine`` lies within ``tolerance`` of the median, a band widened to twice the
    spread of the middle three when the machine is busier, or between the lowest and the highest
    repeat (this machine gave such a value itself). Busy when the band is wider than twice
    ``tolerance`` or the median reaches ``busy_from``: the machine, not the answer, would decide.

    >>> among(1.08, [1.77, 0.71, 0.79, 0.84, 0.70], 0.25, "serial fraction").passed   # a burst hit both
    True
    >>> v = among(1.08, [0.70, 0.71, 0.79, 0.80, 0.84], 0.25, "serial fraction")
    >>> v.passed, v.busy, str(v)
    (False, False, 'serial fraction measured again [0.7, 0.71, 0.79, 0.8, 0.84]; yours 1.080; allowed 0.790 +/- 0.250')
    """
    mine, repeats = float(mine), [float(r) for r in repeats]  # numbers, whatever objects an answer gave
    middle = sorted(repeats)[1:-1] if len(repeats) > 4 else sorted(repeats)
    centre = statistics.median(repeats)
    allowed = max(tolerance, 2 * (middle[-1] - middle[0]))  # one outlier does not widen the band
    passed = abs(mine - centre) <= allowed or min(repeats) <= mine <= max(repeats)
    return Verdict(passed, allowed > 2 * tolerance or centre >= busy_from,
                   f"{what} measured again {[round(r, 3) for r in repeats]}; yours {mine:.3f}; "
                   f"allowed {centre:.3f} +/- {allowed:.3f}")


def _ddp_rule(ranks):
    return thresholds("ddp_speedup")[scaling.ddp_backend(ranks)]


def grade_bucket_speedup(bucket_mb, sizes, ranks=2):
    """A :class:`Verdict` on bucketing: gradients of ``sizes`` all-reduced in buckets of ``bucket_mb``
    MB, against one message per parameter, beside the reference bucket size
    (``bucket_speedup`` in ``thresholds.json``), measured in turn in the same fresh processes.

    Buckets that each hold one gradient send the very messages of one all-reduce per parameter, so
    they fail without a measurement (timed, the two differ only by noise).

    >>> v = grade_bucket_speedup(1e-6, [4096] * 8)
    >>> v.passed, v.busy, str(v)
    (False, False, 'buckets of 1e-06 MB hold one gradient each: the same 8 messages as one all-reduce per parameter')
    """
    rule = thresholds("bucket_speedup")
    if all(len(bucket) == 1 for bucket in comms.buckets(sizes, max(1, int(bucket_mb * 2**20)))):
        return Verdict(False, False, f"buckets of {bucket_mb:g} MB hold one gradient each: the same "
                                     f"{len(sizes)} messages as one all-reduce per parameter")
    per_parameter, mine, reference = comms.bucket_times([bucket_mb, rule["reference_bucket_mb"]], sizes, ranks)
    needed = rule["needed"]
    return Verdict(per_parameter / mine >= needed, per_parameter / reference < needed,
                   f"buckets of {bucket_mb:g} MB: {per_parameter / mine:.2f}x faster than one all-reduce per "
                   f"parameter; the reference {rule['reference_bucket_mb']} MB buckets, measured in turn: "
                   f"{per_parameter / reference:.2f}x; needed {needed:.2f}x")


def reference_per_rank_batch(ranks):
    """The per-rank batch of the lessons' own solution, measured beside a learner's (``thresholds.json``).

    >>> reference_per_rank_batch(2)
    2048
    """
    return _ddp_rule(ranks)["reference_per_rank_batch"]


def efficiency_missed(batches, target, ranks=2, steps=3):
    """Why no batch of a learner's sweep reached ``target`` efficiency: their batches and the
    reference batch measured again, in turn in the same fresh processes. The verdict never
    passes (there is no batch to grade); it is busy, the machine's doing and not the sweep's, when
    a batch of theirs reaches the target now or the reference misses it too.

    >>> v = efficiency_missed([8], 1.5, steps=1)   # 150 %: out of reach of the reference too
    >>> v.passed, v.busy, str(v).startswith("no batch of yours reached 150%; measured again, your best")
    (False, True, True)
    """
    reference = reference_per_rank_batch(ranks)
    *mine, theirs = scaling.ddp_speedups([*batches, reference], ranks=ranks, steps=steps)
    best, reached = max(mine) / ranks, theirs / ranks
    return Verdict(False, best >= target or reached < target,
                   f"no batch of yours reached {target:.0%}; measured again, your best {best:.0%}, "
                   f"the reference batch {reference} {reached:.0%}")


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

    @property
    def busy(self):
        """The reference missed the bar too: the machine, not the learner's batch, decided."""
        return self.reference < self.needed

    def __str__(self):
        return (f"per-rank batch {self.per_rank_batch}: {self.speedup:.2f}x; reference batch "
                f"{self.reference_batch}, measured in turn with it: {self.reference:.2f}x; needed "
                f"{self.needed:.2f}x ({'passed' if self.passed else 'not reached'}), on {self.measured_on}")


def grade_ddp_speedup(per_rank_batch, ranks=2, rounds=2, steps=5):
    """Measure the DDP speedup of ``per_rank_batch`` fairly, even on a busy grading machine.

    The learner's batch and a reference batch (``reference_per_rank_batch`` in
    ``thresholds.json``) take turns step by step in the same fresh processes, so other
    work on the machine slows both alike; the best of ``rounds`` (one after the other in those
    processes) is kept for each. The bar
    is :func:`grader.scaling.expected_ddp_speedup`, lowered to ``fraction_of_reference`` of what the
    reference reached when the machine could not give the reference that much, and never
    below 1 (the ranks must beat one process).

    >>> g = grade_ddp_speedup(64, rounds=1, steps=1)   # doctest: +ELLIPSIS
    >>> str(g)
    'per-rank batch 64: ...'
    """
    rule = _ddp_rule(ranks)
    reference_batch = reference_per_rank_batch(ranks)
    batches = list(dict.fromkeys([per_rank_batch, reference_batch]))  # once if they are the same
    measured = scaling.ddp_speedups(batches, ranks, steps, 2, rounds)
    best = [max(s) for s in zip(*(measured if rounds > 1 else [measured]))]
    mine, reference = best[0], best[-1]
    needed = max(1.0, min(scaling.expected_ddp_speedup(ranks), rule["fraction_of_reference"] * reference))
    return SpeedupGrade(per_rank_batch, mine, reference_batch, reference, needed, scaling.ddp_measured_on(ranks))
