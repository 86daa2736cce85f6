"""Build the course site: the guides, the lessons as pages, the cheat sheets and the measurements.

    python docs/build_site.py [--execute 00_foundations ... | --execute all] [--out build/site]
    make docs                      # every lesson run (cached), into build/site/html

The pages are staged in ``<out>/src`` from where they live (docs/, release/, the cheat sheets
in notebooks/cheatsheets/, in the course's order), then Sphinx with MyST-NB and the book theme builds
``<out>/html``, offline. Any warning (a broken link or cross-reference) fails the build.
Lessons named by ``--execute`` run top to bottom with their outputs shown (figures
included); their answer and test cells are the release's stubs, which raise, so those
cells' outputs are left out. Runs are cached in ``<out>/cache``: an unchanged lesson is not
run again.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from grader.content import in_course_order

REPO = Path(__file__).resolve().parent.parent


def stub(cell):
    """True for an answer or test cell of a release notebook (it raises until answered)."""
    grading = cell.get("metadata", {}).get("nbgrader", {})
    return bool(grading.get("solution") or grading.get("grade"))


WIDGET = re.compile(r"^show_\w+\(", re.M)  # a cell that shows one of the course's widgets
ONLY_IN_LAB = ("*An interactive widget: it works in JupyterLab (`make lab`, or your hub), "
               "not on this page.*")


def stage(src):
    """Copy every page into ``src``: the guides, lessons, cheat sheets and GPU reports."""
    shutil.rmtree(src, ignore_errors=True)
    (src / "gpu").mkdir(parents=True)
    for page in (REPO / "docs").glob("*.md"):
        shutil.copy(page, src)
    for page in (REPO / "docs" / "gpu").glob("*.md"):
        shutil.copy(page, src / "gpu")
    (src / "cheatsheets").mkdir()
    for i, topic in enumerate(in_course_order(p.stem for p in (REPO / "notebooks" / "cheatsheets").glob("*.md"))):
        shutil.copy(REPO / "notebooks" / "cheatsheets" / f"{topic}.md", src / "cheatsheets" / f"{i:02d}_{topic}.md")
    (src / "lessons").mkdir()
    for lesson in sorted((REPO / "release").iterdir()):
        nb = json.loads((lesson / f"{lesson.name}.ipynb").read_text())
        cells = []
        for cell in nb["cells"]:
            cells.append(cell)
            if cell["cell_type"] != "code":
                continue
            tags = cell["metadata"].setdefault("tags", [])
            if stub(cell):
                tags += [t for t in ("raises-exception", "remove-output") if t not in tags]
            elif WIDGET.search("".join(cell["source"])):
                tags.append("remove-output")
                cells.append({"cell_type": "markdown", "id": f"{cell.get('id', len(cells))}-widget", "metadata": {},
                              "source": ONLY_IN_LAB})
        nb["cells"] = cells
        (src / "lessons" / f"{lesson.name}.ipynb").write_text(json.dumps(nb, indent=1))


def sphinx(src, html, execute=(), cache=None, **run):
    """Sphinx with the course's settings, from the staged pages in ``src`` to ``html``: the finished process.
    Any warning fails it."""
    env = dict(os.environ, COURSE_SITE_EXECUTE=" ".join(execute), COURSE_SITE_SRC=str(src),
               COURSE_SITE_CACHE=str(cache or Path(html).parent / "cache"))
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-c", str(REPO / "docs"), str(src), str(html)], env=env, **run)


def build(out, execute=(), **run):
    """Stage and build the site in ``out``: the finished Sphinx process."""
    out = Path(out).resolve()
    stage(out / "src")
    return sphinx(out / "src", out / "html", execute, **run)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--execute", nargs="*", default=[], help="lessons to run for their outputs, or all")
    parser.add_argument("--out", default=str(REPO / "build" / "site"), help="folder for the staged pages and the site")
    args = parser.parse_args(argv)
    proc = build(args.out, args.execute)
    if proc.returncode == 0:
        print(f"site: {Path(args.out).resolve() / 'html' / 'index.html'}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
