"""Helpers for the browser tests: JupyterLab over a scratch copy of the course, driven by
Playwright in Debian's headless Chromium."""

import contextlib
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

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = REPO / "tests" / "artifacts"
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
PROMPTS = ".jp-CodeCell .jp-InputPrompt"
# A run has stalled when the kernel is idle with no cell queued.
STALLED = f"""() => document.querySelector("{IDLE}") !== null
    && ![...document.querySelectorAll("{PROMPTS}")].some(prompt => prompt.textContent.includes("[*]"))"""


def start_lab(root, notebooks=None):
    """Start JupyterLab over a scratch copy of release/ in ``root`` (runs never touch the repo),
    with ``notebooks`` ({name: notebook JSON}) beside it; yield (url, token, the kernels'
    progress file), then stop it.

    A test module makes it its fixture::

        @pytest.fixture(scope="module")
        def lab(tmp_path_factory):
            yield from start_lab(tmp_path_factory.mktemp("lab"), {"study.ipynb": notebook(...)})
    """
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no {CHROMIUM}: install Debian's chromium (make browser) to run browser tests")
    shutil.copytree(REPO / "release", root / "release")
    for name, nb in (notebooks or {}).items():
        (root / name).write_text(json.dumps(nb))
    # The dialog's "Always start the preferred kernel", ticked: a notebook opened while the machine is
    # busy starts its own kernel instead of asking which.
    tracker = root / ".settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"autoStartDefaultKernel": True}))
    port, token = free_port(), "course-test-token"
    # A progress file of its own: what one test module's learner did never shows in another's.
    env = dict(activated(), JUPYTERLAB_SETTINGS_DIR=str(root / ".settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(root / ".workspaces"),
               COURSE_PROGRESS=str(root / "progress.json"))
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
    yield url, token, root / "progress.json"
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


def open_notebook(page, lab, path, until):
    """Open the notebook at ``path`` (under the lab's root) alone in a fresh workspace, Run All and
    wait until the element ``until`` (a CSS selector) shows.

    Its kernel is started first, through the server's API, so that JupyterLab connects the
    notebook to it instead of choosing one while it loads. On a busy machine it may still start
    one of its own, late, even after Run All: silently, which empties the run's queue (``run_all``
    runs again), or asking which kernel, a dialog answered for as long as the page lives with the
    kernel started here, noted in ``tests/artifacts/reruns.txt``, and followed by Run All.
    """
    url, token, _ = lab
    name = path.rsplit("/", 1)[-1]
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    body = json.dumps({"path": path, "type": "notebook", "name": name, "kernel": {"name": "python3"}})
    started = urllib.request.Request(f"{url}/api/sessions", data=body.encode(), headers=headers, method="POST")
    urllib.request.urlopen(started, timeout=60).close()
    idle = page.locator(IDLE).first

    def choose_kernel(found):  # the kernel started above (its default there is "No Kernel")
        note(f"dialog: {found.inner_text().strip()}")
        own = [o for o in found.locator("option").all_inner_texts() if o.startswith(f"{name} (")]
        found.locator("select").select_option(label=(own or ["Python 3 (ipykernel)"])[0])
        found.locator(".jp-mod-accept").click(timeout=15_000)
        idle.wait_for()  # the kernel it chose is up before anything runs
        click_run_all(page)

    page.add_locator_handler(page.locator(".jp-Dialog", has_text="Select kernel for"), choose_kernel,
                             no_wait_after=True)
    page.goto(f"{url}/lab/tree/{path}?reset&token={token}")
    page.locator(".jp-Notebook").first.wait_for()
    idle.wait_for()
    run_all(page, until, lab)


def click_run_all(page):
    """Run > Run All Cells, through the menu as a student would."""
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def run_all(page, until, lab, stall=10, runs=3, limit=300):
    """Run All Cells until the element ``until`` shows; again when the run stalls before it, up
    to ``runs`` runs within ``limit`` seconds.

    A run has stalled when the kernel has stayed idle with no cell queued for ``stall`` seconds:
    the click came while the freshly opened notebook still connected its kernel, or the queue was
    emptied under the run (it is, when the kernel changes or restarts). Each repeat is noted in
    ``tests/artifacts/reruns.txt`` with the cells' prompts and the kernels started so far; when
    none helps, the error shows the prompts and the end of the lab's log.
    """
    from playwright.sync_api import expect

    target, prompts = page.locator(until).first, page.locator(PROMPTS)
    log = lab[2].parent / "lab.log"
    deadline = time.monotonic() + limit
    for run in range(runs):
        click_run_all(page)
        since = time.monotonic()
        while time.monotonic() - since < stall and time.monotonic() < deadline:
            try:  # an assertion that waits also answers a dialog that came up meanwhile
                expect(target).to_be_visible(timeout=2_000)
                return
            except AssertionError:
                if not page.evaluate(STALLED):
                    since = time.monotonic()
        note(f"run {run + 1} stalled before {until} ({log.read_text().count('Kernel started')} kernels "
             f"started so far); prompts: {' '.join(prompts.all_inner_texts())}")
    raise AssertionError(f"Run All never reached {until} ({runs} runs, {limit} s). Prompts: "
                         f"{' '.join(prompts.all_inner_texts())}\n"
                         f"The lab's log ends:\n{log.read_text()[-3000:]}")


def note(text):
    """A line in ``tests/artifacts/reruns.txt``: what the browser tests did to get a run through."""
    with open(ARTIFACTS / "reruns.txt", "a") as log:
        log.write(f"{time.strftime('%H:%M:%S')} {text.replace(chr(10), ' | ')[:400]}\n")


def notebook(*sources):
    """A notebook whose code cells are ``sources``, in order, run by the course's kernel."""
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                    "language": "python"}, "language_info": {"name": "python"}},
        "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [],
                   "execution_count": None, "source": source} for i, source in enumerate(sources)],
    }


@contextlib.contextmanager
def browser_page(width=1400, height=1000):
    """A fresh headless Chromium page; the browser closes when the block ends."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def plain(html):
    """The text a browser shows for a snippet of card HTML."""
    return re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">")[:60]
