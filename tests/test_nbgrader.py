"""The nbgrader round trip with real nbgrader commands and a real gradebook."""

import copy
import json

import pytest
from nbgrader.api import Gradebook

from conftest import LESSONS, REPO, graded_cells, lesson_notebook, nbgrader, read_nb

pytestmark = pytest.mark.slow

# A wrong answer per lesson, and the points its challenge is worth.
WRONG = {
    "00_foundations": ("c2_to_device", "def to_device(batch, device):\n    return batch\n", 3),
    "01_data_parallel": ("c2_chunk_sizes",
                         "def dp_chunk_sizes(batch, n_devices):\n    return [batch // n_devices] * n_devices\n", 3),
    "02_ddp": ("c3_average",
               "def average_gradients(model):\n    for p in model.parameters():\n"
               "        dist.all_reduce(p.grad)\n", 3),
}


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


@pytest.mark.parametrize("lesson", LESSONS)
def test_validate_passes_on_source(course, lesson):
    out = nbgrader("validate", str(lesson_notebook("source", lesson)), cwd=course).stdout
    assert "Success! Your notebook passes all the tests." in out, out[-3000:]


@pytest.mark.parametrize("lesson", LESSONS)
def test_validate_invert_fails_every_test_on_release(released, lesson):
    out = nbgrader("validate", "--invert", str(released / "release" / lesson / f"{lesson}.ipynb"),
                   cwd=released).stdout
    assert "Success! The notebook does not pass any tests." in out, out[-3000:]


def submission(lesson, answers=None, tests=None, drop=()):
    """The release notebook with the source's solutions filled in.

    ``answers`` replaces solution cells and ``tests`` replaces test cells, by grade id;
    ``drop`` deletes cells by grade id.
    """
    answers = answers or {}
    tests = tests or {}
    solutions = {c["metadata"]["nbgrader"]["grade_id"]: c["source"]
                 for c in graded_cells(read_nb(lesson_notebook("source", lesson)), "solution")}
    nb = copy.deepcopy(read_nb(REPO / "release" / lesson / f"{lesson}.ipynb"))
    kept = []
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if gid in drop:
            continue
        if meta.get("solution"):
            cell["source"] = answers.get(gid, solutions[gid])
        elif meta.get("grade") and gid in tests:
            cell["source"] = tests[gid]
        kept.append(cell)
    nb["cells"] = kept
    return nb


def submit(course, student, lesson, nb):
    path = course / "submitted" / student / lesson / f"{lesson}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb))


def scores(course, lesson, student):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(lesson, lesson, student)
        return sub.score, sub.max_score, {g.name: g.score for g in sub.grades}


@pytest.fixture(scope="module")
def graded(released):
    """Every lesson autograded for a class of students, each with one kind of submission."""
    first = LESSONS[0]
    for lesson in LESSONS:
        wrong_id, wrong_code, _ = WRONG[lesson]
        submit(released, "solver", lesson, submission(lesson))
        submit(released, "untouched", lesson, (REPO / "release" / lesson / f"{lesson}.ipynb").read_text())
        submit(released, "one_wrong", lesson, submission(lesson, answers={wrong_id: wrong_code}))
    # The robustness cases on the first lesson only: each costs a full notebook run.
    wrong_id, wrong_code, _ = WRONG[first]
    submit(released, "tamperer", first, submission(
        first, answers={wrong_id: wrong_code}, tests={f"{wrong_id}_test": "pass"}))
    submit(released, "deleter", first, submission(
        first, answers={"c1_speedup": "def my_speedup(t1, tn):\n    return tn / t1\n"},
        drop={"c1_speedup_test"}))
    submit(released, "looper", first, submission(
        first, answers={"c3_gpus_needed": "def gpus_needed(*args, **kwargs):\n    while True:\n        pass\n"}))
    submit(released, "corrupt", first, '{"cells": [ this is not json')
    logs = {}
    for lesson in LESSONS:
        proc = nbgrader("autograde", lesson, "--force", "--Execute.timeout=20", cwd=released, check=False)
        logs[lesson] = proc.stdout + proc.stderr
    return released, logs


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_gets_full_marks(graded, lesson):
    score, max_score, _ = scores(graded[0], lesson, "solver")
    assert max_score >= 10
    assert score == max_score


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_release_gets_zero(graded, lesson):
    score, max_score, _ = scores(graded[0], lesson, "untouched")
    assert (score, max_score >= 10) == (0, True)


@pytest.mark.parametrize("lesson", LESSONS)
def test_one_wrong_answer_loses_exactly_its_points(graded, lesson):
    wrong_id, _, points = WRONG[lesson]
    score, max_score, per_cell = scores(graded[0], lesson, "one_wrong")
    assert per_cell[f"{wrong_id}_test"] == 0
    assert score == max_score - points


def test_tampered_test_cell_is_restored(graded):
    wrong_id, _, points = WRONG[LESSONS[0]]
    score, max_score, per_cell = scores(graded[0], LESSONS[0], "tamperer")
    assert per_cell[f"{wrong_id}_test"] == 0
    assert score == max_score - points


def test_deleted_test_cell_is_restored(graded):
    score, max_score, per_cell = scores(graded[0], LESSONS[0], "deleter")
    assert per_cell["c1_speedup_test"] == 0
    assert score == max_score - 2


def test_endless_loop_times_out_and_the_rest_is_graded(graded):
    score, max_score, per_cell = scores(graded[0], LESSONS[0], "looper")
    assert per_cell["c3_gpus_needed_test"] == 0
    assert score == max_score - 3


def test_corrupt_submission_is_logged_and_does_not_stop_the_class(graded):
    course, logs = graded
    assert "corrupt" in logs[LESSONS[0]]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        graded_students = {s.student.id for s in gb.assignment_submissions(LESSONS[0])}
    assert {"solver", "untouched", "one_wrong", "tamperer", "deleter", "looper"} <= graded_students
