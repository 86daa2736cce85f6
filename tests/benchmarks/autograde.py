"""Serial `nbgrader autograde` against parallel autograde (grader.autograde), the same class, one run.

    python tests/benchmarks/autograde.py LESSON [--students 8] [--workers N]

A scratch course gets LESSON generated and a class of ``--students`` submissions (the
solution, the untouched release and a wrong answer to two challenges, in turn), and a copy
of it. One is graded by ``nbgrader autograde LESSON``, the other by ``python -m
grader.autograde LESSON``, each timed from the command to its exit; the two gradebooks must
agree (tests/test_autograde.py's comparison, timed cells' scores left out). Prints a table
of seconds and the ratio.
"""

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test helpers

from conftest import nbgrader  # noqa: E402
from grader import hardware  # noqa: E402
from test_autograde import course_with, gradebook, mixed_class, parallel_autograde  # noqa: E402



def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("lesson")
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--workers", type=int, help="passed on to grader.autograde (default: its own choice)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="autograde-benchmark-"))
    serial = course_with(root / "serial", args.lesson, mixed_class(args.lesson, args.students))
    parallel = shutil.copytree(serial, root / "parallel")
    start = time.perf_counter()
    nbgrader("autograde", args.lesson, cwd=serial)
    serial_seconds = time.perf_counter() - start
    start = time.perf_counter()
    proc = parallel_autograde(parallel, args.lesson, *(["--workers", str(args.workers)] if args.workers else []))
    parallel_seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert gradebook(serial, args.lesson) == gradebook(parallel, args.lesson), "the gradebooks differ"
    shutil.rmtree(root)

    workers = re.search(r"(\d+) at a time", proc.stdout).group(1)
    print(f"# {args.lesson}, {args.students} students, {workers} worker(s), on {hardware.describe()}\n")
    print("| command | seconds | × serial |")
    print("|---|---|---|")
    print(f"| nbgrader autograde (serial) | {serial_seconds:.1f} | 1.00 |")
    print(f"| python -m grader.autograde | {parallel_seconds:.1f} | {serial_seconds / parallel_seconds:.2f} |")


if __name__ == "__main__":
    main()
