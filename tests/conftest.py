import atexit
import contextlib
import copy
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Study progress written by tests (and by the kernels they start) never lands in a real home.
os.environ["COURSE_PROGRESS"] = str(Path(tempfile.mkdtemp(prefix="course-progress-")) / "progress.json")
LESSONS = sorted(p.name for p in (REPO / "source").iterdir() if p.is_dir())


def lesson_notebook(folder, lesson):
    return REPO / folder / lesson / f"{lesson}.ipynb"


def read_nb(path):
    return json.loads(Path(path).read_text())


def assert_ran_cleanly(nb, busy=False):
    """Every code cell of an executed notebook ran without an error and wrote nothing to stderr.

    ``busy=True`` lets a measured test cell end in ``Inconclusive``: the reference measured
    beside the answer missed its bar too, so the grader sent the cell to manual grading.
    """
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        for out in cell["outputs"]:
            if busy and out["output_type"] == "error" and out["ename"] == "Inconclusive":
                continue
            assert out["output_type"] != "error", f"code cell {i} raised {out['ename']}: {out['evalue']}"
            assert not (out["output_type"] == "stream" and out["name"] == "stderr"), \
                f"code cell {i} wrote to stderr (nbgrader scores such a test cell 0):\n{out['text']}"


def graded_cells(nb, kind):
    """Cells nbgrader marks as ``kind`` ("solution" or "grade")."""
    return [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get(kind)]


@contextlib.contextmanager
def cpu_hogs(count):
    """Run the block beside ``count`` CPU-heavy processes (endless loops), as other jobs load a shared grader.

    On leaving, the block must have had them, each still running, on a busy machine: its cores
    (from ``/proc/stat``) busy at least nine tenths of the share ``count`` loops would keep busy,
    whoever kept them so (the other test lane, or other work, takes from the loops' own share).
    Otherwise the block ran on a quieter machine than it claims and this fails.
    """
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    before = busy_and_total()
    try:
        yield
    finally:
        running = [hog.poll() is None for hog in hogs]
        busy, total = (b - a for a, b in zip(before, busy_and_total()))
        for hog in hogs:
            hog.kill()
            hog.wait()
    cores = os.cpu_count()
    assert all(running), "a CPU-heavy process ended before the block did"
    assert busy >= 0.9 * min(count, cores) / cores * total, \
        f"the machine's {cores} cores were busy {busy / total:.0%} of the time beside {count} CPU-heavy processes"


def busy_and_total():
    """The machine's CPU time since boot, all cores: ``(busy, total)`` in clock ticks (``/proc/stat``)."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]  # user to steal (guest is in user)
    idle = ticks[3] + ticks[4]  # idle and waiting for I/O
    return sum(ticks) - idle, sum(ticks)


def working_directories():
    """The working directory of every process on this machine that we may read."""
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            yield os.readlink(proc / "cwd")


def free_port():
    """A port on localhost that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no line per request in a test's output
        pass


@contextlib.contextmanager
def serve(folder):
    """Serve the files under ``folder`` on loopback for the block; yields the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=folder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@functools.cache
def installed():
    """The course as a hub installs it: ``(python, home)`` of a fresh environment holding the wheel.

    The package is built from the checkout into a wheel and installed (not editable) into a
    new virtual environment, as ``pip install /opt/course`` does in the hub image; ``home`` is
    a home directory outside the repository. A data file the wheel leaves out, or code that
    reads the repository by path, fails whatever runs here. The course's dependencies come
    from the test environment: ``.pth`` lines put its site-packages after the fresh one's,
    and a directory added that way has its own ``.pth`` files (the checkout's editable
    install among them) left unread.
    """
    root = Path(tempfile.mkdtemp(prefix="installed-course-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    checkout = root / "checkout"  # what the build reads, so nothing is written into the repository
    shutil.copytree(REPO / "grader", checkout / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, checkout)
    run = functools.partial(subprocess.run, check=True, capture_output=True)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", root / "dist", checkout])
    env = root / "env"
    run([sys.executable, "-m", "venv", "--without-pip", env])
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "--prefix", env,
         *(root / "dist").glob("*.whl")])
    site = next((env / "lib").glob("python3*/site-packages"))
    dependencies = [path for path in sys.path if path.endswith(("site-packages", "dist-packages"))]
    (site / "course_dependencies.pth").write_text("\n".join(dependencies) + "\n")
    python = env / "bin" / "python"
    where = run([python, "-c", "import grader; print(grader.__file__)"], cwd=root, text=True).stdout.strip()
    assert Path(where).is_relative_to(site), f"the installed environment imports grader from {where}"
    (root / "home").mkdir()
    return python, root / "home"


def wheel():
    """The wheel :func:`installed` built from the checkout."""
    return next((installed()[0].parents[2] / "dist").glob("*.whl"))


def activated():
    """The environment variables of the installed course's environment, activated: its bin/ first on PATH.

    nbgrader runs helper commands by name (``alembic`` when it opens a gradebook); they
    must be the environment's own (the test environment's bin/ comes next, which holds
    them), never whatever else a machine has on its PATH. HOME is the installed course's
    home, outside the repository.
    """
    python, home = installed()
    env = dict(os.environ, HOME=str(home))
    env["PATH"] = os.pathsep.join([str(python.parent), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(python.parents[1])
    # The dependencies' data files (nbconvert's templates, nbgrader's) sit in the test
    # environment's share/jupyter, where a hub's single install keeps them beside the course.
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(Path(sys.prefix) / "share" / "jupyter"),
                                                        env.get("JUPYTER_PATH")]))
    return env


def nbgrader(*args, cwd, check=True, timeout=900, env=None):
    """Run the real nbgrader command line in a course directory with the installed course (:func:`installed`).

    ``env`` adds variables to (or, with a value of None, removes them from) that environment.
    """
    environ = activated()
    for key, value in (env or {}).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = str(value)
    proc = subprocess.run([installed()[0], "-m", "nbgrader", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def parallel_autograde(course, lesson, *args):
    """``python -m grader.grading.autograde LESSON ARGS`` (the course's parallel autograde) in ``course``,
    with the installed course, as an activated environment runs it."""
    return subprocess.run([installed()[0], "-m", "grader.grading.autograde", lesson, *args], cwd=course, env=activated(),
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """A scratch course directory: the committed source/ and config, nothing else."""
    return copy_course(tmp_path_factory.mktemp("course"))


def copy_course(root):
    """Fill the directory ``root`` with a course: the committed source/ and config, nothing else."""
    shutil.copytree(REPO / "source", root / "source")
    shutil.copy(REPO / "nbgrader_config.py", root)
    return root


# ---- the nbgrader round trip: submissions, scores, mutants ----

def points(lesson):
    """{test cell grade id: points} of a lesson's source notebook."""
    return {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"]
            for c in graded_cells(read_nb(lesson_notebook("source", lesson)), "grade")}


def submission(lesson, answers=None, tests=None, drop=(), blank=()):
    """The release notebook with the source's solutions filled in.

    ``answers`` replaces solution cells and ``tests`` replaces test cells, by grade id;
    ``drop`` deletes cells by grade id; ``blank`` leaves answer cells as released, unanswered.
    """
    answers = answers or {}
    tests = tests or {}
    solutions = {c["metadata"]["nbgrader"]["grade_id"]: c["source"]
                 for c in graded_cells(read_nb(lesson_notebook("source", lesson)), "solution")}
    nb = copy.deepcopy(read_nb(REPO / "release" / lesson / f"{lesson}.ipynb"))
    kept = []
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if gid in drop:
            continue
        if meta.get("solution") and gid not in blank:
            cell["source"] = answers.get(gid, solutions[gid])
        elif meta.get("grade") and gid in tests:
            cell["source"] = tests[gid]
        kept.append(cell)
    nb["cells"] = kept
    return nb


def submit(course, student, lesson, nb):
    """Put a notebook (JSON, or text as it is) where nbgrader collects a student's submission."""
    path = course / "submitted" / student / lesson / f"{lesson}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb))


def scores(course, lesson, student):
    """(score, max score, {test cell grade id: score}) of a student's autograded lesson."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(lesson, lesson, student)
        return sub.score, sub.max_score, {g.name: g.score for g in sub.grades}


def undecided(course, lesson, student):
    """Test cells of a student's autograded lesson that the machine could not decide: the cell
    raised ``Inconclusive`` (its reference missed the bar too) and the gradebook leaves it to the
    instructor with the numbers. A quiet machine has none; a busy one may."""
    from nbgrader.api import Gradebook

    nb = read_nb(course / "autograded" / student / lesson / f"{lesson}.ipynb")
    raised = {c["metadata"]["nbgrader"]["grade_id"] for c in graded_cells(nb, "grade")
              if any(o.get("ename") == "Inconclusive" for o in c.get("outputs", []))}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(lesson, lesson, student)
        return {g.name for g in sub.grades if g.name in raised and g.needs_manual_grade and g.auto_score is None}


def mutant_students(lesson):
    """{student: {solution grade id: mutant name}}: the lesson's mutants packed into few students.

    A student carries at most one mutant per challenge, so each notebook run (the costly
    part of autograde) grades several wrong answers at once; per-cell scores tell them apart.
    """
    from mutants import MUTANTS

    students = []
    for name, (gid, _) in MUTANTS[lesson].items():
        free = next((s for s in students if gid not in s), None)
        if free is None:
            students.append(free := {})
        free[gid] = name
    return {f"mutants_{i}": carried for i, carried in enumerate(students, 1)}
