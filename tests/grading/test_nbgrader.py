"""The nbgrader round trip with real nbgrader commands and a real gradebook: lessons 00-02 and 05 and
the class's robustness cases here, lessons 03-04 in test_nbgrader_03_04.py (roundtrip.py)."""

import pytest
from nbgrader.api import Gradebook

import test_nbgrader_03_04
from conftest import LESSONS, REPO, nbgrader, points, scores
from mutants import MUTANTS
from roundtrip import *  # noqa: F401,F403  (the round trip's fixtures and tests, on ROUND_TRIP)
from roundtrip import FIRST

pytestmark = pytest.mark.slow
ROUND_TRIP = ["00_foundations", "01_data_parallel", "02_ddp", "05_communication"]


def test_the_two_round_trip_modules_grade_every_lesson_once():
    assert sorted(ROUND_TRIP + test_nbgrader_03_04.ROUND_TRIP) == LESSONS


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


# That the source passes every test is proven by the solver's full marks below, and that
# every test fails on each lesson's release by the untouched student's zero (one notebook
# run per lesson instead of three). `validate --invert`, the student's own command, runs
# here once, on the lightest lesson, so the command itself stays checked.
def test_validate_invert_fails_every_test_on_release(released):
    lesson = FIRST
    out = nbgrader("validate", "--invert", str(released / "release" / lesson / f"{lesson}.ipynb"),
                   cwd=released).stdout
    assert "Success! The notebook does not pass any tests." in out, out[-3000:]


def test_tampered_deleted_and_endless_cells_score_nothing_and_the_rest_is_graded(graded):
    # The rewritten test cell is restored, the deleted one put back, and the endless loop
    # stopped at the time-out: each of those challenges scores 0, every other one its points.
    score, max_score, per_cell = scores(graded[0], FIRST, "tamperer")
    lost = {"c1_speedup_test", "c2_to_device_test", "c3_gpus_needed_test"}
    assert {gid: per_cell[gid] for gid in lost} == dict.fromkeys(lost, 0)
    assert score == max_score - sum(points(FIRST)[gid] for gid in lost)


def test_corrupt_submission_is_logged_and_does_not_stop_the_class(graded):
    course, logs = graded
    assert "corrupt" in logs[FIRST]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        graded_students = {s.student.id for s in gb.assignment_submissions(FIRST)}
    assert {"solver", "untouched", "tamperer"} <= graded_students
