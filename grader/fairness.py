"""Fair grades for measured challenges: a busy grader never fails a right answer.

A graded measurement (a speedup, a timing, a fitted serial fraction) is always taken beside
a reference, the lesson's own solution measured in the same run, so that a machine too busy
for the reference to reach its bar is told apart from a learner's answer that misses it:

- the learner's value reaches its bar: passed;
- it misses, and the reference reached its own bar: failed (the learner's answer);
- it misses, and so did the reference: the machine decided, not the learner. Measure again,
  a bounded number of times with a pause, then raise :class:`Inconclusive`, which the
  course's autograde turns into manual grading with the numbers (never 0).
"""

import time
from dataclasses import dataclass


class Inconclusive(Exception):
    """A measured grade this machine could not decide; autograde leaves it to the instructor, with the numbers."""


@dataclass
class Verdict:
    """One measurement of a learner's value beside the reference, and what it says."""

    passed: bool  # the learner's value reached its bar
    busy: bool  # the reference, measured in the same run, missed its own bar
    text: str  # both figures, for the feedback

    def __str__(self):
        return self.text


def decide(measure, *, tries=3, pause=5.0):
    """Call ``measure()`` until its verdict is clear and return it; raise :class:`Inconclusive` if it never is.

    ``measure`` returns a :class:`Verdict` (or anything with ``passed``, ``busy`` and a
    ``str``). A passing verdict, or a failing one whose reference reached its bar, is final.
    A failing one whose reference missed too is measured again, at most ``tries`` times in
    all, ``pause`` seconds apart (other work on the machine may have ended).

    >>> decide(lambda: Verdict(True, False, "1.8x; reference 1.9x")).passed
    True
    >>> decide(lambda: Verdict(False, True, "0.9x; reference 0.97x, needed 1.00x"), tries=2, pause=0)
    Traceback (most recent call last):
    ...
    grader.fairness.Inconclusive: re-grade on a quieter machine (measured 2 times): 0.9x; reference 0.97x, needed 1.00x
    """
    for attempt in range(1, tries + 1):
        verdict = measure()
        if verdict.passed or not verdict.busy:
            return verdict
        if attempt < tries:
            time.sleep(pause)
    raise Inconclusive(f"re-grade on a quieter machine (measured {tries} times): {verdict}")


def near(measure, want, rtol, reference, what):
    """A :class:`Verdict` on a timing: ``measure()`` within ``rtol`` of ``want`` seconds, beside
    ``reference()``, the toolkit's own timing of the same work (busy when it misses too).

    >>> str(near(lambda: 0.0102, 0.01, 0.8, lambda: 0.0101, "median of a 10 ms sleep"))
    'median of a 10 ms sleep: 0.0102 s, wanted 0.0100 s +/- 80%; the toolkit timed the same work at 0.0101 s'
    >>> near(lambda: 0.05, 0.01, 0.8, lambda: 0.04, "median").busy   # the machine, not the answer
    True
    """
    got, ref = measure(), reference()
    return Verdict(abs(got - want) <= rtol * want, abs(ref - want) > rtol * want,
                   f"{what}: {got:.4f} s, wanted {want:.4f} s +/- {rtol:.0%}; the toolkit timed the same work at {ref:.4f} s")
