"""Set-up files agree with each other and with the README."""

import re
import tomllib

import yaml

from conftest import REPO

CONDA_NAMES = {"torch": "pytorch"}


def requirement_names(specs):
    return {re.split(r"[<>=!~ \[]", s, maxsplit=1)[0].lower() for s in specs}


def test_environment_yml_lists_the_same_packages_as_pyproject():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = {CONDA_NAMES.get(n, n) for n in requirement_names(pyproject["project"]["dependencies"])}
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    conda = requirement_names(d for d in env["dependencies"] if isinstance(d, str)) - {"python", "pip"}
    assert conda == wanted


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert re.search(r"^\s*make test\b", ci, re.M)
