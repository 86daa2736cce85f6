"""JupyterLab in headless Chromium: a student opens lesson 01, flips a card, answers the quiz."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import REPO, activated, free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
LESSON = "01_data_parallel"
ARTIFACTS = REPO / "tests" / "artifacts"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server over a scratch copy of release/, so runs never touch the repo."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no {CHROMIUM}: install Debian's chromium (make browser) to run browser tests")
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(REPO / "release", root / "release")
    port, token = free_port(), "course-test-token"
    env = dict(activated(), JUPYTERLAB_SETTINGS_DIR=str(root / ".settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(root / ".workspaces"))
    log = open(root / "lab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
         "--ip=127.0.0.1", f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"JupyterLab did not start:\n{(root / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
    yield url, token
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


def test_student_flips_a_card_and_answers_a_question(lab):
    from playwright.sync_api import expect, sync_playwright

    url, token = lab
    expect.set_options(timeout=90_000)  # the lesson runs its measurements before the widgets
    deck = json.loads((REPO / "grader/content/cards/data_parallel.json").read_text())["cards"]
    question = json.loads((REPO / "grader/content/quiz/data_parallel.json").read_text())["questions"][0]
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{url}/lab/tree/release/{LESSON}/{LESSON}.ipynb?token={token}")
            page.locator(".jp-Notebook").first.wait_for()
            page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for()

            # Run All stops at the first unsolved challenge, after the review widgets.
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

            face = page.locator(".card-face").first
            expect(face).to_contain_text(plain(deck[0]["front"]))
            page.locator(".card-reveal").first.click()
            expect(face).to_contain_text(plain(deck[0]["back"]))

            # The key box: "n" moves to the next card, "f" flips it.
            keys = page.locator(".card-keys input").first
            keys.click()
            keys.press("n")
            expect(face).to_contain_text(plain(deck[1]["front"]))
            keys.press("f")
            expect(face).to_contain_text(plain(deck[1]["back"]))

            right = question["choices"][question["answer"]]
            page.locator(".widget-radio-box").first.get_by_text(plain(right), exact=True).click()
            page.locator(".quiz-check").first.click()
            expect(page.locator(".quiz-feedback").first).to_contain_text("Right")
            expect(page.locator(".quiz-score").first).to_contain_text("Score: 1 /")

            page.locator(".quiz-feedback").first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "lesson01_widgets.png"))
        finally:
            browser.close()
    assert (ARTIFACTS / "lesson01_widgets.png").stat().st_size > 10_000


def plain(html):
    """The text a browser shows for a snippet of card HTML."""
    return re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">")[:60]
