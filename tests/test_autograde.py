"""Parallel autograde (grader.autograde) leaves the gradebook serial `nbgrader autograde` leaves.

Real nbgrader, real gradebooks, real worker processes: one class, graded once each way.
"""

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from conftest import REPO, activated, copy_course, installed, nbgrader
from grader.autograde import FORK, LOGS, core_sets, course_directory, pin, starts_ranks
from test_nbgrader import MUTANTS, mutant_students, points, scores, submission, submit

LESSON = "01_data_parallel"
# Test cells scored on timings, so on how busy the machine is: on a loaded 2-core machine
# lesson 01's (a pass-through DataParallel's speedup must be near 1) has failed the
# solution in serial autograde too. Their scores are not compared.
TIMED = {"00_foundations": {"c4_median_time_test"}, "01_data_parallel": {"c4_compare_test"},
         "02_ddp": {"c4_checkpoint_test", "c5_speedup_test"}, "03_model_parallel": {"c2_bubble_test"}}
CORRUPT = '{"cells": [ this is not json'


def mixed_class(lesson, size=3):
    """{student: notebook} for ``size`` students: the solution, the untouched release, a wrong answer, in turn.

    The wrong answer carries the lesson's mutants of its first two challenges; from the fourth
    student on, the same submissions come round again (``solver_2``, ...).
    """
    wrong = dict(list(mutant_students(lesson)["mutants_1"].items())[:2])  # {challenge: mutant}
    kinds = {"solver": submission(lesson),
             "untouched": (REPO / "release" / lesson / f"{lesson}.ipynb").read_text(),
             "wrong": submission(lesson, answers={gid: MUTANTS[lesson][name][1].lstrip() for gid, name in wrong.items()})}
    names = list(kinds)
    return {names[i % 3] + (f"_{i // 3 + 1}" if i >= 3 else ""): kinds[names[i % 3]] for i in range(size)}


def course_with(root, lesson, students):
    """A scratch course at ``root`` with ``lesson`` generated and ``students`` ({student: notebook}) submitted."""
    course = copy_course(root)
    nbgrader("generate_assignment", lesson, "--force", cwd=course)
    for student, nb in students.items():
        submit(course, student, lesson, nb)
    return course


def parallel_autograde(course, lesson, *args):
    """``python -m grader.autograde LESSON ARGS`` in ``course``, as an activated environment runs it."""
    return subprocess.run([installed()[0], "-m", "grader.autograde", lesson, *args], cwd=course, env=activated(),
                          capture_output=True, text=True, timeout=900)


def gradebook(course, lesson):
    """What a course's gradebook holds on ``lesson``, by student: the submission, then every cell's grade and comment.

    The scores of the lesson's TIMED cells are left out, and taken out of the submission's score.
    """
    timed = TIMED.get(lesson, set())
    found = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "multi-gpu-training") as gb:
        for sub in gb.assignment_submissions(lesson):
            grades = [g for nb in sub.notebooks for g in nb.grades]
            found[sub.student.id] = {
                "submission": (sub.score - sum(g.score for g in grades if g.name in timed), sub.max_score,
                               sub.timestamp, sub.late_submission_penalty),
                **{g.name: (g.max_score, g.needs_manual_grade) +
                   (() if g.name in timed else (g.score, g.auto_score, g.manual_score, g.extra_credit)) for g in grades},
                **{f"{c.name} comment": c.comment for nb in sub.notebooks for c in nb.comments}}
    return found


def test_lessons_that_start_ranks_are_told_apart(monkeypatch):
    monkeypatch.chdir(REPO)
    coursedir = course_directory()
    assert starts_ranks(coursedir, "02_ddp") and not starts_ranks(coursedir, LESSON)


def _worker_starts_a_kernel(cores, out):
    pin(cores)
    with open(out, "w") as seen:  # what a kernel the worker starts counts, and its torch threads
        subprocess.run([sys.executable, "-c", "import os; from grader import hardware; "
                        "print(hardware.cpu_cores(), os.environ['OMP_NUM_THREADS'])"], stdout=seen, check=True)


def test_each_worker_and_the_kernel_it_starts_keep_to_their_own_cores(tmp_path, monkeypatch):
    assert core_sets(2, cores=[0, 1, 2, 3]) == [[0, 1], [2, 3]]
    assert core_sets(3, cores=[5, 7]) == [[5], [7], [5, 7]]  # more workers than cores: they share
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    sets = core_sets(2)  # this machine's
    assert all(not set(a) & set(b) for a, b in zip(sets, sets[1:])) or len(os.sched_getaffinity(0)) < 2
    for i, cores in enumerate(sets):
        worker = FORK.Process(target=_worker_starts_a_kernel, args=(cores, tmp_path / f"{i}.txt"))
        worker.start()
        worker.join(60)
        assert (tmp_path / f"{i}.txt").read_text().split() == [str(len(cores))] * 2


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One class graded twice: by `nbgrader autograde` in one course, by grader.autograde in a copy of it."""
    root = tmp_path_factory.mktemp("autograde")
    serial = course_with(root / "serial", LESSON, {**mixed_class(LESSON), "corrupt": CORRUPT})
    (serial / "submitted" / "solver" / LESSON / "timestamp.txt").write_text("2026-01-05 10:00:00.000000 UTC")
    parallel = shutil.copytree(serial, root / "parallel")
    nbgrader("autograde", LESSON, cwd=serial, check=False)
    return serial, parallel, parallel_autograde(parallel, LESSON)


@pytest.mark.slow
def test_the_gradebooks_agree_student_by_student_and_cell_by_cell(graded):
    serial, parallel, _ = graded
    expected = gradebook(serial, LESSON)
    assert gradebook(parallel, LESSON) == expected
    # The class is graded as it should be, so the agreement is not that of two empty gradebooks.
    assert set(expected) == {*mixed_class(LESSON), "corrupt"}  # nbgrader records the corrupt one, ungraded
    untimed = {cell: pts for cell, pts in points(LESSON).items() if cell not in TIMED[LESSON]}
    wrong = {f"{gid}_test" for gid in list(mutant_students(LESSON)["mutants_1"])[:2]}
    for student, failed in {"solver": set(), "untouched": set(untimed), "wrong": wrong}.items():
        per_cell = scores(serial, LESSON, student)[2]
        assert {cell: per_cell[cell] for cell in untimed} == \
            {cell: 0 if cell in failed else pts for cell, pts in untimed.items()}, student


@pytest.mark.slow
def test_the_autograded_notebooks_are_in_place(graded):
    serial, parallel, _ = graded
    for student in mixed_class(LESSON):
        for course in (serial, parallel):
            assert (course / "autograded" / student / LESSON / f"{LESSON}.ipynb").is_file(), (course.name, student)
    assert not (serial / "autograded" / "corrupt").exists() and not (parallel / "autograded" / "corrupt").exists()


@pytest.mark.slow
def test_a_corrupt_notebook_is_reported_and_the_class_still_graded(graded):
    _, parallel, proc = graded
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.split()[:1]}
    assert "failed" in rows["corrupt"]
    assert all(rows[student].endswith("graded") for student in mixed_class(LESSON)), proc.stdout
    log = (parallel / LOGS / LESSON / "corrupt.log").read_text()
    assert "JSONDecodeError" in log, log[-3000:]


@pytest.mark.slow
def test_a_worker_past_its_time_is_stopped_and_reported(graded, tmp_path):
    course = shutil.copytree(graded[0], tmp_path / "course", ignore=shutil.ignore_patterns("autograded"))
    for student in {*mixed_class(LESSON), "corrupt"} - {"solver"}:
        shutil.rmtree(course / "submitted" / student)
    proc = parallel_autograde(course, LESSON, "--timeout", "3")
    assert proc.returncode == 1
    assert "timed out after 3 s" in proc.stdout
    assert "timed out after 3 s, stopped" in (course / LOGS / LESSON / "solver.log").read_text()
    assert not (course / "autograded" / "solver").exists()
    # Its kernel (which ran in the worker's scratch folder, autograde-*/.../autograded/solver/LESSON) was stopped with it.
    assert not [cwd for cwd in working_directories() if "autograde-" in cwd and f"solver/{LESSON}" in cwd]


def working_directories():
    """The working directory of every process on this machine that we may read."""
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            yield os.readlink(proc / "cwd")
