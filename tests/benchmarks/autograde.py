"""Serial `nbgrader autograde` against parallel autograde (grader.grading.autograde), the same class, one run.

    python tests/benchmarks/autograde.py LESSON [--students 8] [--workers N] [--shards N] [--profile]

A scratch course gets LESSON generated and a class of ``--students`` submissions (the
solution, the untouched release and a wrong answer to two challenges, in turn), and a copy
of it for each command. One is graded by ``nbgrader autograde LESSON``, one by ``python -m
grader.grading.autograde LESSON``, and, with ``--shards N``, one by N processes ``python -m
grader.grading.autograde LESSON --shard I/N --workers 1`` side by side, then ``merge``; each timed
from the first command to the last one's exit. Every gradebook must agree with the serial one
(tests/grading/test_autograde.py's comparison, timed cells' scores left out). Prints a table of
seconds and the ratio.

``--profile`` grades the class again, serially and in parallel, in instrumented processes
(nbgrader's and grader.grading.autograde's own functions, wrapped to write timestamps): where each
command's seconds go, per student and in all (the command's imports, the nbgrader app's
start, the kernel's start, the notebook's first cell, which imports torch and the toolkit,
the rest of the cells, what nbgrader does after, the gradebook copies and merges), as tables.
"""

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START = time.time()  # before the imports: --instrumented measures them

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test helpers

EVENTS = os.environ.get("AUTOGRADE_PROFILE_EVENTS")  # --instrumented: where events are written
STUDENT = [None]  # the student this process is grading now (a worker's, or the serial command's current)


def mark(event):
    """Append (seconds since the epoch, pid, student, event) to the events file."""
    with open(EVENTS, "a") as out:
        out.write(json.dumps([time.time(), os.getpid(), STUDENT[0], event]) + "\n")


def timed(owner, name, before, after=None):
    """Wrap ``owner.name`` (a function or coroutine function) to mark ``before`` on entry and ``after`` on return."""
    import inspect

    original = getattr(owner, name)
    if inspect.iscoroutinefunction(original):
        async def wrapper(*args, **kwargs):
            mark(before)
            result = await original(*args, **kwargs)
            if after:
                mark(after)
            return result
    else:
        def wrapper(*args, **kwargs):
            mark(before)
            result = original(*args, **kwargs)
            if after:
                mark(after)
            return result
    setattr(owner, name, functools.wraps(original)(wrapper))


def instrumented(mode, lesson, workers):
    """In the course directory: grade ``lesson`` serially (nbgrader's autograde app, in this process) or in
    parallel (grader.grading.autograde.autograde) with nbgrader's and grader.grading.autograde's steps marked in EVENTS."""
    import nbclient.client
    from nbconvert.preprocessors import ExecutePreprocessor
    from nbgrader.apps import NbGraderApp
    from nbgrader.apps.autogradeapp import AutogradeApp
    from nbgrader.converters import Autograde
    from nbgrader.converters.base import BaseConverter

    import grader.grading.autograde as ag

    STUDENT[0] = None
    mark("imported")
    cells = {"n": 0}

    def init_assignment(original):
        def wrapper(self, assignment_id, student_id):
            STUDENT[0] = student_id
            cells["n"] = 0
            mark("assignment")
            return original(self, assignment_id, student_id)
        return wrapper
    Autograde.init_assignment = init_assignment(Autograde.init_assignment)
    timed(AutogradeApp, "start", "app started")
    # nbconvert's ExecutePreprocessor runs nbclient's synchronous wrappers: those are wrapped.
    client = nbclient.client.NotebookClient
    timed(client, "start_new_kernel", "kernel start", "kernel started")
    timed(client, "start_new_kernel_client", "client start", "kernel ready")
    original_cell = client.execute_cell

    def execute_cell(self, cell, *args, **kwargs):
        result = original_cell(self, cell, *args, **kwargs)
        if cell.cell_type == "code":
            cells["n"] += 1
            if cells["n"] == 1:
                mark("first cell run")
        return result
    client.execute_cell = execute_cell
    timed(ExecutePreprocessor, "preprocess", "execute", "executed")
    timed(BaseConverter, "write_single_notebook", "write", "written")
    if mode == "serial":
        NbGraderApp.launch_instance(["autograde", lesson])
        return
    original_worker, original_collect, original_start = ag._nbgrader, ag.collect, ag.start

    def worker(course, args, log, cores, home):
        STUDENT[0] = Path(log).stem
        mark("worker")
        return original_worker(course, args, log, cores, home)

    def around(original, before, after):  # a student's step of the command, marked at both ends
        def step(coursedir, lesson, student, *args, **kwargs):
            STUDENT[0] = student
            mark(before)
            result = original(coursedir, lesson, student, *args, **kwargs)
            mark(after)
            return result
        return step
    ag._nbgrader, ag.start, ag.collect = worker, around(original_start, "fork", "forked"), \
        around(original_collect, "collect", "collected")
    ag.autograde(lesson, workers)


# A student's phases: from one event of theirs to the next (the command's own, student None, first).
PHASES = [("command start: python, imports", "begin", "imported"),
          ("command: nbgrader app started", "imported", "app started"),
          ("fork: gradebook copied, worker forked", "fork", "forked"),
          ("worker: nbgrader app started", "worker", "app started"),
          ("app started to the student's assignment", "app started", "assignment"),
          ("submission recorded, files copied", "assignment", "kernel start"),
          ("kernel start: process, ipykernel", "kernel start", "kernel ready"),
          ("first cell: imports torch, grader", "kernel ready", "first cell run"),
          ("other cells", "first cell run", "executed"),
          ("after the run: checks, grades, notebook written", "executed", "written"),
          ("worker's exit, seen by the command", "written", "collect"),
          ("collect: merged into the course's gradebook", "collect", "collected")]


def profile_table(events, total, title):
    """Seconds per phase (:data:`PHASES`), summed over students and per student, from one command's ``events``."""
    by_student = {}
    for t, _, student, event in events:
        by_student.setdefault(student, {}).setdefault(event, []).append(t)
    lines = [f"{title}: {total:.1f} s wall", "", "| phase | seconds, all students | per student |", "|---|---|---|"]
    for name, first, last in PHASES:
        spans = []
        for marks in by_student.values():  # first's first time, last's first time after it, first's last before that
            if first in marks and last in marks and [t for t in marks[last] if t >= marks[first][0]]:
                end = min(t for t in marks[last] if t >= marks[first][0])
                spans.append(end - max(t for t in marks[first] if t <= end))
        if spans:
            lines.append(f"| {name} | {sum(spans):.1f} | {sum(spans) / len(spans):.2f} |")
    return "\n".join(lines)


def cpu_seconds():
    """(busy, idle) CPU seconds of the whole machine since boot, from /proc/stat (all cores added)."""
    fields = [int(x) / os.sysconf("SC_CLK_TCK") for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields[:8]) - idle, idle  # user nice system idle iowait irq softirq steal


def children_cpu_seconds():
    """CPU seconds of this process's children (and theirs) that have ended: the commands run, their kernels."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(function, *args, result=False, **kwargs):
    """Run ``function``; (wall seconds, CPU seconds of the processes it ran, of other processes, idle),
    after its result if ``result``."""
    started, machine, ours = time.perf_counter(), cpu_seconds(), children_cpu_seconds()
    value = function(*args, **kwargs)
    seconds = time.perf_counter() - started
    busy, idle = (b - a for a, b in zip(machine, cpu_seconds()))
    ours = children_cpu_seconds() - ours
    run = (seconds, ours, busy - ours, idle)
    return (value, run) if result else run


def profile(lesson, students, workers):
    """Grade the class serially and in parallel in instrumented processes; the two tables."""
    from conftest import activated, installed
    from test_autograde import course_with, mixed_class

    root = Path(tempfile.mkdtemp(prefix="autograde-profile-"))
    course = course_with(root / "serial", lesson, mixed_class(lesson, students))
    shutil.copytree(course, root / "parallel")
    tables = []
    for mode in ("serial", "parallel"):
        events = root / f"{mode}.jsonl"
        env = dict(activated(), AUTOGRADE_PROFILE_EVENTS=str(events))
        args = [installed()[0], __file__, "--instrumented", mode, lesson, *(["--workers", str(workers)] if workers else [])]
        started = time.time()
        proc, (total, ours, others, idle) = measured(subprocess.run, args, cwd=root / mode, env=env, capture_output=True,
                                                     text=True, timeout=1800, result=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        marks = [json.loads(line) for line in events.read_text().splitlines()]
        tables.append(profile_table([[started, None, None, "begin"], *marks], total, f"{mode}, {students} students")
                      + f"\n\nCPU seconds in those {total:.1f} s ({os.cpu_count()} cores: {os.cpu_count() * total:.1f}): "
                      f"this command {ours:.1f}, other processes {others:.1f}, idle {idle:.1f}")
    shutil.rmtree(root)
    return "\n\n".join(tables)


def shards_run(course, lesson, count):
    """``--shard I/N --workers 1`` for every I, side by side, each on cores of its own (as a pod has), then
    ``merge``; the merge's process and seconds."""
    from conftest import activated, installed

    from grader.grading.autograde import core_sets

    command = [installed()[0], "-m", "grader.grading.autograde", lesson]
    procs = [subprocess.Popen([*command, "--shard", f"{i}/{count}", "--workers", "1"], cwd=course, env=activated(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=functools.partial(os.sched_setaffinity, 0, share.cores or os.sched_getaffinity(0)))
             for i, share in enumerate(core_sets(count))]
    assert [proc.wait() for proc in procs] == [0] * count
    folders = sorted(str(p) for p in Path(course, "autograde_shards", lesson).iterdir())
    started = time.perf_counter()
    merged = subprocess.run([installed()[0], "-m", "grader.grading.autograde", "merge", lesson, *folders], cwd=course,
                            env=activated(), capture_output=True, text=True)
    return merged, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("lesson")
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--workers", type=int, help="passed on to grader.grading.autograde (default: its own choice)")
    parser.add_argument("--shards", type=int, help="also grade the class in this many shards, then merge")
    parser.add_argument("--profile", action="store_true", help="where the seconds go (see the docstring)")
    parser.add_argument("--instrumented", choices=["serial", "parallel"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.instrumented:
        with open(EVENTS, "a") as out:
            out.write(json.dumps([START, os.getpid(), None, "started"]) + "\n")
        return instrumented(args.instrumented, args.lesson, args.workers)

    from conftest import nbgrader
    from grader import hardware
    from test_autograde import course_with, gradebook, mixed_class, parallel_autograde

    if args.profile:
        print(f"# {args.lesson}, {args.students} students, on {hardware.describe()}, profiled\n")
        print(profile(args.lesson, args.students, args.workers))
        return
    root = Path(tempfile.mkdtemp(prefix="autograde-benchmark-"))
    serial = course_with(root / "serial", args.lesson, mixed_class(args.lesson, args.students))
    parallel = shutil.copytree(serial, root / "parallel")
    sharded = shutil.copytree(serial, root / "sharded") if args.shards else None
    serial_run = measured(nbgrader, "autograde", args.lesson, cwd=serial)
    proc, parallel_run = measured(parallel_autograde, parallel, args.lesson,
                                  *(["--workers", str(args.workers)] if args.workers else []), result=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = gradebook(serial, args.lesson)
    assert gradebook(parallel, args.lesson) == expected, "the gradebooks differ"
    rows = [("nbgrader autograde (serial)", serial_run), ("python -m grader.grading.autograde", parallel_run)]
    if args.shards:
        (merged, merge_seconds), sharded_run = measured(shards_run, sharded, args.lesson, args.shards, result=True)
        assert merged.returncode == 0, merged.stdout + merged.stderr
        assert gradebook(sharded, args.lesson) == expected, "the sharded gradebook differs"
        rows.append((f"{args.shards} × `--shard I/{args.shards} --workers 1`, then `merge`", sharded_run))
    shutil.rmtree(root)

    workers = re.search(r"(\d+) at a time", proc.stdout).group(1)
    print(f"# {args.lesson}, {args.students} students, {workers} worker(s), on {hardware.describe()}\n")
    print("| command | seconds | × serial | CPU s: the command's, other processes', idle |")
    print("|---|---|---|---|")
    for name, (seconds, ours, others, idle) in rows:
        print(f"| {name} | {seconds:.1f} | {serial_run[0] / seconds:.2f} | {ours:.0f}, {others:.0f}, {idle:.0f} |")
    if args.shards:
        print(f"\nThe merge (a command of its own: imports, checks, {args.students} students merged): {merge_seconds:.1f} s")

if __name__ == "__main__":
    main()
