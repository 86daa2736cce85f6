"""The nbgrader round trip, shared by the modules that run it on their share of the lessons.

Each module (``test_nbgrader.py``, ``test_nbgrader_03_04.py``) names its lessons in
``ROUND_TRIP`` and imports everything here; the two run in different test lanes, so the
round trip's grading is spread over both instead of holding one lane for the whole suite.
The first lesson's module also grades the class's robustness cases (a corrupt submission,
a tampered notebook).
"""

import re

import pytest

from conftest import (LESSONS, REPO, assert_ran_cleanly, mutant_students, nbgrader, parallel_autograde, points,
                      read_nb, scores, submission, submit, undecided)
from mutants import MEASURED, MUTANTS

FIRST = LESSONS[0]


def pytest_generate_tests(metafunc):
    """``lesson`` (and ``mutant``) parametrized over the test module's ``ROUND_TRIP`` lessons."""
    lessons = metafunc.module.ROUND_TRIP
    if "mutant" in metafunc.fixturenames:
        metafunc.parametrize("lesson, mutant", [(lesson, name) for lesson in lessons for name in MUTANTS[lesson]])
    elif "lesson" in metafunc.fixturenames:
        metafunc.parametrize("lesson", lessons)


@pytest.fixture(scope="module")
def released(course, request):
    """The module's lessons generated from source/ in the scratch course."""
    for lesson in request.module.ROUND_TRIP:
        nbgrader("generate_assignment", lesson, "--force", cwd=course)
    return course


def test_regenerated_release_is_exactly_the_committed_one(released, lesson):
    made = sorted(p.relative_to(released / "release") for p in (released / "release" / lesson).rglob("*") if p.is_file())
    committed = sorted(p.relative_to(REPO / "release") for p in (REPO / "release" / lesson).rglob("*") if p.is_file())
    assert made == committed, f"{lesson}: release files differ; run `make release`"
    for rel in made:
        assert (released / "release" / rel).read_bytes() == (REPO / "release" / rel).read_bytes(), \
            f"release/{rel} is out of date with source/; run `make release` and commit"


@pytest.fixture(scope="module")
def graded(released, request):
    """The module's lessons autograded once, for a class with one kind of submission per student."""
    lessons = request.module.ROUND_TRIP
    for lesson in lessons:
        submit(released, "solver", lesson, submission(lesson))
        submit(released, "untouched", lesson, (REPO / "release" / lesson / f"{lesson}.ipynb").read_text())
        for student, carried in mutant_students(lesson).items():
            submit(released, student, lesson, submission(
                lesson, answers={gid: MUTANTS[lesson][name][1].lstrip() for gid, name in carried.items()},
                blank=unanswered(lesson, carried)))
    if FIRST in lessons:
        submit(released, "corrupt", FIRST, '{"cells": [ this is not json')
    # The whole class, the solution among it, with the course's parallel autograde: as many students
    # at a time as it gives this machine (one per core; one notebook at a time for lessons whose
    # ranks need both cores), beside the other test lane, so the solution is graded on a busy machine.
    logs = {}
    for lesson in lessons:
        proc = parallel_autograde(released, lesson)
        logs[lesson] = proc.stdout + proc.stderr
        assert proc.returncode == (1 if lesson == FIRST else 0), logs[lesson][-3000:]  # the corrupt one fails
    if FIRST in lessons:
        # The robustness cases, in one student of the first lesson (each notebook run costs time):
        # a test cell rewritten to pass, a test cell deleted, and an endless loop, graded alone
        # with a short cell time-out so the suite need not wait the course's 120 s.
        submit(released, "tamperer", FIRST, submission(FIRST, answers={
            "c1_speedup": "def my_speedup(t1, tn):\n    return tn / t1\n",
            "c2_to_device": MUTANTS[FIRST]["does_nothing"][1],
            "c3_gpus_needed": "def gpus_needed(*args, **kwargs):\n    while True:\n        pass\n"},
            tests={"c2_to_device_test": "pass"}, drop={"c1_speedup_test"}))
        nbgrader("autograde", FIRST, "--student=tamperer", "--force", "--Execute.timeout=20", cwd=released)
    return released, logs


def unanswered(lesson, carried):
    """The measured challenges a mutant student leaves as released: those it carries no mutant for."""
    return MEASURED.get(lesson, set()) - set(carried)


def test_solution_gets_full_marks(graded, lesson):
    # A right answer never loses a point, here on a busy grader (beside the class and the other test
    # lane): where the reference measured beside it misses its bar too, a measured cell goes to the
    # instructor with the numbers, never to 0.
    score, max_score, per_cell = scores(graded[0], lesson, "solver")
    busy = undecided(graded[0], lesson, "solver")
    assert max_score >= 10
    assert score + sum(points(lesson)[gid] for gid in busy) == max_score, (per_cell, busy)


def test_solution_runs_top_to_bottom_without_errors_or_stderr(graded, lesson):
    # The solver's notebook is the source run top to bottom, under nbgrader's cell time-out.
    assert_ran_cleanly(read_nb(graded[0] / "autograded" / "solver" / lesson / f"{lesson}.ipynb"), busy=True)


def test_untouched_release_gets_zero(graded, lesson):
    score, max_score, per_cell = scores(graded[0], lesson, "untouched")
    assert (score, max_score >= 10) == (0, True)
    assert set(per_cell) == set(points(lesson)) and not any(per_cell.values())  # every test cell failed


def test_mutant_loses_exactly_its_challenges_points(graded, lesson, mutant):
    test_id = MUTANTS[lesson][mutant][0] + "_test"
    student, carried = next((s, c) for s, c in mutant_students(lesson).items() if mutant in c.values())
    _, _, per_cell = scores(graded[0], lesson, student)
    assert per_cell[test_id] == 0, f"{mutant} scored on {test_id}: the challenge accepts this wrong answer"
    # Every challenge this student answered rightly keeps its points: the mutants cost only their own.
    mutated = {f"{gid}_test" for gid in carried}
    blank = {f"{gid}_test" for gid in unanswered(lesson, carried)}
    assert not any(per_cell[gid] for gid in blank), per_cell  # left unanswered, as released
    busy = undecided(graded[0], lesson, student)  # left to the instructor, as for a right answer
    right = {gid: pts for gid, pts in points(lesson).items() if gid not in mutated | blank | busy}
    assert {gid: per_cell[gid] for gid in right} == right, (per_cell, busy)


def test_the_feedback_on_a_failed_check_starts_with_its_message(graded, lesson):
    # What nbgrader's feedback shows a mutant's student: the check's message first, no toolkit frame.
    failed = [output for student in mutant_students(lesson)
              for cell in read_nb(graded[0] / "autograded" / student / lesson / f"{lesson}.ipynb")["cells"]
              for output in cell.get("outputs", []) if output.get("ename") == "CheckFailed"]
    assert failed, "no mutant failed a check"
    for output in failed:
        lines = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(output["traceback"])).splitlines()
        assert lines[0] == f"CheckFailed: {output['evalue'].splitlines()[0]}", lines
        assert not any("grader/" in line for line in lines), lines
