"""Parallel autograde (grader.grading.autograde) leaves the gradebook serial `nbgrader autograde` leaves.

Real nbgrader, real gradebooks, real worker processes: one class, graded once each way (serially,
in parallel, in shards).
"""

import json
import os
import signal
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from conftest import (REPO, activated, copy_course, installed, mutant_students, nbgrader, parallel_autograde, points,
                      scores, submission, submit, working_directories)
from grader.grading.autograde import FORK, LOGS, PORT_TAKEN, Share, core_sets, course_directory, pin, starts_ranks
from mutants import MUTANTS

LESSON = "00_foundations"  # the lightest lesson
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


def _worker_starts_a_kernel(share, out):
    pin(share)
    with open(out, "w") as seen:  # what a kernel the worker starts counts, its torch threads, its affinity
        subprocess.run([sys.executable, "-c", "import os; from grader import hardware; "
                        "print(hardware.cpu_cores(), os.environ['OMP_NUM_THREADS'], len(os.sched_getaffinity(0)))"],
                       stdout=seen, check=True)


def test_each_worker_and_the_kernel_it_starts_keep_to_their_own_cores(tmp_path, monkeypatch):
    assert core_sets(2, affinity=[0, 1, 2, 3]) == [Share((0, 1), 2), Share((2, 3), 2)]
    assert core_sets(3, affinity=[5, 7]) == [Share((5,), 1), Share((7,), 1), Share((5, 7), 2)]  # they share
    assert core_sets(2, affinity=range(4, 8), quota=4.0) == [Share((4, 5), 2), Share((6, 7), 2)]  # a cpuset pod
    assert core_sets(2, affinity=range(3), quota=2.5) == [Share((0,), 1), Share((1,), 1)]  # 3 cores, 2.5 CPUs
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    shares = core_sets(2)  # this machine's
    assert all(not set(a.cores) & set(b.cores) for a, b in zip(shares, shares[1:])) or len(os.sched_getaffinity(0)) < 2
    for i, share in enumerate(shares):
        worker = FORK.Process(target=_worker_starts_a_kernel, args=(share, tmp_path / f"{i}.txt"))
        worker.start()
        worker.join(60)
        assert (tmp_path / f"{i}.txt").read_text().split() == [str(len(share.cores))] * 3


def test_pods_under_a_cpu_quota_are_not_all_pinned_to_the_first_cores(tmp_path, monkeypatch):
    # A pod of 8 CPUs on a 64-core node, with the default CPU manager: its affinity is the whole node,
    # its limit a CFS quota. Every such pod pinning its workers to cores 0-7 would crowd them there.
    assert core_sets(4, affinity=range(64), quota=8.0) == [Share(None, 2)] * 4
    assert core_sets(3, affinity=range(64), quota=2.5) == [Share(None, 1)] * 3
    # A worker kept to such a share stays where the scheduler puts it, and its kernel sizes itself to the share.
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    worker = FORK.Process(target=_worker_starts_a_kernel, args=(Share(None, 1), tmp_path / "seen.txt"))
    worker.start()
    worker.join(60)
    assert (tmp_path / "seen.txt").read_text().split() == ["1", "1", str(len(os.sched_getaffinity(0)))]


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """One class of LESSON graded by `nbgrader autograde`, and copies of the class made before grading,
    for the other ways to grade: (the serially graded course, {way: its ungraded copy})."""
    root = tmp_path_factory.mktemp("autograde")
    course = course_with(root / "serial", LESSON, {**mixed_class(LESSON), "corrupt": CORRUPT})
    (course / "submitted" / "solver" / LESSON / "timestamp.txt").write_text("2026-01-05 10:00:00.000000 UTC")
    copies = {way: shutil.copytree(course, root / way) for way in ("parallel", "sharded")}
    nbgrader("autograde", LESSON, cwd=course, check=False)
    return course, copies


@pytest.fixture(scope="module")
def graded(serial):
    """The class graded twice: by `nbgrader autograde` in one course, by grader.grading.autograde in a copy of it."""
    course, copies = serial
    return course, copies["parallel"], parallel_autograde(copies["parallel"], LESSON)


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


@pytest.mark.slow
def test_a_kernel_whose_port_is_taken_is_started_once_more_and_then_reported(graded, tmp_path):
    # jupyter_client picks a kernel's ports before the kernel binds them: a kernel starting beside it can take
    # one first. Here the port is taken for good (the course's config fixes the kernels' shell port, and this
    # test holds it), so the second try fails as the first did; each try is a real nbgrader run.
    course = shutil.copytree(graded[0], tmp_path / "course", ignore=shutil.ignore_patterns("autograded"))
    for student in {*mixed_class(LESSON), "corrupt"} - {"solver"}:
        shutil.rmtree(course / "submitted" / student)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with open(course / "nbgrader_config.py", "a") as config:
            config.write(f"\nc.KernelManager.cache_ports = False\nc.KernelManager.shell_port = {held.getsockname()[1]}\n")
        proc = parallel_autograde(course, LESSON, "--workers", "1")
    assert proc.returncode == 1
    log = (course / LOGS / LESSON / "solver.log").read_text()
    assert PORT_TAKEN in log and "failed (exit 1), at a second try" in proc.stdout, proc.stdout[-2000:]
    assert not (course / "autograded" / "solver").exists()


# ---- Isolation: a fresh home per student's kernel ----

PROBE = ("import json, os\n"
         "from pathlib import Path\n"
         "ip = get_ipython()\n"
         "print(json.dumps({'home': os.environ['HOME'], 'ipythondir': os.environ['IPYTHONDIR'],\n"
         "                  'profile': ip.profile_dir.location, 'startup_ran': 'STARTUP_RAN' in ip.user_ns}))\n"
         "startup = Path(ip.profile_dir.startup_dir, '00-planted.py')\n"
         "startup.parent.mkdir(parents=True, exist_ok=True)\n"
         "startup.write_text('STARTUP_RAN = True')  # what a submission could leave for the next kernel\n")


def _kernel_in_isolated_worker(home, out):
    """A worker's part: isolate(home), then run PROBE with nbgrader's own Execute preprocessor, as autograde does."""
    import nbformat
    from nbgrader.preprocessors import Execute

    from grader.grading.autograde import isolate

    isolate(home)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    Execute(timeout=120).preprocess(nb, {"metadata": {"path": str(home.parent)}})
    Path(out).write_text(nb.cells[0].outputs[0]["text"])


def test_each_students_kernel_gets_a_fresh_home_and_ipython_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "instructor"))
    seen = {}
    for student in ("alice", "bob"):  # one after the other, as one worker's cores grade them
        worker = FORK.Process(target=_kernel_in_isolated_worker,
                              args=(tmp_path / student / "home", tmp_path / f"{student}.json"))
        worker.start()
        worker.join(120)
        seen[student] = json.loads((tmp_path / f"{student}.json").read_text())
    for student, kernel in seen.items():
        home = str(tmp_path / student / "home")
        assert kernel["home"] == home and kernel["ipythondir"] == f"{home}/.ipython", kernel
        assert kernel["profile"].startswith(home), kernel
    # alice's kernel planted an IPython startup file in its profile; bob's kernel never ran it.
    assert (tmp_path / "alice" / "home" / ".ipython" / "profile_default" / "startup" / "00-planted.py").is_file()
    assert not seen["bob"]["startup_ran"]
    assert not (tmp_path / "instructor").exists()  # the worker's own home untouched


# ---- Shards: grader.grading.autograde --shard I/N in separate processes, then merge ----

def shard_process(course, lesson, index, count, *args):
    """``python -m grader.grading.autograde LESSON --shard I/N --workers 1 ARGS`` started in ``course`` as a pod runs it:
    a session of its own, on cores of its own (its share of this machine's)."""
    cores = core_sets(count)[index].cores or os.sched_getaffinity(0)
    return subprocess.Popen([installed()[0], "-m", "grader.grading.autograde", lesson, "--shard", f"{index}/{count}",
                             "--workers", "1", *args], cwd=course, env=activated(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: os.sched_setaffinity(0, cores))


def merge_shards(course, lesson, *folders):
    """``python -m grader.grading.autograde merge LESSON FOLDERS`` in ``course``."""
    return subprocess.run([installed()[0], "-m", "grader.grading.autograde", "merge", lesson, *map(str, folders)], cwd=course,
                          env=activated(), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def sharded(serial, tmp_path_factory):
    """The class graded by 2 shards, each a process with its own --out folder, side by side; then merged.

    Returns (serial course, sharded course, its copy before the merge, shard folders, shard outputs, merge).
    """
    root = tmp_path_factory.mktemp("sharded")
    course = serial[1]["sharded"]
    outs = [root / f"pod-{i}" for i in range(2)]  # each shard's own scratch tree, as each pod has
    procs = [shard_process(course, LESSON, i, 2, "--out", out) for i, out in enumerate(outs)]
    outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    unmerged = shutil.copytree(course, root / "unmerged")
    folders = [out / f"{i}-of-2" for i, out in enumerate(outs)]
    return serial[0], course, unmerged, folders, outputs, merge_shards(course, LESSON, *folders)


@pytest.mark.slow
def test_shards_graded_apart_and_merged_equal_serial_grading_cell_by_cell(sharded):
    serial, course, unmerged, folders, outputs, merged = sharded
    assert merged.returncode == 1, merged.stdout + merged.stderr  # the corrupt notebook, as in parallel autograde
    assert "Not graded: corrupt" in merged.stdout
    expected = gradebook(serial, LESSON)
    assert set(expected) == {*mixed_class(LESSON), "corrupt"}
    assert gradebook(course, LESSON) == expected
    for student in mixed_class(LESSON):
        assert (course / "autograded" / student / LESSON / f"{LESSON}.ipynb").is_file(), student
        assert (course / LOGS / LESSON / f"{student}.log").is_file(), student
    assert not (course / "autograded" / "corrupt").exists()
    assert gradebook(unmerged, LESSON) == {}  # the shards wrote nothing of the course's
    # Each shard graded its own students (dealt from the sorted class) into its own gradebook and tree.
    dealt = [["corrupt", "untouched"], ["solver", "wrong"]]
    for folder, students, output in zip(folders, dealt, outputs):
        record = json.loads((folder / "shard.json").read_text())
        assert record["complete"] and record["students"] == students, record
        assert sorted(p.name for p in (folder / "autograded").iterdir()) == [s for s in students if s != "corrupt"]
        with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", "multi-gpu-training") as gb:
            assert sorted(s.student.id for s in gb.assignment_submissions(LESSON)) == students
        assert f"{len(students)} of 4 students" in output
    # The shard's table reports the corrupt notebook; its exit status stays 0 (the merge judges the class).
    assert any(line.startswith("corrupt ") and "failed" in line for line in outputs[0].splitlines()), outputs[0]


def refused(proc, *phrases):
    """The merge exited 2 saying each of ``phrases``."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Nothing merged" in proc.stderr
    for phrase in phrases:
        assert phrase in proc.stderr, (phrase, proc.stderr)
    return True


@pytest.mark.slow
def test_a_missing_or_unfinished_shard_is_reported_and_nothing_merged(sharded, tmp_path):
    _, _, unmerged, folders, _, _ = sharded
    course = shutil.copytree(unmerged, tmp_path / "course")
    assert refused(merge_shards(course, LESSON, folders[0]),
                   "shard 1/2 is missing", "not graded: solver, wrong")
    # A shard stopped part-way (a pod evicted): its record says it did not finish.
    proc = shard_process(course, LESSON, 1, 2, "--out", tmp_path / "killed")
    record = tmp_path / "killed" / "1-of-2" / "shard.json"
    for _ in range(600):
        if record.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert refused(merge_shards(course, LESSON, folders[0], record.parent),
                   f"shard 1/2 ({record.parent}) did not finish", "--shard 1/2", "not graded: solver, wrong")
    assert gradebook(course, LESSON) == {} and not (course / "autograded").exists()


@pytest.mark.slow
def test_a_student_in_two_shards_is_refused(sharded, tmp_path):
    _, _, unmerged, folders, _, _ = sharded
    course = shutil.copytree(unmerged, tmp_path / "course")
    again = shutil.copytree(folders[0], tmp_path / "an-earlier-run" / folders[0].name)
    assert refused(merge_shards(course, LESSON, *folders, again),
                   "graded twice: corrupt (shards 0/2 and 0/2), untouched (shards 0/2 and 0/2)")
    assert gradebook(course, LESSON) == {}


@pytest.mark.slow
def test_shards_of_another_version_of_the_lesson_are_refused(sharded, tmp_path):
    _, _, unmerged, folders, _, _ = sharded
    course = shutil.copytree(unmerged, tmp_path / "course")
    source = course / "source" / LESSON / f"{LESSON}.ipynb"
    nb = json.loads(source.read_text())
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade"))
    cell["metadata"]["nbgrader"]["points"] += 1  # the lesson changed after the shards were graded
    source.write_text(json.dumps(nb))
    nbgrader("generate_assignment", LESSON, "--force", cwd=course)
    assert refused(merge_shards(course, LESSON, *folders),
                   "shard 0/2", "shard 1/2", f"graded from another version of {LESSON}")
    assert gradebook(course, LESSON) == {}
