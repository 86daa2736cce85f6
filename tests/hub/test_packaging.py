"""Set-up files agree with each other and with the README; `make torch` takes the right index."""

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from grader import hardware

from conftest import REPO, activated, installed, read_nb, serve, wheel

CONDA_NAMES = {"torch": "pytorch"}


def requirements(specs):
    """{name: version specifier} of requirement strings such as 'nbgrader==0.9.6'."""
    found = {}
    for spec in specs:
        name, version = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*(.*)", spec).groups()
        found[name.lower()] = version.replace(" ", "")
    return found


def test_environment_yml_pins_the_same_packages_as_pyproject():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = {CONDA_NAMES.get(n, n): v for n, v in requirements(pyproject["project"]["dependencies"]).items()}
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda = requirements([d for d in env["dependencies"] if isinstance(d, str)]
                         + [d for d in pip if not d.startswith("-e")])
    conda.pop("python"), conda.pop("pip")
    assert conda == wanted
    # Everything but torch (whose build follows the hub's GPUs) has an upper bound or a pin.
    assert all("<" in v or "==" in v for n, v in wanted.items() if n != "pytorch"), wanted


def test_ci_runs_the_readme_test_command_with_nothing_found_by_accident():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert re.search(r"^\s*make test\b", ci, re.M)
    # CI's PATH holds the system directories only (the Makefile adds .venv/bin in front).
    path = re.search(r"^export PATH=(\S+)$", ci, re.M)[1].split(":")
    assert set(path) <= {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}, path
    assert "export PATH := $(abspath $(VENV))/bin:$(PATH)" in (REPO / "Makefile").read_text()


# The first torch release with each public API the course imports (older ones had it under a
# private path, or not at all): the declared lower bound must reach every one of them.
FIRST_TORCH = {"torch.distributed.fsdp.fully_shard": (2, 6), "torch.distributed.tensor.DTensor": (2, 5),
               "torch.distributed.pipelining.PipelineStage": (2, 4)}


def torch_imports():
    """Every ``module.name`` that the lessons and the toolkit import ``from torch...``."""
    sources = [p.read_text() for p in (REPO / "grader").rglob("*.py")]
    sources += ["".join(c["source"]) for p in (REPO / "source").glob("*/*.ipynb")
                for c in read_nb(p)["cells"] if c["cell_type"] == "code"]
    found = set()
    for text in sources:
        for module, names in re.findall(r"^\s*from (torch[\w.]*) import (\([^)]*\)|[^\n]+)", text, re.M):
            found |= {f"{module}.{name.split(' as ')[0].strip()}" for name in names.strip("()").split(",")
                      if name.strip() and not name.strip().startswith("#")}
    return found


def test_the_declared_torch_has_every_api_the_course_imports():
    imported = torch_imports()
    assert set(FIRST_TORCH) <= imported, "FIRST_TORCH lists an API the course no longer imports"
    dependency = next(d for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
                      if re.match(r"torch\b", d))
    lowest = tuple(int(n) for n in re.search(r">=\s*(\d+)\.(\d+)", dependency).groups())
    for api, release in FIRST_TORCH.items():
        assert lowest >= release, f"{api} needs torch>={release[0]}.{release[1]}, but pyproject asks for {dependency}"
    assert lowest == hardware.TORCH_FLOOR  # the floor hub.smoke and gpu-check hold an installed torch to
    conda = (REPO / "environment.yml").read_text()
    assert f"pytorch>={lowest[0]}.{lowest[1]}" in conda


def test_the_wheel_holds_every_file_the_toolkit_reads():
    # A hub installs the wheel, not the checkout: a data file left out of it is missing there.
    names = set(zipfile.ZipFile(wheel()).namelist())
    files = [p.relative_to(REPO).as_posix() for p in (REPO / "grader").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    assert [f for f in files if f not in names] == []


def test_the_installed_course_reads_its_thresholds_and_content_from_home():
    python, home = installed()
    code = ("from grader import content, scaling; from grader.study import cards; "
            "print(scaling.expected_ddp_speedup(2) > 0, len(content.topics('cards')), scaling.__file__)")
    proc = subprocess.run([python, "-c", code], cwd=home, env=activated(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ok, topics, where = proc.stdout.split()
    assert (ok, int(topics)) == ("True", len(list((REPO / "grader" / "content" / "cards").glob("*.json"))))
    assert not Path(where).is_relative_to(REPO)


def fake_torch(folder, local):
    """A wheel of a package named torch, version 2.13.0+``local``: what an index serves, in a test."""
    folder.mkdir(parents=True)
    name, dist = f"torch-2.13.0+{local}", f"torch-2.13.0+{local}.dist-info"
    with zipfile.ZipFile(folder / f"{name}-py3-none-any.whl", "w") as whl:
        whl.writestr("torch/__init__.py", f"__version__ = '2.13.0+{local}'\n")
        whl.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+{local}\n")
        whl.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{dist}/RECORD", "")


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="with nvidia-smi, `make torch` takes the GPU branch")
def test_make_torch_takes_pytorchs_cpu_index_when_it_answers_and_the_default_index_when_not(tmp_path):
    # Two indexes on this machine's loopback, each a folder of one fake torch wheel.
    fake_torch(tmp_path / "www" / "cpu" / "torch", "cpuindex")
    fake_torch(tmp_path / "www" / "default" / "torch", "defaultindex")
    with serve(tmp_path / "www") as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"{url}/default/", PIP_NO_CACHE_DIR="1",
                   PATH="/usr/bin:/bin")
        venv = tmp_path / "venv"

        def make_torch(cpu_index):
            proc = subprocess.run(["make", "-f", str(REPO / "Makefile"), "--no-print-directory", "torch", f"VENV={venv}",
                                   f"PYTHON={sys.executable}", "SYSTEM_SITE=0", f"TORCH_CPU_INDEX={cpu_index}"],
                                  cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            version = subprocess.run([venv / "bin" / "python", "-c", "import torch; print(torch.__version__)"],
                                     capture_output=True, text=True).stdout.strip()
            return proc.stdout.splitlines()[0], version

        assert make_torch(f"{url}/cpu") == (
            f"torch: torch==2.13.0 from PyTorch's CPU index, {url}/cpu", "2.13.0+cpuindex")
        assert make_torch(f"{url}/cpu") == ("torch: using the installed 2.13.0+cpuindex", "2.13.0+cpuindex")
        subprocess.run([venv / "bin" / "python", "-m", "pip", "uninstall", "-q", "-y", "torch"], env=env, check=True)
        closed = "http://127.0.0.1:9/whl/cpu"  # the discard port: nothing answers
        assert make_torch(closed) == (
            f"torch: PyTorch's CPU index ({closed}) cannot be reached: torch==2.13.0 from pip's default index",
            "2.13.0+defaultindex")
