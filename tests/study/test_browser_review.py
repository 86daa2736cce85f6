"""A self-learner's review session and timed set in JupyterLab, across a kernel restart."""

import pytest

from browser import ARTIFACTS, browser_page, notebook, open_notebook, plain, start_lab

pytestmark = [pytest.mark.browser, pytest.mark.slow]
REVIEW = notebook("from grader.study import review_due, show_timed",
                  'review_due(["data_parallel"], new=3)',
                  'show_timed("foundations", seconds=3)',
                  'show_timed("foundations")',
                  'show_timed("ddp")')


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from start_lab(tmp_path_factory.mktemp("lab"), {"review.ipynb": REVIEW})


def test_again_comes_back_in_the_session_and_attempts_survive_a_restart(lab):
    from playwright.sync_api import expect

    from grader.content import load
    from grader.study.progress import Progress

    progress = lab[2]
    expect.set_options(timeout=30_000)
    deck, timed = load("cards", "data_parallel"), load("timed", "ddp")
    with browser_page() as page:
        open_notebook(page, lab, "review.ipynb", until=".timed-start")
        face, counter = page.locator(".card-face").first, page.locator(".card-counter").first
        expect(page.get_by_text("Today's review: 0 due, 3 new")).to_be_visible()
        expect(counter).to_contain_text("3 left today")

        # Again: the card goes to the back of the session, not out of it.
        face.click()
        page.keyboard.press("Space")
        expect(page.locator(".card-rate-again").first).to_contain_text("Again · 1 minute")
        page.keyboard.press("1")
        expect(page.locator(".card-status").first).to_contain_text("comes back later in this session")
        expect(counter).to_contain_text("3 left today")
        for card in deck[1:3]:  # Good on the other two: they leave, the Again card is what is left
            expect(face).to_contain_text(plain(card["front"]))
            page.keyboard.press("Space")
            page.keyboard.press("3")
        expect(counter).to_contain_text("1 left today")
        expect(face).to_contain_text(plain(deck[0]["front"]))
        page.screenshot(path=str(ARTIFACTS / "review_again_comes_back.png"))

        # Practice on a 3-second clock: the first problem runs out of time and shows its answer.
        sets = page.locator(".widget-vbox", has=page.locator(".timed-start"))
        practice = sets.nth(0)
        expect(practice).to_contain_text("Practice on a clock of your choosing: no badge. 0:03")
        practice.locator(".timed-start").click()
        expect(practice.locator(".timed-feedback")).to_contain_text("Time's up", timeout=10_000)

        # A wrong answer in the timed set uses an attempt; a restarted kernel keeps it.
        problem = timed["problems"][0]
        wrong = problem["choices"][(problem["answer"] + 1) % len(problem["choices"])]
        ddp = page.locator(".widget-vbox", has=page.locator(".timed-start")).last
        ddp.locator(".timed-start").click()
        ddp.locator(".choice-list").get_by_text(wrong, exact=True).click()
        ddp.locator(".timed-submit").click()
        expect(ddp.locator(".timed-clock")).to_contain_text("1 attempt left")

        page.get_by_role("menuitem", name="Kernel", exact=True).click()
        page.get_by_role("menuitem", name="Restart Kernel and Run All Cells…").click()
        page.locator(".jp-Dialog").get_by_role("button", name="Confirm Kernel Restart").click()
        # The sets the new kernel drew, not the old ones' views, left on the page disconnected until replaced.
        fresh = ":not(.jupyter-widgets-disconnected)"
        ddp = page.locator(".widget-vbox", has=page.locator(".timed-start")).last
        clock = ddp.locator(".timed-clock" + fresh)
        expect(clock).to_contain_text("1 attempt left", timeout=60_000)
        expect(ddp.locator(".timed-start" + fresh)).to_be_disabled()
        expect(clock).not_to_have_text(clock.inner_text(), timeout=5_000)  # the countdown runs on after it
        # The practised problem, its answer shown, stays closed on the set's own clock: no badge from it.
        full = sets.nth(1)
        expect(full.locator(".timed-clock" + fresh)).to_contain_text("Closed · Time's up")
        expect(full.locator(".timed-start" + fresh)).to_be_disabled()
        # The session, rebuilt from the saved ratings: three new cards met today, none due yet.
        expect(page.get_by_text("new cards today: 3 of 20")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "review_after_restart.png"))
    saved = Progress(progress).read()
    assert saved["timed"]["ddp"][0]["left"] == 1 and len(saved["new_today"]["ids"]) == 3
