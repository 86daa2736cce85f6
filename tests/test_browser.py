"""JupyterLab in headless Chromium: a student works through lesson 01's review and the study widgets."""

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
    (root / "study.ipynb").write_text(json.dumps(STUDY_NOTEBOOK))
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


def run_all(page):
    """Run All Cells once the notebook's kernel is up; again if a click came too early.

    A click while the freshly opened notebook still connects its kernel can be lost: the
    first cell then shows no execution count, and the click is repeated.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.locator(".jp-Notebook").first.wait_for()
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for()
    first_prompt = page.locator(".jp-CodeCell .jp-InputPrompt").first
    for _ in range(3):
        dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
        if dialog.count():  # JupyterLab sometimes asks which kernel to start
            dialog.get_by_role("button", name="Select", exact=True).click()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            page.wait_for_function("el => /\\[(\\d+|\\*)\\]/.test(el.textContent)",
                                   arg=first_prompt.element_handle(), timeout=10_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError("Run All Cells never started the first cell")


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
            # Run All stops at the first unsolved challenge, after the review widgets.
            run_all(page)

            face = page.locator(".card-face").first
            expect(face).to_contain_text(plain(deck[0]["front"]))
            page.locator(".card-reveal").first.click()
            expect(face).to_contain_text(plain(deck[0]["back"]))

            # With the mouse over the deck: the right arrow moves on, space flips.
            page.locator(".card-deck").first.hover()
            page.keyboard.press("ArrowRight")
            expect(face).to_contain_text(plain(deck[1]["front"]))
            page.keyboard.press("Space")
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


STUDY_NOTEBOOK = {
    "nbformat": 4, "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
                 "language_info": {"name": "python"}},
    "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [], "execution_count": None,
               "source": source} for i, source in enumerate([
                   "from grader.study import show_cards, show_explain, show_timed",
                   'show_cards("ddp")',
                   'show_timed("ddp")',
                   'show_timed("foundations", seconds=3)',
                   'show_explain("ddp")'])],
}


def test_self_learner_rates_a_card_earns_a_badge_and_explains(lab):
    from playwright.sync_api import expect, sync_playwright

    from grader.study.cards import load_deck
    from grader.study.explain import load_prompts
    from grader.study.progress import Progress
    from grader.study.timed import load_set

    url, token = lab
    expect.set_options(timeout=30_000)
    deck, timed, prompt = load_deck("ddp"), load_set("ddp"), load_prompts("ddp")[0]
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{url}/lab/tree/study.ipynb?reset&token={token}")  # only this notebook open
            run_all(page)

            # A card: space flips it, key 3 rates it Good and the next card comes up.
            face = page.locator(".card-face").first
            expect(face).to_contain_text(plain(deck[0]["front"]))
            page.locator(".card-deck").first.hover()
            page.keyboard.press("Space")
            expect(face).to_contain_text(plain(deck[0]["back"]))
            page.keyboard.press("3")
            expect(page.locator(".card-status").first).to_contain_text("Good: this card comes back in 10 minutes")
            expect(face).to_contain_text(plain(deck[1]["front"]))
            page.screenshot(path=str(ARTIFACTS / "study_card_rated.png"))

            # The ddp set: a wrong answer shows why and "1 left"; then all five right earn the badge.
            ddp = page.locator(".widget-vbox", has=page.locator(".timed-start")).filter(
                has_text=timed["badge"]).last
            for i, problem in enumerate(timed["problems"]):
                ddp.locator(".timed-start").click()
                expect(ddp.locator(".timed-clock")).to_contain_text("remaining")
                if i == 0:
                    wrong = problem["choices"][(problem["answer"] + 1) % len(problem["choices"])]
                    ddp.locator(".widget-radio-box").get_by_text(wrong, exact=True).click()
                    ddp.locator(".timed-submit").click()
                    expect(ddp.locator(".timed-feedback")).to_contain_text("1 left.")
                    expect(ddp.locator(".timed-feedback")).to_contain_text(plain(problem["explanation"]))
                    page.screenshot(path=str(ARTIFACTS / "study_timed_wrong.png"))
                right = problem["choices"][problem["answer"]]
                ddp.locator(".widget-radio-box").get_by_text(right, exact=True).click()
                ddp.locator(".timed-submit").click()
                expect(ddp.locator(".timed-feedback")).to_contain_text("Right")
                if i < 4:
                    ddp.locator(".timed-next").click()
            expect(ddp.locator(".timed-badge")).to_contain_text(f"Badge earned: {timed['badge']}")
            page.screenshot(path=str(ARTIFACTS / "study_badge.png"))

            # The foundations set with 3 s per problem: the countdown runs out by itself.
            short = page.locator(".widget-vbox", has=page.locator(".timed-start")).filter(
                has_text=load_set("foundations")["badge"]).last
            short.locator(".timed-start").click()
            expect(short.locator(".timed-feedback")).to_contain_text("Time's up", timeout=15_000)
            expect(short.locator(".timed-clock")).to_contain_text("0:00")
            page.screenshot(path=str(ARTIFACTS / "study_time_up.png"))

            # Explain: a partial answer is scored "N of M concepts covered".
            first = prompt["concepts"][0]["phrases"][0]
            page.locator(".explain-text textarea").first.fill(f"My answer: {first}.")
            page.locator(".explain-check").first.click()
            result = page.locator(".explain-result").first
            expect(result).to_contain_text(f"of {len(prompt['concepts'])} concepts covered")
            expect(result).to_contain_text(f"Covered: {prompt['concepts'][0]['name']}")
            result.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "study_explain.png"))
        finally:
            browser.close()
    saved = Progress().read()  # the kernel shares this run's progress file
    assert deck[0]["id"] in saved["cards"] and "ddp" in saved["badges"]


def plain(html):
    """The text a browser shows for a snippet of card HTML."""
    return re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">")[:60]
