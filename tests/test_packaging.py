"""Set-up files agree with each other and with the README."""

import re
import tomllib

import yaml

from conftest import REPO

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
