"""The README does its job in one screenful or two; each audience's guide is in docs/, and every link resolves."""

import re

from conftest import REPO

GUIDES = ["student", "instructor", "hub-admin", "self-learner", "contributor"]
# The README's sections before it was cut down to size: each must still have a home.
OLD_SECTIONS = ["Two commands", "Lessons", "For students", "For instructors", "For self-learners",
                "Running ranks from a notebook: `grader.launch`", "On a GPU JupyterHub",
                "Proving a GPU machine: `make gpu-check`", "Layout", "Adding a challenge", "Tests", "Measured here",
                "Parallel autograde", "Shards", "What grading guarantees", "Grading a class on the hub",
                "Where the tests live", "The course as a hub installs it"]


def pages():
    """The README and every page in docs/, by path."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def headings(path):
    """A markdown page's headings, as written (fenced code skipped)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return [m[1].strip() for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)]


def slug(heading):
    """The anchor GitHub and MyST give a heading.

    >>> slug("Proving a GPU machine: `make gpu-check`")
    'proving-a-gpu-machine-make-gpu-check'
    """
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_the_readme_is_short_and_its_first_screen_leads_to_every_guide():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 150, len(lines)
    first_screen = "\n".join(lines[:40])  # what a reader sees before scrolling
    for guide in GUIDES:
        assert f"](docs/{guide}.md)" in first_screen, guide
    assert "make lab" in first_screen and "make test" in first_screen


def test_every_section_the_readme_had_has_a_home():
    found = {h for page in pages() for h in headings(page)}
    assert [s for s in OLD_SECTIONS if s not in found] == []


def test_every_guide_opens_with_its_title_and_says_what_it_covers():
    for guide in GUIDES:
        text = (REPO / "docs" / f"{guide}.md").read_text()
        title, blank, first = text.splitlines()[:3]
        assert title.startswith("# ") and blank == "" and first, guide


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in pages():
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address: the machines here cannot check it
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and anchor not in {slug(h) for h in headings(dest)}:
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []
