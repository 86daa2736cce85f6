"""Autograde a lesson's submissions in parallel, leaving the gradebook serial autograde would.

    python -m grader.grading.autograde LESSON [--workers N] [--force] [--timeout SECONDS]
    python -m grader.grading.autograde LESSON --shard I/N [--out DIR] [--workers N] ...
    python -m grader.grading.autograde merge LESSON SHARD_DIR...

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
and fails the challenges graded on a measured speedup. Each worker and its kernel keep to
their share of the cores (:func:`core_sets`, :func:`pin`: cores of their own where the
affinity is this process's own, a count of cores under a pod's CPU quota) and get a fresh
HOME and IPython directory (:func:`isolate`).

Each student's nbgrader output goes to autograde_logs/LESSON/<student>.log; a table at the
end gives each student's score, seconds and status. A student who could not be graded (a
corrupt notebook, a worker that failed or timed out) is reported there while the rest of
the class is graded, and the exit status is then 1.

Past one machine, ``--shard I/N`` grades the I-th of N parts of the class (:func:`shard_students`)
the same way, into a gradebook and autograded/ of the shard's own under
DIR/I-of-N/ (DIR defaults to autograde_shards/LESSON), with a record (shard.json) of the
lesson's version (:func:`lesson_version`), the class it saw and each student's status;
``merge`` checks that the shards given make the whole class, once, from the course's version
of the lesson, and merges them into the course's gradebook and autograded/ as the workers
are merged; otherwise it merges nothing, says why, and exits with 2.
"""

import argparse
import contextlib
import glob
import hashlib
import json
import math
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from multiprocessing import connection
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps import NbGrader, NbGraderApp
from sqlalchemy.exc import SAWarning
from tqdm import tqdm

from grader import hardware
from grader.grading import zygote
from grader.launch.processes import descendants, send

LOGS = "autograde_logs"
SHARDS = "autograde_shards"  # --shard's folders, under LESSON/, unless --out says where
RECORD = "shard.json"  # a shard's record, in its folder
# Workers are forked from this process, which has imported nbgrader already: a fresh
# `nbgrader` command spends about 2 s on its imports (4 s with jsonschema 4.25's IRI checker).
FORK = multiprocessing.get_context("fork")
# jupyter_client picks a kernel's ports before the kernel binds them, so a kernel (or a rank) starting
# beside it can take one first; the kernel then dies at its start with this in the log.
PORT_TAKEN = "Address already in use"


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


def shard_students(students, index, count):
    """The students shard ``index`` of ``count`` grades: every ``count``-th of the sorted class, from the ``index``-th.

    The shards are disjoint, together the whole class, at most ceil(S/N) students each, and
    every run over the same class deals the same students to the same shard.

    >>> [shard_students(["dan", "ann", "cy", "bo", "eve"], i, 2) for i in (0, 1)]
    [['ann', 'cy', 'eve'], ['bo', 'dan']]
    """
    return sorted(students)[index::count]


def lesson_version(db_url, course_id, lesson):
    """A hash of ``lesson`` as a gradebook holds it: its notebooks' cells (name, type, locked, source,
    checksum) and each graded cell's points, all that ``generate_assignment`` records and autograde
    grades against. Shards graded from one version ran the same tests.

    For example ``lesson_version("sqlite:///gradebook.db", "multi-gpu-training", "00_foundations")``
    gives 16 hex digits, such as ``'5d41402abc4b2a76'``, and another after the lesson's source
    changed and ``nbgrader generate_assignment --force`` ran.
    """
    with Gradebook(db_url, course_id) as gb:
        notebooks = gb.find_assignment(lesson).notebooks
        cells = sorted([nb.name, c.name, c.cell_type, c.locked, c.source, c.checksum or ""]
                       for nb in notebooks for c in nb.source_cells)
        points = sorted([nb.name, c.name, c.max_score] for nb in notebooks for c in nb.grade_cells)
    return hashlib.sha256(json.dumps([cells, points]).encode()).hexdigest()[:16]


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


@dataclass(frozen=True)
class Share:
    """One worker's part of this machine's CPUs: the cores it is pinned to (None: where it runs is
    left to the OS scheduler) and how many cores' worth it uses (its threads, its rank sweeps)."""

    cores: tuple | None
    count: int


def core_sets(workers, affinity=None, quota=None):
    """``workers`` equal :class:`Share` s of the CPUs this process may use: one per worker.

    Where the affinity is this process's own (a cpuset no wider than the CPU quota, or no
    quota), each worker is pinned to disjoint cores of it. Under a quota alone (a Kubernetes
    pod with the default CPU manager: every core of the node in the affinity, a CFS quota as
    the limit) pinning would put every pod of a node on the same first cores, so no worker
    is pinned: each gets the quota's cores divided among the workers as a count, and the
    scheduler places them. ``affinity`` and ``quota`` default to this process's
    (:func:`grader.hardware.cpu_quota`).

    >>> core_sets(2, affinity=[0, 1, 2, 3, 4])
    [Share(cores=(0, 1), count=2), Share(cores=(2, 3), count=2)]
    >>> core_sets(2, affinity=range(64), quota=8.0)   # a pod of 8 CPUs on a 64-core node
    [Share(cores=None, count=4), Share(cores=None, count=4)]
    """
    if affinity is None:
        affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        quota = hardware.cpu_quota()
    affinity = sorted(affinity)
    if quota is not None and len(affinity) > math.ceil(quota):
        return [Share(None, max(1, int(quota) // workers))] * workers
    cores = affinity[:max(1, int(quota))] if quota is not None else affinity
    each = max(1, len(cores) // workers)
    sets = [tuple(cores[i * each:(i + 1) * each]) or tuple(cores) for i in range(workers)]
    return [Share(s, len(s)) for s in sets]


def pin(share):
    """Keep this process, and every process it starts (its kernel, the kernel's ranks), to ``share``.

    Pinned to ``share.cores`` where it has them; in any case the kernel's
    :func:`grader.hardware.cpu_cores` counts ``share.count`` cores at most, so a lesson sizes
    its threads and rank sweeps to its share of the machine, and torch gets one thread per
    core (unless OMP_NUM_THREADS says otherwise). For example ``pin(core_sets(4)[0])``.
    """
    if share.cores is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, share.cores)
    os.environ[hardware.CPU_SHARE] = str(share.count)
    os.environ.setdefault("OMP_NUM_THREADS", str(share.count))


def isolate(home):
    """Give this process, and every kernel it starts, a fresh home: HOME, IPYTHONDIR, the kernel's runtime folder.

    Call it in a worker before nbgrader starts: jupyter_client starts the kernel with the
    worker's environment. Whatever one student's code leaves in a home (IPython startup files
    and profile config, a user site-packages folder and its .pth files, dotfiles, caches,
    kernel connection files) then never reaches another student's kernel. nbgrader itself
    still reads the Jupyter config and kernel specs serial autograde reads: JUPYTER_CONFIG_DIR
    and JUPYTER_DATA_DIR are set to this process's before HOME moves. For example, in a worker,
    ``isolate(Path("/tmp/autograde-x/alice/home"))``.
    """
    from jupyter_core.paths import jupyter_config_dir, jupyter_data_dir

    os.environ.update(JUPYTER_CONFIG_DIR=jupyter_config_dir(), JUPYTER_DATA_DIR=jupyter_data_dir())
    for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "PYTHONUSERBASE", "MPLCONFIGDIR"):
        os.environ.pop(name, None)  # so that these, too, are under the fresh HOME
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(HOME=str(home), IPYTHONDIR=str(home / ".ipython"), JUPYTER_RUNTIME_DIR=str(home / ".runtime"))


def _nbgrader(course, args, log, share, home):
    """In a worker: ``nbgrader ARGS`` in the directory ``course``, as an activated environment runs it,
    output to ``log``, kept to ``share`` (:func:`pin`), so kernels graded side by side never
    oversubscribe the machine, with a fresh ``home`` (:func:`isolate`).
    """
    os.chdir(course)
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    pin(share)
    isolate(home)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    os.dup2(out, 1)
    os.dup2(out, 2)
    NbGraderApp.launch_instance(args)


def start(coursedir, lesson, student, gradebook, scratch, log, share, force=False):
    """Start autograding one student: ``nbgrader autograde LESSON --student=S`` in a worker process; the process.

    The worker reads the course's config and submissions but writes only under ``scratch``:
    a copy of ``gradebook`` (the course's, copied before any merge), scratch/autograded/,
    which starts with the student's autograded folder if there is one, so nbgrader skips or
    regrades it as it would in the course, and scratch/home, the home of the worker and its
    kernel (:func:`isolate`). Its output goes to ``log``; it and its kernel keep to ``share``
    (:func:`pin`). For example ``start(course_directory(), "01_data_parallel", "alice",
    "/tmp/gradebook.db", Path("/tmp/alice"), "alice.log", Share((0,), 1)).join()``.
    """
    scratch.mkdir(parents=True)
    shutil.copy(gradebook, scratch / "gradebook.db")
    graded = Path(coursedir.format_path(coursedir.autograded_directory, student, lesson))
    if graded.is_dir():
        shutil.copytree(graded, scratch / "autograded" / student / lesson)
    args = ["autograde", lesson, f"--student={student}", f"--CourseDirectory.db_url=sqlite:///{scratch / 'gradebook.db'}",
            f"--CourseDirectory.autograded_directory={scratch / 'autograded'}", *(["--force"] if force else [])]
    worker = FORK.Process(target=_nbgrader, args=(coursedir.root, args, log, share, scratch / "home"))
    worker.start()
    return worker


def stop(worker):
    """Stop a worker, the kernel it started and that kernel's ranks (each in a session of its own).

    For example ``stop(start(...))``.
    """
    for pid in [worker.pid, *descendants(worker.pid)]:
        send(pid, signal.SIGKILL)
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


def collect(coursedir, lesson, student, scratch, graded, into=None):
    """Merge a worker's gradebook into the course's, and put its autograded folder in place if it ``graded``.

    Otherwise the student's autograded folder is removed, as nbgrader removes a failed
    student's. ``into``, a folder holding a gradebook.db and an autograded/ (a shard's), takes
    the course's place. ``scratch`` holds the gradebook.db and autograded/ merged: a worker's,
    or a shard's. For example ``collect(course_directory(), "01_data_parallel", "alice", Path("/tmp/alice"), True)``.
    """
    if into is None:
        db_url = coursedir.db_url
        folder = Path(coursedir.format_path(coursedir.autograded_directory, student, lesson))
    else:
        db_url, folder = f"sqlite:///{into / 'gradebook.db'}", into / "autograded" / student / lesson
    merge(f"sqlite:///{scratch / 'gradebook.db'}", db_url, coursedir.course_id, lesson, student)
    shutil.rmtree(folder, ignore_errors=True)
    if graded and (scratch / "autograded" / student / lesson).is_dir():
        shutil.copytree(scratch / "autograded" / student / lesson, folder)


def _course_db(coursedir):
    """The path of the course's gradebook (an SQLite file, as nbgrader's default db_url names it)."""
    return Path(coursedir.db_url.removeprefix("sqlite:///"))


def _check_assignment(db_url, course_id, lesson):
    with Gradebook(db_url, course_id) as gb:
        try:
            gb.find_assignment(lesson)
        except MissingEntry:
            sys.exit(f"No assignment {lesson} in the gradebook: run `nbgrader generate_assignment {lesson}` first")


def _scores(db_url, course_id, lesson, rows):
    """Rows (student, seconds, status) as (student, score, max score, seconds, status), scores from the gradebook."""
    with Gradebook(db_url, course_id) as gb:
        scores = {s.student.id: (s.score, s.max_score) for s in gb.assignment_submissions(lesson)}
    return [(student, *scores.get(student, (None, None)), seconds, status) for student, seconds, status in sorted(rows)]


def grade(coursedir, lesson, students, workers, force, timeout, logs, into=None):
    """Autograde ``students`` of ``lesson``, ``workers`` at a time, each merged as it ends (:func:`collect`).

    Into the course, or into ``into`` (a shard's folder). Logs go to ``logs``/<student>.log.
    Returns one row per student: (student, seconds, status). For example
    ``grade(course_directory(), "00_foundations", ["alice"], 1, False, 1800, Path("logs"))``.
    """
    workers = max(1, min(workers, len(students)))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"Autograding {len(students)} submissions of {lesson}, {workers} at a time, on {hardware.describe()}; "
          f"logs in {logs}", flush=True)
    free = core_sets(workers)  # each running worker holds one set
    # The scan of answer cells imports torch in every worker (2 s a student): imported once here, the workers
    # fork with it. Its import leaves one thread, waiting idle, as a DataLoader's forked workers have it too.
    import torch  # noqa: F401
    tqdm.monitor_interval = 0  # no monitor thread, which could hold a lock at a fork
    zygote.start()  # the workers' kernels are forked from one process that has imported torch (4 s a kernel)
    try:
        return _grade(coursedir, lesson, students, workers, force, timeout, logs, into, free)
    finally:
        zygote.stop()


def _grade(coursedir, lesson, students, workers, force, timeout, logs, into, free):
    waiting, running, rows, retried = list(students), {}, [], set()
    with tempfile.TemporaryDirectory(prefix="autograde-") as tmp, tqdm(total=len(students), unit="student", desc=lesson) as bar:
        gradebook = Path(tmp, "gradebook.db")  # the course's, as it was before any student was merged
        shutil.copy(_course_db(coursedir), gradebook)
        while waiting or running:
            while waiting and len(running) < workers:
                student = waiting.pop(0)
                share = free.pop()
                worker = start(coursedir, lesson, student, gradebook, Path(tmp, student), logs / f"{student}.log",
                               share, force)
                running[student] = worker, time.perf_counter(), share
            connection.wait([worker.sentinel for worker, _, _ in running.values()], timeout=1)
            for student, (worker, started, share) in list(running.items()):
                seconds = time.perf_counter() - started
                if worker.is_alive() and seconds < timeout:
                    continue
                del running[student]
                free.append(share)
                log = logs / f"{student}.log"
                if worker.is_alive():
                    stop(worker)
                    status = f"timed out after {timeout:g} s"
                    with open(log, "a") as out:
                        out.write(f"\ngrader.grading.autograde: {status}, stopped\n")
                elif worker.exitcode:
                    if student not in retried and PORT_TAKEN in log.read_text(errors="replace"):
                        retried.add(student)  # graded again, once, from the start
                        shutil.rmtree(Path(tmp, student))
                        waiting.insert(0, student)
                        continue
                    status = f"failed (exit {worker.exitcode})"
                else:
                    status = "skipped (graded before)" if "Skipping existing" in log.read_text() else "graded"
                if student in retried:
                    status += ", at a second try (a kernel's port was taken at the first)"
                collect(coursedir, lesson, student, Path(tmp, student), graded=worker.exitcode == 0, into=into)
                rows.append((student, seconds, status))
                bar.update()
    return rows


def autograde(lesson, workers=None, force=False, timeout=1800):
    """Autograde every submission of ``lesson`` in the current course, ``workers`` at a time.

    Returns one row per student: (student, score, max score, seconds, status), the scores
    None where the gradebook has no submission. For example ``autograde("01_data_parallel")``
    grades submitted/*/01_data_parallel/ into gradebook.db and autograded/.
    """
    coursedir = course_directory()
    _check_assignment(coursedir.db_url, coursedir.course_id, lesson)
    if workers is None:
        workers = worker_count(starts_ranks(coursedir, lesson))
    rows = grade(coursedir, lesson, submitted_students(coursedir, lesson), workers, force, timeout,
                 Path(coursedir.root, LOGS, lesson))
    return _scores(coursedir.db_url, coursedir.course_id, lesson, rows)


def shard_folder(out, index, count):
    """Where shard ``index`` of ``count`` goes under ``out``.

    >>> shard_folder("autograde_shards/02_ddp", 3, 20)
    PosixPath('autograde_shards/02_ddp/3-of-20')
    """
    return Path(out, f"{index}-of-{count}")


def _write_record(folder, record):
    (folder / f"{RECORD}.new").write_text(json.dumps(record, indent=1) + "\n")
    os.replace(folder / f"{RECORD}.new", folder / RECORD)  # whole or not at all, even if the shard is killed


def shard(lesson, index, count, out=None, workers=None, force=False, timeout=1800):
    """Autograde shard ``index`` of ``count`` (:func:`shard_students`) into a folder of its own; rows as :func:`autograde`'s.

    The folder, ``out``/<index>-of-<count> (``out`` defaults to autograde_shards/LESSON in the
    course), made afresh, holds a copy of the course's gradebook with the shard's students
    graded into it, their autograded/<student>/LESSON/, logs/<student>.log and shard.json: the
    lesson, its version (:func:`lesson_version`), the shard, the class it was dealt from, its
    students and, once every one of them is done, ``"complete": true`` and each one's
    (seconds, status). For example ``shard("02_ddp", 3, 20)`` in the course directory.
    """
    coursedir = course_directory()
    folder = shard_folder(out or Path(coursedir.root, SHARDS, lesson), index, count)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(_course_db(coursedir), folder / "gradebook.db")
    db_url = f"sqlite:///{folder / 'gradebook.db'}"
    _check_assignment(db_url, coursedir.course_id, lesson)
    everyone = submitted_students(coursedir, lesson)
    students = shard_students(everyone, index, count)
    record = {"lesson": lesson, "version": lesson_version(db_url, coursedir.course_id, lesson), "shard": [index, count],
              "class": everyone, "students": students, "complete": False}
    _write_record(folder, record)
    if workers is None:
        workers = worker_count(starts_ranks(coursedir, lesson))
    print(f"Shard {index}/{count} of {lesson}: {len(students)} of {len(everyone)} students, into {folder}", flush=True)
    rows = grade(coursedir, lesson, students, workers, force, timeout, folder / "logs", into=folder)
    _write_record(folder, {**record, "complete": True, "rows": sorted(rows)})
    return _scores(db_url, coursedir.course_id, lesson, rows)


def _check_shards(coursedir, lesson, records):
    """What keeps ``records`` ({folder: shard.json}) from being the whole class once, from the course's
    version of ``lesson``: a list of sentences, empty when nothing does.
    """
    problems = []
    counts = sorted({record["shard"][1] for record in records.values()})
    if len(counts) > 1:
        return [f"the folders hold shards of {' and of '.join(map(str, counts))}: give one run's shards, all of them"]
    count = counts[0]
    by_index = {}
    for folder, record in records.items():
        by_index.setdefault(record["shard"][0], []).append(folder)
    dealt = next(iter(records.values()))["class"]
    for index in range(count):
        if index not in by_index:
            problems.append(f"shard {index}/{count} is missing (never graded, or its folder not given): "
                            f"not graded: {', '.join(shard_students(dealt, index, count)) or 'nobody'}")
    version = lesson_version(coursedir.db_url, coursedir.course_id, lesson)
    seen = {}
    for folder, record in records.items():
        index = record["shard"][0]
        name = f"shard {index}/{count} ({folder})"
        if not record["complete"]:
            problems.append(f"{name} did not finish (it failed, was stopped, or is still running): "
                            f"grade it again with --shard {index}/{count}; not graded: {', '.join(record['students'])}")
        if record["version"] != version:
            problems.append(f"{name} was graded from another version of {lesson} ({record['version']}; the course's "
                            f"gradebook holds {version}): grade it again")
        if record["class"] != dealt:
            problems.append(f"{name} was dealt from another class ({len(record['class'])} students, not "
                            f"{len(dealt)}): submitted/ changed between shards; grade them all again")
        for student in record["students"]:
            seen.setdefault(student, []).append(f"{index}/{count}")
    twice = {student: shards for student, shards in seen.items() if len(shards) > 1}
    if twice:
        problems.append("graded twice: " + ", ".join(f"{s} (shards {' and '.join(shards)})"
                                                     for s, shards in twice.items()))
    submitted = submitted_students(coursedir, lesson)
    unsharded = [s for s in submitted if s not in seen]
    if unsharded and all(index in by_index for index in range(count)):
        problems.append(f"submitted but in no shard (submitted/ changed since?): {', '.join(unsharded)}")
    gone = [s for s in seen if s not in submitted]
    if gone:
        problems.append(f"graded but no longer in submitted/: {', '.join(gone)}")
    return problems


def merge_shards(lesson, folders):
    """Merge the shards in ``folders`` into the course's gradebook and autograded/, if they are the whole class.

    That is: one run's shards, every one of them, each complete, graded from the version of
    ``lesson`` the course's gradebook holds, no student in two, and every submitted student in
    one. Returns (rows as :func:`autograde`'s, []) once merged, or (None, the problems) with
    nothing merged. Each student is merged as the workers' are (:func:`collect`), and their
    logs copied to autograde_logs/LESSON/. For example
    ``merge_shards("02_ddp", glob.glob("autograde_shards/02_ddp/*"))``.
    """
    coursedir = course_directory()
    _check_assignment(coursedir.db_url, coursedir.course_id, lesson)
    records, problems = {}, []
    for folder in map(Path, folders):
        try:
            record = json.loads((folder / RECORD).read_text())
        except (OSError, ValueError) as e:
            problems.append(f"{folder}: no shard record ({type(e).__name__}): not a shard's folder, "
                            "or its shard never started")
            continue
        if record["lesson"] != lesson:
            problems.append(f"{folder}: a shard of {record['lesson']}, not of {lesson}")
            continue
        records[folder] = record
    if not records:
        return None, problems or ["no shard folders given"]
    problems += _check_shards(coursedir, lesson, records)
    if problems:
        return None, problems
    logs = Path(coursedir.root, LOGS, lesson)
    logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for folder, record in records.items():
        for student, seconds, status in record["rows"]:
            collect(coursedir, lesson, student, folder, graded=status.startswith(("graded", "skipped")))
            with contextlib.suppress(FileNotFoundError):
                shutil.copy(folder / "logs" / f"{student}.log", logs / f"{student}.log")
            rows.append((student, seconds, status))
    return _scores(coursedir.db_url, coursedir.course_id, lesson, rows), []


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


def _shard_arg(text):
    """``I/N`` as (I, N), 0 <= I < N.

    >>> _shard_arg("3/20")
    (3, 20)
    """
    index, _, count = text.partition("/")
    try:
        index, count = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N") from None
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"{text!r}: I must be from 0 to N - 1")
    return index, count


def _not_graded(rows, logs):
    """Says who of ``rows`` could not be graded, and where their logs are; those students."""
    failed = [row[0] for row in rows if not row[4].startswith(("graded", "skipped"))]
    if failed:
        print(f"Not graded: {', '.join(failed)}; see their logs in {logs}/")
    return failed


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        parser = argparse.ArgumentParser(
            prog="python -m grader.grading.autograde merge",
            description="Merge shards (--shard I/N) into the course's gradebook and autograded/.")
        parser.add_argument("lesson")
        parser.add_argument("folders", nargs="+", metavar="SHARD_DIR",
                            help="the shards' folders, such as autograde_shards/LESSON/*")
        args = parser.parse_args(argv[1:])
        rows, problems = merge_shards(args.lesson, args.folders)
        if problems:
            print(f"Nothing merged: these shards are not the whole class of {args.lesson} once, as the course has it:",
                  *(f"  - {p}" for p in problems), sep="\n", file=sys.stderr)
            sys.exit(2)
        print(summary(rows))
        sys.exit(1 if _not_graded(rows, Path(LOGS, args.lesson)) else 0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lesson")
    parser.add_argument("--workers", type=int, help="students graded at once (default: sized to this machine)")
    parser.add_argument("--force", action="store_true", help="regrade students graded before, as nbgrader's --force")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one student may take (default 1800)")
    parser.add_argument("--shard", type=_shard_arg, metavar="I/N", help="grade the I-th of N parts of the class only "
                        "(0 <= I < N), into a folder of its own; then `merge`")
    parser.add_argument("--out", help=f"with --shard: where its folder I-of-N goes (default {SHARDS}/LESSON)")
    args = parser.parse_args(argv)
    if args.out and not args.shard:
        parser.error("--out goes with --shard")
    if args.shard:
        rows = shard(args.lesson, *args.shard, args.out, args.workers, args.force, args.timeout)
        print(summary(rows))
        _not_graded(rows, shard_folder(args.out or Path(SHARDS, args.lesson), *args.shard) / "logs")
        sys.exit(0)  # the shard is complete: its students' statuses are the merge's to judge
    rows = autograde(args.lesson, args.workers, args.force, args.timeout)
    print(summary(rows))
    sys.exit(1 if _not_graded(rows, Path(LOGS, args.lesson)) else 0)


if __name__ == "__main__":
    main()
