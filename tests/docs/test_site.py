"""The course site (`make docs`): built offline with no warning, and read in headless Chromium."""

import os
import sys

import pytest

from browser import ARTIFACTS, browser_page, CHROMIUM
from conftest import REPO, serve
from grader.content import COURSE_ORDER

sys.path.insert(0, str(REPO / "docs"))
import build_site  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The site built as `make docs` builds it, with lesson 00 run for its outputs; served on loopback."""
    out = tmp_path_factory.mktemp("site")
    proc = build_site.build(out, ["00_foundations"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Not one warning from Sphinx (the kernel that runs lesson 00 logs its own, "[IPKernelApp] WARNING |")
    assert not [line for line in proc.stderr.splitlines() if "WARNING:" in line or "ERROR:" in line], proc.stderr
    with serve(out / "html") as url:
        yield out, url


def test_a_broken_link_or_cross_reference_fails_the_build(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "index.md").write_text("# Home\n\nSee [the guide](no-such-guide.md) and [a section](#no-such-section).\n")
    proc = build_site.sphinx(src, tmp_path / "html", capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "no-such-guide.md" in proc.stderr and "no-such-section" in proc.stderr, proc.stderr


def test_every_page_has_its_place_and_reads_offline(built):
    out, _ = built
    html = out / "html"
    pages = {p.relative_to(html).as_posix() for p in html.rglob("*.html")}
    lessons = sorted(p.name for p in (REPO / "release").iterdir())
    sheets = [f"{i:02d}_{topic}" for i, topic in enumerate(COURSE_ORDER)]  # in the lessons' order
    assert {"index.html", "student.html", "instructor.html", "hub-admin.html", "self-learner.html",
            "contributor.html", "measured.html", "gpu/README.html"} <= pages
    assert {f"lessons/{name}.html" for name in lessons} | {f"cheatsheets/{name}.html" for name in sheets} <= pages
    # Nothing the pages load comes from the network (MathJax included): a link to read is fine.
    for page in pages:
        text = (html / page).read_text()
        assert 'src="http' not in text and '<link href="http' not in text and 'rel="stylesheet" href="http' not in text, page


@pytest.mark.browser
def test_a_reader_finds_a_guide_and_a_lesson_with_its_code_figure_and_maths(built):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no {CHROMIUM}: install Debian's chromium (make browser) to run browser tests")
    _, url = built
    with browser_page(width=1300, height=900) as page:
        page.goto(f"{url}/index.html")
        assert page.title().startswith("Multi-GPU Training with PyTorch")
        nav = page.locator("nav.bd-links")
        for caption in ("Guides", "Lessons", "Cheat sheets", "Measurements"):
            assert nav.get_by_text(caption, exact=True).is_visible(), caption
        page.screenshot(path=str(ARTIFACTS / "site_home.png"))

        # The instructor's guide from the home page, its threat table on the page
        page.get_by_role("link", name="For instructors").first.click()
        assert page.locator("article h1").inner_text().startswith("For instructors")
        threats = page.locator("table").filter(has_text="Threat")
        assert threats.count() == 1 and threats.locator("tbody tr").count() >= 5
        page.locator("article h2").filter(has_text="What grading guarantees").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "site_instructor.png"))

        # Lesson 00 from the navigation: its code, its measured figure, its maths typeset
        nav = page.locator("nav.bd-links")
        nav.get_by_role("link", name="00 · Foundations: devices, honest timing, speedup").click()
        assert page.locator("article h1").first.inner_text().startswith("00 · Foundations")
        assert page.locator("div.cell_input pre").count() >= 10
        figure = page.locator("div.cell_output img").first
        figure.scroll_into_view_if_needed()
        assert figure.evaluate("img => img.complete && img.naturalWidth > 100")
        page.wait_for_function("() => document.querySelectorAll('mjx-container svg').length >= 4")
        page.screenshot(path=str(ARTIFACTS / "site_lesson.png"))
        # An unanswered challenge shows its stub, never a traceback
        assert page.get_by_text("raise NotImplementedError()").count() >= 1
        assert page.get_by_text("Traceback").count() == 0
        # A widget's cell says where it works instead of an empty box
        assert page.get_by_text("An interactive widget: it works in JupyterLab").count() >= 4
