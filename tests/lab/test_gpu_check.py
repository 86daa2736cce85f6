"""`make gpu-check` in its CPU form, so that it cannot rot: the quick run end to end, and its report."""

import ast
import re
import signal
import subprocess
import sys
import time

import pytest

import gpu_check
from grader import hardware
from gpu_check import Check, GpuTest, Lesson

from conftest import REPO, activated, points, working_directories


def gpu_test_names():
    """The tests of tests/lab/test_gpu.py, by name."""
    tree = ast.parse((REPO / "tests" / "lab" / "test_gpu.py").read_text())
    return [f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]


@pytest.mark.slow
def test_the_quick_check_grades_lesson_00_measures_and_lists_the_gpu_tests(tmp_path):
    proc = subprocess.run([sys.executable, "tests/gpu_check.py", "--quick", "--out", str(tmp_path)], cwd=REPO,
                          env=activated(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (report,) = tmp_path.iterdir()
    assert report.name.endswith("-cpu-quick.md" if not hardware.gpu_count() else "-quick.md")
    text = report.read_text()
    assert f"| hardware | {hardware.describe()} |" in text
    assert "| torch floor | 2.8 (the oldest torch the lessons are true on) |" in text
    full = sum(points("00_foundations").values())
    (row,) = [line for line in text.splitlines() if line.startswith("| 00_foundations |")]
    assert f"| {full:g} / {full:g} | none | " in row, row
    assert re.search(r"\| [\w ]+ \d+(\.\d)? s(, [\w ]+ \d+(\.\d)? s){2} \|$", row), row  # its 3 slowest cells, timed
    assert "| 64 | 128 | " in text  # the DDP speedup of the quick form, on 2 ranks
    assert "| 2 | 33% | " in text and "| 4 | 20% | " in text  # the bubble, against the formula
    assert "| batch 4, 2 layers | 4.24 MB | 4.24 MB | 100% | " in text  # the calculator is exact in fp32
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| test_")}
    assert {name.split("[")[0] for name in rows} == set(gpu_test_names())
    assert "test_a_pipeline_timeline_on_two_gpus_is_synchronised_and_its_bubble_follows_the_formula[1f1b]" in rows
    # Every one ran: on a CPU machine in its CPU form, so its scaffolding (launches, subprocesses,
    # paths, the toolkit calls) is proven here, not first on a GPU machine.
    for row in rows.values():
        assert " | passed | " in row, row
    assert "The CPU form (`GPU_TESTS_ON_CPU=1`)" in text
    assert text.endswith("## Failures\n\nnone\n")


@pytest.mark.slow
def test_a_check_stopped_while_grading_reports_where_and_leaves_no_kernel_behind(tmp_path):
    # As `timeout -s TERM` stops it on a lent machine: the report still comes, naming the lesson
    # being graded and the end of its autograde log, and the kernels it had started are gone.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "tests/gpu_check.py", "--lessons", "00_foundations", "--out", str(tmp_path)],
                            cwd=REPO, env={**activated(), "TMPDIR": str(scratch)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while not any("Autograding" in log.read_text() for log in scratch.glob("gpu-check-*/course/autograde-*.log")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 1, out[-3000:]
    (report,) = tmp_path.glob("*.md")
    failures = report.read_text().split("## Failures\n")[1]
    assert re.search(r"- stopped after \d+ s before it finished \(what is missing from this report did not run\), "
                     r"\d+ s into autograding 00_foundations, the end of its autograde log:\n", failures), failures
    assert "[AutogradeApp | INFO] Autograding " in failures, failures
    assert not [cwd for cwd in working_directories() if cwd.startswith(str(scratch))]


def made_up(**results):
    """A check of a made-up machine with two GPUs, whatever ``results`` say."""
    return Check(facts={"hardware": "2x NVIDIA H100 80GB HBM3 (79.1 GiB), 16 CPU cores, torch 2.11.0+cu130",
                        "gpus": ["NVIDIA H100 80GB HBM3"] * 2}, ddp=[(2048, 2, 1.83, 1.0)], bubble=[(4, 0.2, 0.23)],
                 memory=[("batch 4, 2 layers", 4_237_312, 4_237_312, 3_500_000, 40_000_000)], **results)


def test_a_report_with_nothing_wrong_shows_the_tables_and_no_failures(tmp_path):
    check = made_up(lessons=[Lesson("00_foundations", 8.5, 10, 10, slowest=[("c4_median_time_test", 3.2)])],
                    tests=[GpuTest("test_a", "passed", 1.2), GpuTest("test_b", "skipped", 0, "needs 2 CUDA GPUs")])
    path = gpu_check.write(check, tmp_path)
    assert path.name == f"{check.date}-2x-nvidia-h100-80gb-hbm3.md"
    # A second run the same day keeps the first report
    assert gpu_check.write(check, tmp_path).name == f"{check.date}-2x-nvidia-h100-80gb-hbm3-2.md"
    text = path.read_text()
    assert "| 00_foundations | 8.5 | 10 / 10 | none | c4_median_time_test 3.2 s |" in text
    assert "| 2048 | 4096 | 1.83x | 92% | 1.00x |" in text
    assert "| 4 | 20% | 23% | +3 points |" in text
    assert "| batch 4, 2 layers | 4.24 MB | 4.24 MB | 100% | 3.50 MB | 83% | 40.00 MB |" in text
    assert "| test_b | skipped | 0.0 | needs 2 CUDA GPUs |" in text
    assert gpu_check.failures(check) == [] and text.endswith("## Failures\n\nnone\n")


def test_a_lesson_that_lost_points_or_raised_and_a_failing_gpu_test_are_failures():
    error = {"output_type": "error", "ename": "AssertionError", "evalue": "rank 0: parameters"}
    raised = {"cells": [{"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "c4_fsdp_test"}}, "outputs": [error]}]}
    lesson = Lesson("03_model_parallel", 95.0, 16, 20, lost={"c4_fsdp_test": (0, 4)},
                    problems=gpu_check.cell_problems(raised))
    test = GpuTest("test_fsdp2_on_a_cuda_mesh_trains_like_one_process", "failed", 9.1,
                   "AssertionError: Tensor-likes are not close!\nMismatched elements: 3 / 834")
    check = made_up(lessons=[lesson, Lesson("00_foundations", 8.5, 10, 10)], tests=[test],
                    errors=["the DDP speedup raised RankError: rank 1 of 2 raised\n\nRuntimeError: NCCL error"])
    assert gpu_check.failures(check) == [
        "03_model_parallel: c4_fsdp_test scored 0 of 4 points",
        "03_model_parallel: c4_fsdp_test raised AssertionError: rank 0: parameters",
        "the DDP speedup raised RankError: rank 1 of 2 raised\n\nRuntimeError: NCCL error",
        "test_gpu.py::test_fsdp2_on_a_cuda_mesh_trains_like_one_process failed: AssertionError: Tensor-likes are "
        "not close!\nMismatched elements: 3 / 834"]
    text = gpu_check.report(check)
    assert "| 03_model_parallel | 95.0 | 16 / 20 | c4_fsdp_test raised AssertionError: rank 0: parameters |" in text
    assert "| test_fsdp2_on_a_cuda_mesh_trains_like_one_process | failed | 9.1 | AssertionError: " in text
    listed = text.split("## Failures\n\n")[1]
    assert listed.startswith("- 03_model_parallel: c4_fsdp_test scored 0 of 4 points\n")
    assert "- the DDP speedup raised RankError: rank 1 of 2 raised\n\n  ```\n  RuntimeError: NCCL error\n  ```" in listed
    assert "Mismatched elements: 3 / 834" in listed and not listed.startswith("none")


def test_a_torch_older_than_the_lessons_is_a_failure_of_the_check():
    check = made_up()
    check.facts["torch"] = "2.7.1+cu126"
    gpu_check.check_torch(check)
    assert gpu_check.failures(check) == [
        "torch 2.7.1+cu126 is older than 2.8, the oldest torch the lessons are true on: install torch>=2.8"]
    check = made_up()
    check.facts["torch"] = "2.8.0+cu128"
    gpu_check.check_torch(check)
    assert gpu_check.failures(check) == []


def test_junit_results_read_passes_failures_and_skips_with_their_messages(tmp_path):
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n\n\ndef test_right():\n    assert 1 + 1 == 2\n\n\ndef test_wrong():\n    assert 1 + 1 == 3\n\n\n"
        "@pytest.mark.skipif(True, reason='needs a CUDA GPU; this machine has none')\ndef test_gpu():\n    pass\n")
    xml = tmp_path / "results.xml"
    subprocess.run([sys.executable, "-m", "pytest", "test_sample.py", "-p", "no:cacheprovider", f"--junitxml={xml}"],
                   cwd=tmp_path, env=activated(), capture_output=True, timeout=120)
    right, wrong, gpu = gpu_check.junit_results(xml)
    assert (right.name, right.outcome, right.failed) == ("test_right", "passed", False)
    assert (wrong.outcome, wrong.failed) == ("failed", True) and "assert (1 + 1) == 3" in wrong.message
    assert (gpu.outcome, gpu.message, gpu.failed) == ("skipped", "needs a CUDA GPU; this machine has none", False)
