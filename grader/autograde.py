"""Autograde a lesson's submissions in parallel, leaving the gradebook serial autograde would.

    python -m grader.autograde LESSON [--workers N] [--force] [--timeout SECONDS]

Run it where ``nbgrader autograde LESSON`` runs: in the course directory (where
nbgrader_config.py is), after ``generate_assignment`` and ``collect``. nbgrader grades one
submission after another; here each student is graded by nbgrader's own ``nbgrader
autograde LESSON --student=S``, in a process of its own, with the course's config (its
time-outs and integrity preprocessors), but into a scratch gradebook (a copy of the
course's) and a scratch autograded/ folder, so no two processes ever write one SQLite
file. This process alone then copies each student's results into the course's gradebook
with nbgrader's API (:func:`merge`) and puts autograded/<student>/LESSON/ in place.

Workers (:func:`worker_count`): one per CPU core; a lesson whose notebooks start ranks
(they call ``launch(``) takes 2 cores per notebook, so half as many, and only one on a
machine with two GPUs or more (its ranks use every GPU). More oversubscribes the machine
and fails the challenges graded on a measured speedup.

Each student's nbgrader output goes to autograde_logs/LESSON/<student>.log; a table at the
end gives each student's score, seconds and status. A student who could not be graded (a
corrupt notebook, a worker that failed or timed out) is reported there while the rest of
the class is graded, and the exit status is then 1.
"""

import argparse
import glob
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
import warnings
from multiprocessing import connection
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps import NbGrader, NbGraderApp
from sqlalchemy.exc import SAWarning
from tqdm import tqdm

from grader import hardware
from grader.launch import _descendants, _signal

LOGS = "autograde_logs"
# Workers are forked from this process, which has imported nbgrader already: a fresh
# `nbgrader` command spends about 4 s on its imports, half as long as grading a light notebook.
FORK = multiprocessing.get_context("fork")


def course_directory():
    """nbgrader's view of the course in the current directory (config files loaded as nbgrader loads them).

    >>> course_directory().autograded_directory
    'autograded'
    """
    app = NbGrader()
    app.initialize([])
    return app.coursedir


def submitted_students(coursedir, lesson):
    """The students with a submitted/<student>/<lesson>/ folder, sorted: those serial autograde grades.

    For example ``submitted_students(course_directory(), "01_data_parallel")`` gives ``['alice', 'bob']``
    when only alice and bob submitted.
    """
    found = glob.glob(coursedir.format_path(coursedir.submitted_directory, "*", lesson))
    return sorted(Path(path).parent.name for path in found if os.path.isdir(path))


def starts_ranks(coursedir, lesson):
    """Whether the lesson's notebooks start ranks (call ``launch(``), read from its source/ folder.

    For example ``starts_ranks(course_directory(), "02_ddp")`` is True, and False for
    ``"01_data_parallel"``.
    """
    source = Path(coursedir.format_path(coursedir.source_directory, ".", lesson))
    return any("launch(" in notebook.read_text() for notebook in source.glob("*.ipynb"))


def worker_count(ranks, cores=None, gpus=None):
    """How many students to grade at once: one per core, or per 2 cores where notebooks start ``ranks``.

    A lesson that starts ranks on a machine with 2 GPUs or more gets one worker: its ranks use
    every GPU. ``cores`` and ``gpus`` default to this machine's.

    >>> worker_count(ranks=False, cores=8, gpus=0), worker_count(ranks=True, cores=8, gpus=0)
    (8, 4)
    >>> worker_count(ranks=True, cores=1, gpus=0), worker_count(ranks=True, cores=64, gpus=4)
    (1, 1)
    """
    cores = hardware.cpu_cores() if cores is None else cores
    gpus = hardware.gpu_count() if gpus is None else gpus
    if not ranks:
        return cores
    return 1 if gpus >= 2 else max(1, cores // 2)


def core_sets(workers, cores=None):
    """``workers`` disjoint, equal sets of the cores this process may use: one per worker.

    Only as many cores as :func:`grader.hardware.cpu_cores` counts (a container's quota
    included) are shared out. ``cores`` defaults to this process's affinity.

    >>> core_sets(2, cores=[0, 1, 2, 3, 4])
    [[0, 1], [2, 3]]
    """
    if cores is None:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
        cores = cores[:hardware.cpu_cores()]
    each = max(1, len(cores) // workers)
    return [list(cores[i * each:(i + 1) * each]) or list(cores) for i in range(workers)]


def pin(cores):
    """Keep this process, and every process it starts (its kernel, the kernel's ranks), on ``cores``.

    The kernel's :func:`grader.hardware.cpu_cores` then counts these cores only, so a lesson
    sizes its threads and rank sweeps to its share of the machine, and torch gets one thread
    per core (unless OMP_NUM_THREADS says otherwise). No-op where the OS has no affinity API.
    """
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    os.environ.setdefault("OMP_NUM_THREADS", str(len(cores)))


def _nbgrader(course, args, log, cores):
    """In a worker: ``nbgrader ARGS`` in the directory ``course``, as an activated environment runs it,
    output to ``log``, on ``cores`` only (:func:`pin`), so kernels graded side by side never
    oversubscribe the machine.
    """
    os.chdir(course)
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    pin(cores)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    os.dup2(out, 1)
    os.dup2(out, 2)
    NbGraderApp.launch_instance(args)


def start(coursedir, lesson, student, gradebook, scratch, log, cores, force=False):
    """Start autograding one student: ``nbgrader autograde LESSON --student=S`` in a worker process; the process.

    The worker reads the course's config and submissions but writes only under ``scratch``:
    a copy of ``gradebook`` (the course's, copied before any merge) and scratch/autograded/,
    which starts with the student's autograded folder if there is one, so nbgrader skips or
    regrades it as it would in the course. Its output goes to ``log``; it and its kernel run
    on ``cores`` only. For example ``start(course_directory(), "01_data_parallel",
    "alice", "/tmp/gradebook.db", Path("/tmp/alice"), "alice.log", cores=[0]).join()``.
    """
    scratch.mkdir(parents=True)
    shutil.copy(gradebook, scratch / "gradebook.db")
    graded = Path(coursedir.format_path(coursedir.autograded_directory, student, lesson))
    if graded.is_dir():
        shutil.copytree(graded, scratch / "autograded" / student / lesson)
    args = ["autograde", lesson, f"--student={student}", f"--CourseDirectory.db_url=sqlite:///{scratch / 'gradebook.db'}",
            f"--CourseDirectory.autograded_directory={scratch / 'autograded'}", *(["--force"] if force else [])]
    worker = FORK.Process(target=_nbgrader, args=(coursedir.root, args, log, cores))
    worker.start()
    return worker


def stop(worker):
    """Stop a worker, the kernel it started and that kernel's ranks (each in a session of its own).

    For example ``stop(start(...))``.
    """
    for pid in [worker.pid, *_descendants(worker.pid)]:
        _signal(pid, signal.SIGKILL)
    worker.join()


def _copy_columns(source, target):
    """Every column of a gradebook row but its keys (ids, links to other rows)."""
    for column in source.__table__.columns:
        if not column.primary_key and not column.foreign_keys:
            setattr(target, column.key, getattr(source, column.key))


def merge(scratch_db, course_db, course_id, lesson, student):
    """Copy what a worker's gradebook holds on ``student``'s ``lesson`` (if anything) into the course's.

    That is everything autograde writes: the student, the submission (timestamp, extension),
    each notebook (late penalty, flag), each cell's grade (auto and manual score, extra
    credit, needs_manual_grade) and comment. Both are database URLs. For example
    ``merge("sqlite:////tmp/alice/gradebook.db", "sqlite:///gradebook.db", "multi-gpu-training", "01_data_parallel", "alice")``.
    """
    with Gradebook(scratch_db, course_id) as source, Gradebook(course_db, course_id) as target, \
            warnings.catch_warnings():
        # nbgrader's add_submission warns under SQLAlchemy 2 (serial autograde prints the same); harmless.
        warnings.simplefilter("ignore", SAWarning)
        try:
            submission = source.find_submission(lesson, student)
        except MissingEntry:
            return
        _copy_columns(submission.student, target.update_or_create_student(student))
        _copy_columns(submission, target.update_or_create_submission(lesson, student))
        for notebook in submission.notebooks:
            _copy_columns(notebook, target.find_submission_notebook(notebook.name, lesson, student))
            for grade in notebook.grades:
                _copy_columns(grade, target.find_grade(grade.name, notebook.name, lesson, student))
            for comment in notebook.comments:
                _copy_columns(comment, target.find_comment(comment.name, notebook.name, lesson, student))
        target.db.commit()


def collect(coursedir, lesson, student, scratch, graded):
    """Merge a worker's gradebook into the course's, and put its autograded folder in place if it ``graded``.

    Otherwise the student's autograded folder is removed, as nbgrader removes a failed
    student's. For example ``collect(course_directory(), "01_data_parallel", "alice", Path("/tmp/alice"), True)``.
    """
    merge(f"sqlite:///{scratch / 'gradebook.db'}", coursedir.db_url, coursedir.course_id, lesson, student)
    folder = Path(coursedir.format_path(coursedir.autograded_directory, student, lesson))
    shutil.rmtree(folder, ignore_errors=True)
    if graded and (scratch / "autograded" / student / lesson).is_dir():
        shutil.copytree(scratch / "autograded" / student / lesson, folder)


def autograde(lesson, workers=None, force=False, timeout=1800):
    """Autograde every submission of ``lesson`` in the current course, ``workers`` at a time.

    Returns one row per student: (student, score, max score, seconds, status), the scores
    None where the gradebook has no submission. For example ``autograde("01_data_parallel")``
    grades submitted/*/01_data_parallel/ into gradebook.db and autograded/.
    """
    coursedir = course_directory()
    students = submitted_students(coursedir, lesson)
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            gb.find_assignment(lesson)
        except MissingEntry:
            sys.exit(f"No assignment {lesson} in the gradebook: run `nbgrader generate_assignment {lesson}` first")
    if workers is None:
        workers = worker_count(starts_ranks(coursedir, lesson))
    workers = max(1, min(workers, len(students)))
    logs = Path(coursedir.root, LOGS, lesson)
    logs.mkdir(parents=True, exist_ok=True)
    print(f"Autograding {len(students)} submissions of {lesson}, {workers} at a time, on {hardware.describe()}; "
          f"logs in {logs}")
    free = core_sets(workers)  # each running worker holds one set
    tqdm.monitor_interval = 0  # no monitor thread: a process with threads is not to be forked
    waiting, running, rows = list(students), {}, []
    with tempfile.TemporaryDirectory(prefix="autograde-") as tmp, tqdm(total=len(students), unit="student", desc=lesson) as bar:
        gradebook = Path(tmp, "gradebook.db")  # the course's, as it was before any student was merged
        shutil.copy(coursedir.db_url.removeprefix("sqlite:///"), gradebook)
        while waiting or running:
            while waiting and len(running) < workers:
                student = waiting.pop(0)
                cores = free.pop()
                worker = start(coursedir, lesson, student, gradebook, Path(tmp, student), logs / f"{student}.log",
                               cores, force)
                running[student] = worker, time.perf_counter(), cores
            connection.wait([worker.sentinel for worker, _, _ in running.values()], timeout=1)
            for student, (worker, started, cores) in list(running.items()):
                seconds = time.perf_counter() - started
                if worker.is_alive() and seconds < timeout:
                    continue
                del running[student]
                free.append(cores)
                log = logs / f"{student}.log"
                if worker.is_alive():
                    stop(worker)
                    status = f"timed out after {timeout:g} s"
                    with open(log, "a") as out:
                        out.write(f"\ngrader.autograde: {status}, stopped\n")
                elif worker.exitcode:
                    status = f"failed (exit {worker.exitcode})"
                else:
                    status = "skipped (graded before)" if "Skipping existing" in log.read_text() else "graded"
                collect(coursedir, lesson, student, Path(tmp, student), graded=worker.exitcode == 0)
                rows.append((student, seconds, status))
                bar.update()
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        scores = {s.student.id: (s.score, s.max_score) for s in gb.assignment_submissions(lesson)}
    return [(student, *scores.get(student, (None, None)), seconds, status) for student, seconds, status in sorted(rows)]


def summary(rows):
    """The table of :func:`autograde`'s rows, a line per student.

    >>> print(summary([("alice", 20.0, 20.0, 14.2, "graded"), ("bob", None, None, 1.5, "failed (exit 1)")]))
    student  score / max  seconds  status
    alice    20 / 20         14.2  graded
    bob      -                1.5  failed (exit 1)
    """
    scored = [(s, "-" if score is None else f"{score:g} / {top:g}", f"{t:.1f}", status)
              for s, score, top, t, status in rows]
    lines = [("student", "score / max", "seconds", "status"), *scored]
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}  {d}".rstrip() for a, b, c, d in lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lesson")
    parser.add_argument("--workers", type=int, help="students graded at once (default: sized to this machine)")
    parser.add_argument("--force", action="store_true", help="regrade students graded before, as nbgrader's --force")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one student may take (default 1800)")
    args = parser.parse_args()
    rows = autograde(args.lesson, args.workers, args.force, args.timeout)
    print(summary(rows))
    failed = [row[0] for row in rows if not row[4].startswith(("graded", "skipped"))]
    if failed:
        print(f"Not graded: {', '.join(failed)}; see their logs in {LOGS}/{args.lesson}/")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
