import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
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


def assert_ran_cleanly(nb):
    """Every code cell of an executed notebook ran without an error and wrote nothing to stderr."""
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        for out in cell["outputs"]:
            assert out["output_type"] != "error", f"code cell {i} raised {out['ename']}: {out['evalue']}"
            assert not (out["output_type"] == "stream" and out["name"] == "stderr"), \
                f"code cell {i} wrote to stderr (nbgrader scores such a test cell 0):\n{out['text']}"


def graded_cells(nb, kind):
    """Cells nbgrader marks as ``kind`` ("solution" or "grade")."""
    return [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get(kind)]


def free_port():
    """A port on localhost that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def activated():
    """The environment variables of an activated virtual environment: its bin/ first on PATH.

    nbgrader runs helper commands by name (``alembic`` when it opens a gradebook); they
    must be the environment's own, never whatever else a machine has on its PATH.
    """
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(Path(sys.executable).parents[1])
    return env


def nbgrader(*args, cwd, check=True, timeout=900, env=None):
    """Run the real nbgrader command line in a course directory, as an activated environment would.

    ``env`` adds variables to (or, with a value of None, removes them from) that environment.
    """
    environ = activated()
    for key, value in (env or {}).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = str(value)
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """A scratch course directory: the committed source/ and config, nothing else."""
    return copy_course(tmp_path_factory.mktemp("course"))


def copy_course(root):
    """Fill the directory ``root`` with a course: the committed source/ and config, nothing else."""
    shutil.copytree(REPO / "source", root / "source")
    shutil.copy(REPO / "nbgrader_config.py", root)
    return root
