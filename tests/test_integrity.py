"""Grading that generic tampering cannot fool, checked with real nbgrader and a real gradebook."""

import json

import nbformat
import pytest

from conftest import LESSONS, copy_course, graded_cells, lesson_notebook, nbgrader, read_nb
from grader.integrity import scan
from test_nbgrader import points, scores, submission, submit

LESSON = "00_foundations"
# Each tampering kind, written at the top of challenge 2's answer cell, with every answer
# right: without the integrity check each would keep full marks.
TAMPERING = {
    "input_transformer": ("get_ipython().input_transformers_cleanup.append(lambda lines: [])",
                          "registers an IPython input transformer"),
    "rebinds_a_check": ("checks.check_equal = checks.check_close = lambda *args, **kwargs: None",
                        "rebinds checks.check_"),
    "setattr_on_an_alias": ("import grader.checks as gc\nfor name in dir(gc):\n    if name.startswith('check_'):\n        setattr(gc, name, lambda *a, **k: None)",
                            "changes gc with setattr"),
    "exec_of_a_built_string": ("exec('checks.check_' + 'equal = lambda *a, **k: None')", "runs code built at run time"),
    "event_callback": ("get_ipython().events.register('pre_run_cell', lambda info: None)",
                       "reaches IPython's event callbacks"),
    "profile_hook": ("import sys\nsys.setprofile(lambda *args: None)\nsys.setprofile(None)", "installs a profile function"),
    # A route the scan cannot read: only the missing proof of running gives it away.
    "hidden_transformer": ("getattr(get_ipython(), 'input_' + 'transformers_cleanup').append(lambda lines: [])",
                           "did not run as written"),
}


def test_the_scan_finds_each_kind_and_nothing_in_any_lesson():
    for name, (code, reason) in TAMPERING.items():
        if name != "hidden_transformer":
            assert any(reason in finding for finding in scan(code)), (name, scan(code))
    assert scan("%timeit x = 1\nmodel.events = []\n") == ["line 2: reaches IPython's event callbacks"]
    for path in [lesson_notebook("source", lesson) for lesson in LESSONS]:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("grade"):
                assert scan(cell.source) == [], (path.name, cell.source[:80])


@pytest.mark.slow
def test_tampering_scores_zero_on_the_tests_after_it_with_the_reason(tmp_path):
    course = copy_course(tmp_path)
    nbgrader("generate_assignment", LESSON, "--force", cwd=course)
    solutions = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
                 for c in graded_cells(read_nb(lesson_notebook("source", LESSON)), "solution")}
    for name, (code, _) in TAMPERING.items():
        submit(course, name, LESSON, submission(LESSON, answers={"c2_to_device": code + "\n\n" + solutions["c2_to_device"]}))
    # The blank notebook: one transformer at the top, nothing answered.
    blank = json.loads((course / "release" / LESSON / f"{LESSON}.ipynb").read_text())
    first = next(c for c in blank["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
    first["source"] = TAMPERING["input_transformer"][0] + "\n" + "".join(first["source"])
    submit(course, "blank_with_transformer", LESSON, blank)
    submit(course, "honest", LESSON, submission(LESSON))
    proc = nbgrader("autograde", LESSON, "--force", cwd=course)
    log = proc.stdout + proc.stderr

    worth = points(LESSON)
    assert scores(course, LESSON, "honest")[:2] == (sum(worth.values()),) * 2
    assert scores(course, LESSON, "blank_with_transformer")[0] == 0
    for name, (_, reason) in TAMPERING.items():
        score, _, per_cell = scores(course, LESSON, name)
        # Challenge 1's test ran before the tampering and keeps its point; every later test scores 0.
        assert per_cell == {gid: (pts if gid == "c1_speedup_test" else 0) for gid, pts in worth.items()}, name
        graded = nbformat.read(course / "autograded" / name / LESSON / f"{LESSON}.ipynb", as_version=4)
        errors = [o for c in graded.cells for o in c.get("outputs", []) if o.output_type == "error"]
        assert errors and all(o.ename == "GradingIntegrityError" and reason in o.evalue for o in errors), name
    assert "Grading integrity: c2_to_device_test scores 0" in log
    assert "registers an IPython input transformer" in log
