"""Prove a machine with GPUs (a hub pod, a workstation) for the course, and write down what it showed.

    python tests/gpu_check.py [--lessons 00_foundations ...] [--out docs/gpu] [--quick]
    make gpu-check

1. The hardware and the versions: GPUs, torch, CUDA, cuDNN, NCCL.
2. Every lesson's solution run top to bottom and autograded with the real ``nbgrader
   autograde`` and the course's ``nbgrader_config.py``, in a scratch course: seconds, score,
   and every cell that raised or wrote to stderr (the autograded notebook is the source's
   solutions run top to bottom, under nbgrader's cell time-out, demonstrations included: a
   class's autograde skips them, this check runs them on the GPUs).
3. Measurements: the DDP speedup (:func:`grader.scaling.ddp_speedups`), the GPipe bubble
   against its formula (:func:`grader.pipeline.run_schedule`), the memory calculator
   against measured bytes (:func:`grader.memory.training_step_bytes`, and on a GPU what
   CUDA's allocator held, :func:`grader.memory.cuda_peak`).
4. The tests marked ``gpu`` (``pytest -m gpu tests/lab/test_gpu.py``): passed, failed, or
   skipped with the reason.

The report goes to ``<out>/<YYYY-MM-DD>-<gpu>.md`` (``cpu`` without one; ``-quick`` added for
``--quick``; ``-2``, ``-3``... beside an earlier report of the same day), its "Failures"
section listing every failure with its message. The exit status is 1 when a lesson lost points, a cell raised or wrote to stderr, a measurement
raised, or a gpu test failed. ``--quick`` is the CPU form that ``make test`` runs
(tests/lab/test_gpu_check.py): lesson 00 only, small measurements, and the gpu tests in their
CPU form (the CPU standing in for missing GPUs, gloo for NCCL), so none of them can rot unseen.
"""

import argparse
import datetime
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader import hardware, memory, pipeline, scaling
from grader.models import transformer

from conftest import LESSONS, REPO, activated, copy_course, installed, nbgrader, points, read_nb, scores, submission, submit

QUICK_LESSONS = ["00_foundations"]
SHAPE = dict(hidden=64, heads=4, seq=64)  # lesson 03's transformer
# What each measurement runs, in full and in the quick (CPU) form.
SIZES = {
    "full": {"ddp": dict(batches=(256, 1024, 2048), steps=5, warmup=2), "bubble": dict(micro=(1, 2, 4, 8), sizes={}),
             "memory": [(4, 2, False), (8, 4, False), (8, 4, True)]},
    "quick": {"ddp": dict(batches=(64,), steps=2, warmup=1),
              "bubble": dict(micro=(2, 4), sizes=dict(width=512, layers=4, batch=512)), "memory": [(4, 2, False)]},
}
MB = 1e6


@dataclass
class Lesson:
    """One lesson's solution, autograded."""

    name: str
    seconds: float = 0.0
    score: float = 0.0
    max_score: float = 0.0
    lost: dict = field(default_factory=dict)  # {test cell: (points scored, points it has)}
    problems: list = field(default_factory=list)  # cells that raised or wrote to stderr; nbgrader's own errors
    slowest: list = field(default_factory=list)  # (cell, seconds): where the time went, slowest first

    def failures(self):
        """What went wrong, one line each."""
        return ([f"{self.name}: {cell} scored {got:g} of {pts:g} points" for cell, (got, pts) in self.lost.items()]
                + [f"{self.name}: {problem}" for problem in self.problems])


@dataclass
class GpuTest:
    """One test of tests/lab/test_gpu.py and how it ended: passed, failed, error or skipped."""

    name: str
    outcome: str
    seconds: float = 0.0
    message: str = ""

    @property
    def failed(self):
        return self.outcome in ("failed", "error")


@dataclass
class Check:
    """Everything one run found, as the report shows it."""

    facts: dict  # the hardware and versions, by name
    lessons: list = field(default_factory=list)  # Lesson
    ddp: list = field(default_factory=list)  # (per-rank batch, ranks, measured speedup, the graded bar)
    bubble: list = field(default_factory=list)  # (micro-batches, formula, measured)
    memory: list = field(default_factory=list)  # (configuration, estimate, measured, allocator or None, bare or None)
    tests: list = field(default_factory=list)  # GpuTest
    errors: list = field(default_factory=list)  # anything else that failed, in words
    notes: dict = field(default_factory=dict)  # what each measurement ran on, in words
    quick: bool = False
    seconds: float = 0.0
    date: str = field(default_factory=lambda: datetime.date.today().isoformat())
    command: str = "python tests/gpu_check.py"


def facts():
    """The hardware and the versions a report is read with."""
    cuda = torch.cuda.is_available()
    nccl = "none"
    if cuda and torch.distributed.is_nccl_available():
        version = torch.cuda.nccl.version()
        nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    return {
        "hardware": hardware.describe(),
        "gpus": [g.name for g in hardware.gpus()],
        "GPUs": ", ".join(f"{g.index}: {g.name} ({g.memory_gib:g} GiB)" for g in hardware.gpus()) or "none",
        "driver": _nvidia_driver() or "none",
        "torch": torch.__version__,
        "torch floor": f"{hardware.TORCH_FLOOR_TEXT} (the oldest torch the lessons are true on)",
        "CUDA": torch.version.cuda or "none (a CPU build of torch)",
        "cuDNN": str(torch.backends.cudnn.version()) if cuda else "none",
        "NCCL": nccl,
        "Python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}, {platform.machine()}",
    }


def check_torch(check):
    """The installed torch against the lessons' floor: a failure of the check when it is older."""
    why = hardware.torch_below_floor(check.facts["torch"])
    if why:
        check.errors.append(why)


def _nvidia_driver():
    """The NVIDIA driver's version from nvidia-smi, or None without one."""
    if not shutil.which("nvidia-smi"):
        return None
    proc = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=60)
    return proc.stdout.split("\n")[0].strip() or None


def code_cells(nb):
    """(name, cell) of each code cell: its nbgrader grade id, or "code cell N" (N counting code cells),
    "demonstration N" for a cell tagged demo.

    >>> [name for name, _ in code_cells({"cells": [{"cell_type": "code", "metadata": {"tags": ["demo"]}},
    ...                                            {"cell_type": "code", "metadata": {}}]})]
    ['demonstration 0', 'code cell 1']
    """
    def name(i, metadata):
        if "demo" in metadata.get("tags", []):
            return f"demonstration {i}"
        return metadata.get("nbgrader", {}).get("grade_id") or f"code cell {i}"
    return [(name(i, cell.get("metadata", {})), cell)
            for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code")]


def cell_problems(nb):
    """Every code cell of an executed notebook that raised or wrote to stderr, in words.

    >>> cell_problems({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [
    ...     {"output_type": "stream", "name": "stderr", "text": "careful\\n"}]}]})
    ['code cell 0 wrote to stderr: careful']
    """
    found = []
    for name, cell in code_cells(nb):
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                found.append(f"{name} raised {out['ename']}: {out['evalue']}")
            elif out["output_type"] == "stream" and out["name"] == "stderr":
                found.append(f"{name} wrote to stderr: {''.join(out['text']).strip()}")
    return found


def slowest_cells(nb, n=3):
    """The ``n`` slowest code cells of an executed notebook, from the times nbclient recorded.

    >>> run = {"iopub.execute_input": "2026-11-26T03:00:00.5Z", "shell.execute_reply": "2026-11-26T03:00:12.0Z"}
    >>> slowest_cells({"cells": [{"cell_type": "code", "metadata": {"execution": run}}]})
    [('code cell 0', 11.5)]
    """
    timed = []
    for name, cell in code_cells(nb):
        times = cell.get("metadata", {}).get("execution", {})
        began, ended = times.get("iopub.execute_input"), times.get("shell.execute_reply")
        if began and ended:
            seconds = (datetime.datetime.fromisoformat(ended) - datetime.datetime.fromisoformat(began)).total_seconds()
            timed.append((name, round(seconds, 1)))
    return sorted(timed, key=lambda t: -t[1])[:n]


def autograde_log(course, lesson):
    return course / f"autograde-{lesson}.log"


def autograde(course, lesson):
    """``nbgrader autograde`` of the solver's notebook, its output in :func:`autograde_log` as it goes
    (so a check stopped part-way still says which cells had finished); its exit status.
    Stopped, it stops its kernels and their ranks with it."""
    with autograde_log(course, lesson).open("w") as log:
        proc = subprocess.Popen([installed()[0], "-m", "nbgrader", "autograde", lesson, "--student=solver", "--force",
                                 "--Execute.skip_cells_with_tag=skip-execution"],
                                cwd=course, env=activated(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=3600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def last_lines(path, n=8):
    """The last ``n`` lines of a log, each on a line of its own ('' where there is none).

    >>> import tempfile; log = Path(tempfile.mkdtemp()) / "log"; _ = log.write_text("a\\nb\\nc\\n")
    >>> last_lines(log, 2)
    '\\nb\\nc'
    """
    lines = path.read_text(errors="replace").splitlines()[-n:] if path.is_file() else []
    return "".join(f"\n{line[:300]}" for line in lines)


def grade_lesson(course, lesson):
    """Autograde the lesson's solution in the scratch ``course``: seconds, score, and what went wrong."""
    result = Lesson(lesson)
    try:
        nbgrader("generate_assignment", lesson, "--force", cwd=course)
        submit(course, "solver", lesson, submission(lesson))
        start = time.monotonic()
        returncode = autograde(course, lesson)
        result.seconds = time.monotonic() - start
        log = autograde_log(course, lesson).read_text()
        if returncode:
            result.problems.append(f"nbgrader autograde exited {returncode}:\n{log[-3000:]}")
        result.problems += [line.strip() for line in log.splitlines() if "| ERROR]" in line]
        result.score, result.max_score, per_cell = scores(course, lesson, "solver")
        result.lost = {cell: (per_cell.get(cell, 0), pts) for cell, pts in points(lesson).items()
                       if per_cell.get(cell, 0) < pts}
        graded = read_nb(course / "autograded" / "solver" / lesson / f"{lesson}.ipynb")
        result.problems += cell_problems(graded)
        result.slowest = slowest_cells(graded)
    except Exception as e:  # the report still gets written, with this in it
        result.problems.append(f"could not be graded: {type(e).__name__}: {e}")
    return result


def measure_ddp(check, sizes):
    """DDP on every GPU (at least 2 ranks; CPU processes below 2 GPUs) against one process, same global batch."""
    ranks = max(2, hardware.gpu_count())
    check.notes["ddp"] = scaling.ddp_measured_on(ranks)
    speedups = scaling.ddp_speedups(list(sizes["batches"]), ranks=ranks, steps=sizes["steps"], warmup=sizes["warmup"])
    check.ddp = [(b, ranks, s, scaling.expected_ddp_speedup(ranks)) for b, s in zip(sizes["batches"], speedups)]


def measure_bubble(check, sizes):
    """The GPipe bubble on 2 stages, measured from a real run's timeline, against (p - 1) / (m + p - 1)."""
    on = "2 GPUs (NCCL, one stage per GPU)" if hardware.backend(2) == "nccl" else "2 CPU processes (gloo)"
    shape = {**dict(width=1024, layers=8, batch=1024), **sizes["sizes"]}  # run_schedule's defaults, the lesson's
    check.notes["bubble"] = f"{on}; {shape['layers']} layers of width {shape['width']}, batch {shape['batch']}"
    for m in sizes["micro"]:
        works = pipeline.run_schedule(m, "gpipe", stages=2, **shape)
        check.bubble.append((m, pipeline.bubble_formula(2, m), pipeline.bubble_fraction(works)))


def measure_memory(check, configurations):
    """Lesson 03's calculator against one real training step of its transformer on this machine's device."""
    device = hardware.device()
    on_gpu = device.type == "cuda"
    check.notes["memory"] = f"{device} ({'CUDA allocator read too' if on_gpu else 'no CUDA allocator to read'})"
    for batch, layers, checkpointing in configurations:
        net = transformer(**SHAPE, layers=layers, checkpointing=checkpointing).to(device)
        x = torch.randn(batch, SHAPE["seq"], SHAPE["hidden"], device=device, requires_grad=checkpointing)
        if on_gpu:
            with memory.cuda_peak(device) as cuda:
                got = memory.training_step_bytes(net, torch.optim.Adam(net.parameters()), x)
            allocator, bare = got["parameters"] + cuda.peak, torch.cuda.max_memory_allocated(device)
        else:
            got = memory.training_step_bytes(net, torch.optim.Adam(net.parameters()), x)
            allocator = bare = None
        want = memory.estimate(**SHAPE, layers=layers, batch=batch, checkpointing=checkpointing)
        label = f"batch {batch}, {layers} layers{', checkpointing' if checkpointing else ''}"
        check.memory.append((label, want["total"], got["total"], allocator, bare))


def attempt(check, what, fn, *args):
    """Run one part of the check; if it raises, note the failure and go on (the report still gets written)."""
    print(f"{what}...", flush=True)
    try:
        fn(check, *args)
    except Exception as e:
        check.errors.append(f"{what} raised {type(e).__name__}: {e}")


def junit_results(path):
    """Every test case of a pytest JUnit XML file as a :class:`GpuTest`."""
    results = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            found = case.find(tag)
            if found is not None:
                outcome, message = name, found.get("message", "")
                if tag != "skipped" and found.text:  # the traceback's last lines say what was compared
                    message = f"{message}\n" + "\n".join(found.text.strip().splitlines()[-15:])
                break
        results.append(GpuTest(case.get("name"), outcome, float(case.get("time", 0)), message))
    return results


def run_gpu_tests(check, scratch):
    """``pytest -m gpu tests/lab/test_gpu.py`` in a fresh process; every test's outcome into ``check.tests``.

    The quick form runs them in their CPU form (``GPU_TESTS_ON_CPU=1``): a test whose GPUs are
    missing runs with the CPU standing in for them, so its scaffolding is proven on any machine.
    """
    xml = Path(scratch) / "gpu-tests.xml"
    env = {**activated(), **({"GPU_TESTS_ON_CPU": "1"} if check.quick else {})}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "tests/lab/test_gpu.py", "-rs", "-p",
                           "no:cacheprovider", f"--junitxml={xml}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    print("\n".join(proc.stdout.strip().splitlines()[-12:]), flush=True)
    check.tests = junit_results(xml) if xml.exists() else []
    if proc.returncode and not any(t.failed for t in check.tests):  # pytest itself failed, or found no test
        check.errors.append(f"pytest -m gpu tests/lab/test_gpu.py exited {proc.returncode}:\n"
                            f"{(proc.stdout + proc.stderr)[-3000:]}")


def failures(check):
    """Every failure of a check, one entry each: lessons, measurements, gpu tests.

    >>> failures(Check(facts={}, tests=[GpuTest("test_x", "failed", 1.0, "assert 1 == 2")]))
    ['test_gpu.py::test_x failed: assert 1 == 2']
    """
    found = [line for lesson in check.lessons for line in lesson.failures()]
    found += check.errors
    found += [f"test_gpu.py::{t.name} {t.outcome}: {t.message}" for t in check.tests if t.failed]
    return found


def _cell(text):
    """Text made safe for one cell of a markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows])


def _mb(nbytes):
    return "—" if nbytes is None else f"{nbytes / MB:.2f} MB"


def _ratio(a, b):
    return "—" if a is None else f"{a / b:.0%}"


def report(check):
    """The markdown report of a check: hardware and versions, lessons, measurements, gpu tests, failures."""
    form = " (quick: the CPU form)" if check.quick else ""
    parts = [f"# GPU check, {check.date}{form}",
             f"`{check.command}`, {check.seconds:.0f} s in all.",
             "## Hardware and versions",
             _table(["", "this machine"], [(k, v) for k, v in check.facts.items() if k != "gpus"]),
             "## Lessons: each solution run top to bottom and autograded",
             "Scratch course, `nbgrader autograde` with the course's `nbgrader_config.py` (cell time-out "
             "120 s), except that the demonstrations run too (a class's grading skips them), so that they "
             "run on this machine's GPUs; seconds are the whole autograde run.",
             _table(["lesson", "seconds", "score", "problems (cells that raised or wrote to stderr)", "slowest cells"],
                    [(x.name, f"{x.seconds:.1f}", f"{x.score:g} / {x.max_score:g}",
                      "; ".join(p.split("\n")[0][:200] for p in x.problems) or "none",
                      ", ".join(f"{cell} {seconds:g} s" for cell, seconds in x.slowest))
                     for x in check.lessons] or [("none run", "", "", "", "")])]
    parts += ["## DDP speedup (`scaling.ddp_speedups`)", f"On {check.notes.get('ddp', 'nothing: not measured')}.",
              _table(["per-rank batch", "global batch", "speedup", "efficiency", "graded bar (lesson 02)"],
                     [(b, b * n, f"{s:.2f}x", f"{s / n:.0%}", f"{bar:.2f}x") for b, n, s, bar in check.ddp]
                     or [("not measured", "", "", "", "")])]
    parts += ["## Pipeline bubble, GPipe on 2 stages (`pipeline.run_schedule`)",
              f"On {check.notes.get('bubble', 'nothing: not measured')}.",
              _table(["micro-batches m", "formula (p - 1) / (m + p - 1)", "measured", "measured - formula"],
                     [(m, f"{f:.0%}", f"{b:.0%}", f"{(b - f) * 100:+.0f} points") for m, f, b in check.bubble]
                     or [("not measured", "", "", "")])]
    parts += ["## Memory: the calculator against measured bytes (`memory.estimate`, `memory.training_step_bytes`)",
              f"Lesson 03's transformer (hidden 64, 4 heads, seq 64), one Adam step on "
              f"{check.notes.get('memory', 'nothing: not measured')}. The allocator column is the parameters "
              f"plus `memory.cuda_peak`'s peak; `max_memory_allocated` read bare also counts what was there before.",
              _table(["configuration", "estimate", "measured tensors", "measured / estimate",
                      "CUDA allocator", "allocator / estimate", "max_memory_allocated"],
                     [(label, _mb(want), _mb(got), _ratio(got, want), _mb(alloc), _ratio(alloc, want), _mb(bare))
                      for label, want, got, alloc, bare in check.memory] or [("not measured", "", "", "", "", "", "")])]
    cpu_form = ("The CPU form (`GPU_TESTS_ON_CPU=1`): a test whose GPUs this machine lacks ran with the CPU "
                "standing in for each GPU and gloo for NCCL, so its scaffolding ran; what only a GPU shows "
                "(timings, the allocator, TF32) was not checked.")
    parts += ["## GPU tests (`pytest -m gpu tests/lab/test_gpu.py`)", *([cpu_form] if check.quick else []),
              _table(["test", "outcome", "seconds", "reason or message"],
                     [(t.name, t.outcome, f"{t.seconds:.1f}", t.message.split("\n")[0]) for t in check.tests]
                     or [("none ran", "", "", "")])]
    found = failures(check)
    parts += ["## Failures", "\n".join(_failure(f) for f in found) if found else "none"]
    return "\n\n".join(parts) + "\n"


def _failure(text):
    """One failure as a list item: its first line, then the rest verbatim."""
    first, _, rest = text.partition("\n")
    return f"- {first}" + (f"\n\n  ```\n{textwrap.indent(rest.strip(), '  ')}\n  ```\n" if rest.strip() else "")


def slug(gpus):
    """The report's name for a machine with these GPUs.

    >>> slug([]), slug(["NVIDIA H100 80GB HBM3"]), slug(["NVIDIA A100-SXM4-40GB"] * 2)
    ('cpu', 'nvidia-h100-80gb-hbm3', '2x-nvidia-a100-sxm4-40gb')
    """
    if not gpus:
        return "cpu"
    name = re.sub(r"[^a-z0-9]+", "-", gpus[0].lower()).strip("-")
    return f"{len(gpus)}x-{name}" if len(gpus) > 1 else name


def write(check, out):
    """Write the report into the folder ``out``, next to any earlier one of the same day (``-2``, ``-3``...); its path."""
    name = f"{check.date}-{slug(check.facts['gpus'])}{'-quick' if check.quick else ''}"
    path, n = Path(out) / f"{name}.md", 1
    while path.exists():
        n += 1
        path = Path(out) / f"{name}-{n}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report(check))
    return path


def main(argv=None):
    """Run the check and write its report; 1 if anything failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", nargs="+", choices=LESSONS, help="default: every lesson (--quick: 00)")
    parser.add_argument("--out", default=str(REPO / "docs" / "gpu"), help="folder for the report")
    parser.add_argument("--quick", action="store_true", help="the CPU form: lesson 00, small measurements")
    args = parser.parse_args(argv)
    sizes = SIZES["quick" if args.quick else "full"]
    start = time.monotonic()
    check = Check(facts=facts(), quick=args.quick, command=" ".join(["python tests/gpu_check.py", *(sys.argv[1:] if argv is None else argv)]))
    print(check.facts["hardware"], flush=True)
    check_torch(check)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped (`timeout`), it still reports
    running = None  # the lesson being autograded, and since when
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        course = copy_course(Path(scratch) / "course")
        try:
            for lesson in args.lessons or (QUICK_LESSONS if args.quick else LESSONS):
                running = (lesson, time.monotonic())
                check.lessons.append(grade_lesson(course, lesson))
                running = None
                x = check.lessons[-1]
                print(f"{lesson}: {x.score:g} / {x.max_score:g} in {x.seconds:.1f} s", flush=True)
            attempt(check, "the DDP speedup", measure_ddp, sizes["ddp"])
            attempt(check, "the pipeline bubble", measure_bubble, sizes["bubble"])
            attempt(check, "memory against the estimate", measure_memory, sizes["memory"])
            attempt(check, "pytest -m gpu tests/lab/test_gpu.py", run_gpu_tests, scratch)
        except KeyboardInterrupt:
            during = (f", {time.monotonic() - running[1]:.0f} s into autograding {running[0]}, the end of its "
                      f"autograde log:{last_lines(autograde_log(course, running[0]))}") if running else ""
            check.errors.append(f"stopped after {time.monotonic() - start:.0f} s before it finished (what is missing "
                                f"from this report did not run){during}")
    check.seconds = time.monotonic() - start
    path = write(check, args.out)
    found = failures(check)
    print(f"report: {path}\n" + (f"{len(found)} failure(s):\n" + "\n".join(f"- {f.splitlines()[0]}" for f in found)
                                 if found else "no failures"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
