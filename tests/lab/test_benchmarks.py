"""The benchmark scripts in tests/benchmarks run end to end (at small sizes) and print their tables."""

import subprocess
import sys

import pytest

from conftest import REPO
from grader.scaling import expected_ddp_speedup


def quick_run(name, *args):
    """What ``tests/benchmarks/<name>.py --quick`` printed; it must exit cleanly."""
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "benchmarks" / f"{name}.py"), "--quick", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_the_model_parallel_benchmark_prints_the_bubble_and_the_bytes_tables():
    out = quick_run("model_parallel", "--repeats", "1")
    assert "## Pipeline bubble" in out and "## Bytes per rank" in out
    assert sum(line.startswith(("| 1 |", "| 2 |", "| 4 |", "| 8 |")) for line in out.splitlines()) == 4
    for method in ("DDP", "ZeRO-1", "FSDP2"):
        assert sum(line.startswith(f"| {method} |") for line in out.splitlines()) == 3  # two ranks, the prediction


@pytest.mark.slow
def test_the_batch_scaling_benchmark_prints_throughput_scaling_and_the_serial_fraction():
    lines = quick_run("batch_scaling").splitlines()
    assert [line for line in lines if line.startswith("## ")] == [
        "## Throughput against the per-rank batch", "## Strong and weak scaling on 1 and 2 ranks",
        "## Serial fraction fitted to strong scaling, global batch 128",
        f"## Lesson 04's challenge 5, graded as autograde grades its solution (target {expected_ddp_speedup(2) / 2:.0%})"]
    assert sum(line.startswith(("| 16 |", "| 64 |")) for line in lines) == 2
    assert sum(line.startswith(("| strong", "| weak")) for line in lines) == 2
    assert any(line.startswith("serial fraction ") for line in lines)
    assert any(line.endswith(("| passes |", "| fails |", "| manual grading |")) for line in lines)


@pytest.mark.slow
def test_the_measured_grades_benchmark_counts_each_challenges_outcomes():
    rows = [line.split(" | ") for line in quick_run("measured_grades").splitlines() if line.startswith("| 0")]
    assert [row[0] for row in rows] == ["| 02 c5 DDP speedup", "| 04 c4 serial fraction", "| 04 c5 efficiency",
                                        "| 05 c5 bucket speedup"]
    assert all(sorted(row[1:4]) == ["0", "0", "1"] for row in rows), rows  # one repeat, one outcome each
