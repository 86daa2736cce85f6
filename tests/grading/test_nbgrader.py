"""The nbgrader round trip with real nbgrader commands and a real gradebook."""

import re

import pytest
from nbgrader.api import Gradebook

from conftest import (LESSONS, REPO, assert_ran_cleanly, cpu_hogs, mutant_students, nbgrader, parallel_autograde, points,
                      read_nb, scores, submission, submit, undecided)
from mutants import MUTANTS

pytestmark = pytest.mark.slow


def test_every_challenge_keeps_a_mutant():
    for lesson in LESSONS:
        covered = {f"{gid}_test" for gid, _ in MUTANTS.get(lesson, {}).values()}
        assert covered == set(points(lesson)), f"{lesson}: challenges without a mutant: {set(points(lesson)) - covered}"


def test_measured_grades_stop_within_the_cell_time_out():
    from traitlets.config import Config

    from grader.grading import fairness

    config = Config()
    path = REPO / "nbgrader_config.py"
    exec(path.read_text(), {"c": config, "get_config": lambda: config, "__file__": str(path)})
    assert fairness.CELL_SECONDS == config.Execute.timeout and fairness.BUDGET < fairness.CELL_SECONDS


@pytest.fixture(scope="module")
def released(course):
    for lesson in LESSONS:
        nbgrader("generate_assignment", lesson, "--force", cwd=course)
    return course


def test_regenerated_release_is_exactly_the_committed_one(released):
    for lesson in LESSONS:
        made = sorted(p.relative_to(released / "release") for p in (released / "release" / lesson).rglob("*") if p.is_file())
        committed = sorted(p.relative_to(REPO / "release") for p in (REPO / "release" / lesson).rglob("*") if p.is_file())
        assert made == committed, f"{lesson}: release files differ; run `make release`"
        for rel in made:
            assert (released / "release" / rel).read_bytes() == (REPO / "release" / rel).read_bytes(), \
                f"release/{rel} is out of date with source/; run `make release` and commit"


# That the source passes every test is proven by the solver's full marks below, and that
# every test fails on each lesson's release by the untouched student's zero (one notebook
# run per lesson instead of three). `validate --invert`, the student's own command, runs
# here once, on the lightest lesson, so the command itself stays checked.
@pytest.mark.parametrize("lesson", LESSONS[:1])
def test_validate_invert_fails_every_test_on_release(released, lesson):
    out = nbgrader("validate", "--invert", str(released / "release" / lesson / f"{lesson}.ipynb"),
                   cwd=released).stdout
    assert "Success! The notebook does not pass any tests." in out, out[-3000:]


@pytest.fixture(scope="module")
def graded(released):
    """Every lesson autograded once, for a class with one kind of submission per student."""
    first = LESSONS[0]
    for lesson in LESSONS:
        submit(released, "solver", lesson, submission(lesson))
        submit(released, "untouched", lesson, (REPO / "release" / lesson / f"{lesson}.ipynb").read_text())
        for student, carried in mutant_students(lesson).items():
            submit(released, student, lesson, submission(
                lesson, answers={gid: MUTANTS[lesson][name][1].lstrip() for gid, name in carried.items()}))
    submit(released, "corrupt", first, '{"cells": [ this is not json')
    # The solution on a busy grader: a CPU-heavy process (an endless loop) beside nbgrader and the
    # other test lane. Right answers written otherwise, in the mutants' students, are graded after it.
    with cpu_hogs(1):
        for lesson in LESSONS:
            nbgrader("autograde", lesson, "--student=solver", cwd=released)
    # The rest of the class with the course's parallel autograde, as many students at a time as it
    # gives this machine (one per core; one notebook at a time for lessons whose ranks need both cores).
    logs = {}
    for lesson in LESSONS:
        proc = parallel_autograde(released, lesson)
        logs[lesson] = proc.stdout + proc.stderr
        assert proc.returncode == (1 if lesson == first else 0), logs[lesson][-3000:]  # the corrupt one fails
    # The robustness cases, in one student of the first lesson (each notebook run costs time):
    # a test cell rewritten to pass, a test cell deleted, and an endless loop, graded alone
    # with a short cell time-out so the suite need not wait the course's 120 s.
    submit(released, "tamperer", first, submission(first, answers={
        "c1_speedup": "def my_speedup(t1, tn):\n    return tn / t1\n",
        "c2_to_device": MUTANTS[first]["does_nothing"][1],
        "c3_gpus_needed": "def gpus_needed(*args, **kwargs):\n    while True:\n        pass\n"},
        tests={"c2_to_device_test": "pass"}, drop={"c1_speedup_test"}))
    nbgrader("autograde", first, "--student=tamperer", "--force", "--Execute.timeout=20", cwd=released)
    return released, logs


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_gets_full_marks(graded, lesson):
    # A right answer never loses a point, here on a busy grader: where the reference measured
    # beside it misses its bar too, a measured cell goes to the instructor with the numbers, never to 0.
    score, max_score, per_cell = scores(graded[0], lesson, "solver")
    busy = undecided(graded[0], lesson, "solver")
    assert max_score >= 10
    assert score + sum(points(lesson)[gid] for gid in busy) == max_score, (per_cell, busy)


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_runs_top_to_bottom_without_errors_or_stderr(graded, lesson):
    # The solver's notebook is the source run top to bottom, under nbgrader's cell time-out.
    assert_ran_cleanly(read_nb(graded[0] / "autograded" / "solver" / lesson / f"{lesson}.ipynb"), busy=True)


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_release_gets_zero(graded, lesson):
    score, max_score, per_cell = scores(graded[0], lesson, "untouched")
    assert (score, max_score >= 10) == (0, True)
    assert set(per_cell) == set(points(lesson)) and not any(per_cell.values())  # every test cell failed


@pytest.mark.parametrize("lesson, mutant", [(lesson, name) for lesson in LESSONS for name in MUTANTS[lesson]])
def test_mutant_loses_exactly_its_challenges_points(graded, lesson, mutant):
    test_id = MUTANTS[lesson][mutant][0] + "_test"
    student, carried = next((s, c) for s, c in mutant_students(lesson).items() if mutant in c.values())
    _, _, per_cell = scores(graded[0], lesson, student)
    assert per_cell[test_id] == 0, f"{mutant} scored on {test_id}: the challenge accepts this wrong answer"
    # Every challenge this student answered rightly keeps its points: the mutants cost only their own.
    mutated = {f"{gid}_test" for gid in carried}
    busy = undecided(graded[0], lesson, student)  # left to the instructor, as for a right answer
    right = {gid: pts for gid, pts in points(lesson).items() if gid not in mutated | busy}
    assert {gid: per_cell[gid] for gid in right} == right, (per_cell, busy)


@pytest.mark.parametrize("lesson", LESSONS)
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


def test_tampered_deleted_and_endless_cells_score_nothing_and_the_rest_is_graded(graded):
    # The rewritten test cell is restored, the deleted one put back, and the endless loop
    # stopped at the time-out: each of those challenges scores 0, every other one its points.
    score, max_score, per_cell = scores(graded[0], LESSONS[0], "tamperer")
    lost = {"c1_speedup_test", "c2_to_device_test", "c3_gpus_needed_test"}
    assert {gid: per_cell[gid] for gid in lost} == dict.fromkeys(lost, 0)
    assert score == max_score - sum(points(LESSONS[0])[gid] for gid in lost)


def test_corrupt_submission_is_logged_and_does_not_stop_the_class(graded):
    course, logs = graded
    assert "corrupt" in logs[LESSONS[0]]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        graded_students = {s.student.id for s in gb.assignment_submissions(LESSONS[0])}
    assert {"solver", "untouched", "tamperer"} <= graded_students
