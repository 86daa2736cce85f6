"""Every notebook runs top to bottom on this machine, and release copies stay clean."""

import ast
import re

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import LESSONS, REPO, assert_ran_cleanly, graded_cells, lesson_notebook, read_nb

# Run every cell under the time-out nbgrader grades with. The lessons' source notebooks run
# once, in the nbgrader round trip: the solver's autograded copy is checked there the same way
# (tests/grading/test_nbgrader.py), so here run the self-study notebooks.
CELL_TIMEOUT = int(re.search(r"c\.Execute\.timeout = (\d+)", (REPO / "nbgrader_config.py").read_text())[1])
STUDY_NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def run_notebook(path, workdir):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                   resources={"metadata": {"path": str(workdir)}}).execute()
    return nb


@pytest.mark.slow
@pytest.mark.parametrize("path", STUDY_NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom_without_stderr(path, tmp_path):
    assert_ran_cleanly(run_notebook(path, tmp_path))


def demonstrations(lesson):
    """The lesson's cells that only demonstrate: autograde skips them (nbgrader_config.py)."""
    return [c for c in read_nb(lesson_notebook("source", lesson))["cells"] if "demo" in c["metadata"].get("tags", [])]


@pytest.mark.slow
@pytest.mark.parametrize("lesson", [lesson for lesson in LESSONS if demonstrations(lesson)])
def test_demonstrations_run_top_to_bottom_without_stderr(lesson, tmp_path):
    # The solver's graded copy (the round trip) runs every cell but these; here they run, with
    # every lesson cell they build on, the challenges' answer and test cells left out.
    nb = nbformat.read(lesson_notebook("source", lesson), 4)
    nb.cells = [c for c in nb.cells if not (c.metadata.get("nbgrader", {}).get("grade")
                                            or c.metadata.get("nbgrader", {}).get("solution"))]
    executed = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                              resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert_ran_cleanly(executed)
    ran = [c for c in executed.cells if "demo" in c.metadata.get("tags", [])]
    assert ran and all(c.execution_count for c in ran)


def test_demonstrations_say_so_and_define_nothing_an_answer_or_test_reads():
    for lesson in LESSONS:
        cells = read_nb(lesson_notebook("source", lesson))["cells"]
        for i, cell in enumerate(cells):
            if "demo" not in cell["metadata"].get("tags", []):
                continue
            source = "".join(cell["source"])
            assert source.startswith("# Demonstration: grading skips this cell."), (lesson, i)
            assert not cell["metadata"].get("nbgrader"), (lesson, i)
            made = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            made |= {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            for later in graded_cells({"cells": cells[i + 1:]}, "grade") + graded_cells({"cells": cells[i + 1:]}, "solution"):
                tree = ast.parse("".join(later["source"]))
                own = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | \
                    {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
                read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                assert not (made & read) - own, (lesson, i, later["metadata"]["nbgrader"]["grade_id"], (made & read) - own)


@pytest.mark.parametrize("lesson", LESSONS)
def test_release_has_no_solutions_or_hidden_tests(lesson):
    source = read_nb(lesson_notebook("source", lesson))
    text = lesson_notebook("release", lesson).read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text
    release = read_nb(lesson_notebook("release", lesson))
    for cell in graded_cells(release, "solution"):
        assert "raise NotImplementedError()" in "".join(cell["source"])
    # No line of a model answer, nor of a hidden test, survives into the release.
    blocks = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)\n(.*?)### END \1", re.S)
    source_text = "\n".join("".join(c["source"]) for c in source["cells"])
    public = blocks.sub("", source_text)
    secret = [line.strip() for _, block in blocks.findall(source_text) for line in block.splitlines()
              if len(line.strip()) > 12 and line.strip() not in public]
    assert secret, "source should have solutions"
    for line in secret:
        assert line not in text, f"release/{lesson} leaks: {line!r}"


def test_lessons_meet_the_course_minimums():
    for lesson in LESSONS:
        tests = graded_cells(read_nb(lesson_notebook("source", lesson)), "grade")
        assert len(tests) >= 4 and sum(c["metadata"]["nbgrader"]["points"] for c in tests) >= 10
        assert all("BEGIN HIDDEN TESTS" in "".join(c["source"]) for c in tests), \
            f"{lesson}: every graded test cell should hold hidden tests"


@pytest.mark.parametrize("lesson", LESSONS)
def test_challenge_headings_state_the_points_graded(lesson):
    nb = read_nb(lesson_notebook("source", lesson))
    stated = [int(n) for c in nb["cells"] if c["cell_type"] == "markdown"
              for n in re.findall(r"^### Challenge \d+ \((\d+) points?\)", "".join(c["source"]), re.M)]
    graded = [c["metadata"]["nbgrader"]["points"] for c in graded_cells(nb, "grade")]
    assert stated == graded


COURSE_NOTEBOOKS = sorted(p for folder in ("source", "release", "notebooks")
                          for p in (REPO / folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_notebooks_carry_no_outputs(path):
    for cell in read_nb(path)["cells"]:
        if cell["cell_type"] == "code":
            assert not cell["outputs"] and cell["execution_count"] is None, f"{path} has outputs"


def test_a_failed_check_shows_its_message_first_and_none_of_the_toolkits_frames(tmp_path):
    """In a lesson, and in the feedback nbgrader returns (it keeps the same lines), a wrong answer's
    check speaks first: what was expected and what came, then the notebook's own line that asked."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from grader.grading import checks\n\n\ndef my_speedup(t1, tn):\n    return tn / t1\n\n\n"
        "checks.check_close(my_speedup(100, 30), 100 / 30, 'speedup for 100 min -> 30 min')")])
    NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    error, = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    lines = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback)).splitlines()
    assert (error.ename, lines[:3]) == ("CheckFailed", ["CheckFailed: speedup for 100 min -> 30 min is not right",
                                                        "  expected: 3.33333", "  got:      0.3"])
    assert lines[3:] == ["", "where:", "  Cell In[1], line 8, in <module>",
                         "    checks.check_close(my_speedup(100, 30), 100 / 30, 'speedup for 100 min -> 30 min')"]
