"""JupyterLab in headless Chromium: a student works through lesson 01's review and the study widgets."""

import json

import pytest

from browser import ARTIFACTS, REPO, browser_page, notebook, open_notebook, plain, start_lab

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LESSON = "01_data_parallel"
STUDY = notebook("from grader.study import show_cards, show_explain, show_timed",
                 'show_cards("ddp")',
                 'show_timed("ddp")',
                 'show_timed("foundations", seconds=3)',
                 'show_explain("ddp")')
# The explain box and a quiz, then a cell that keeps the kernel busy while the learner answers.
BUSY = notebook('from grader.study import show_explain, show_quiz\nshow_explain("ddp")', 'show_quiz("ddp")',
                "import time; time.sleep(10)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from start_lab(tmp_path_factory.mktemp("lab"), {"study.ipynb": STUDY, "busy.ipynb": BUSY})


def test_student_flips_a_card_and_answers_a_question(lab):
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)  # the lesson runs its measurements before the widgets
    deck = json.loads((REPO / "grader/content/cards/data_parallel.json").read_text())["cards"]
    question = json.loads((REPO / "grader/content/quiz/data_parallel.json").read_text())["questions"][0]

    with browser_page() as page:
        # Run All stops at the first unsolved challenge, after the review widgets.
        open_notebook(page, lab, f"release/{LESSON}/{LESSON}.ipynb", until=".quiz-check")

        face = page.locator(".card-face").first
        expect(face).to_contain_text(plain(deck[0]["front"]))
        page.locator(".card-reveal").first.click()
        expect(face).to_contain_text(plain(deck[0]["back"]))

        # Once the deck has the focus (a click on the card): the right arrow moves on, space flips.
        face.click()
        page.keyboard.press("ArrowRight")
        expect(face).to_contain_text(plain(deck[1]["front"]))
        page.keyboard.press("Space")
        expect(face).to_contain_text(plain(deck[1]["back"]))

        # Every choice reads as the course wrote it: code as code, no literal tag or entity.
        labels = page.locator(".choice-list label").all_inner_texts()
        assert labels and not [t for t in labels if "<" in t or "&lt;" in t or "&amp;" in t], labels
        assert page.locator(".choice-list label code").count() >= 5  # lesson 01's quiz has five
        right = question["choices"][question["answer"]]
        page.locator(".choice-list").first.get_by_text(plain(right), exact=True).click()
        page.locator(".quiz-check").first.click()
        expect(page.locator(".quiz-feedback").first).to_contain_text("Right")
        expect(page.locator(".quiz-score").first).to_contain_text("Score: 1 /")

        page.locator(".quiz-feedback").first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "lesson01_widgets.png"))
    assert (ARTIFACTS / "lesson01_widgets.png").stat().st_size > 10_000


def test_self_learner_rates_a_card_earns_a_badge_and_explains(lab):
    from playwright.sync_api import expect

    from grader.content import load
    from grader.study.progress import Progress

    progress = lab[2]
    expect.set_options(timeout=30_000)
    deck, timed, prompt = load("cards", "ddp"), load("timed", "ddp"), load("explain", "ddp")[0]

    with browser_page() as page:
        open_notebook(page, lab, "study.ipynb", until=".explain-check")  # only this notebook open

        # A card: space flips it, key 3 rates it Good and the next card comes up.
        face = page.locator(".card-face").first
        expect(face).to_contain_text(plain(deck[0]["front"]))
        face.click()  # the deck takes keys once it has the focus
        page.keyboard.press("Space")
        expect(face).to_contain_text(plain(deck[0]["back"]))
        page.keyboard.press("3")
        expect(page.locator(".card-status").first).to_contain_text("Good: that card comes back in 10 minutes")
        expect(face).to_contain_text(plain(deck[1]["front"]))
        page.screenshot(path=str(ARTIFACTS / "study_card_rated.png"))

        # The ddp set: a wrong answer shows why and "1 left"; then all five right earn the badge.
        ddp = page.locator(".widget-vbox", has=page.locator(".timed-start")).filter(
            has_text=timed["badge"]).last
        for i, problem in enumerate(timed["problems"]):
            ddp.locator(".timed-start").click()
            expect(ddp.locator(".timed-clock")).to_contain_text("attempt")
            expect(ddp.locator(".timed-clock")).not_to_contain_text("not started")
            if i == 0:
                wrong = problem["choices"][(problem["answer"] + 1) % len(problem["choices"])]
                ddp.locator(".choice-list").get_by_text(wrong, exact=True).click()
                ddp.locator(".timed-submit").click()
                expect(ddp.locator(".timed-feedback")).to_contain_text("1 attempt left.")
                expect(ddp.locator(".timed-feedback")).to_contain_text(plain(problem["hint"]))
                expect(ddp.locator(".timed-feedback")).not_to_contain_text(plain(problem["explanation"]))
                page.screenshot(path=str(ARTIFACTS / "study_timed_wrong.png"))
            right = problem["choices"][problem["answer"]]
            ddp.locator(".choice-list").get_by_text(right, exact=True).click()
            ddp.locator(".timed-submit").click()
            expect(ddp.locator(".timed-feedback")).to_contain_text("Right")
            if i < 4:
                ddp.locator(".timed-next").click()
        expect(ddp.locator(".timed-badge")).to_contain_text(f"Badge earned: {timed['badge']}")
        expect(ddp.locator(".timed-summary")).to_contain_text("Set finished: 5 of 5 solved")
        page.screenshot(path=str(ARTIFACTS / "study_badge.png"))

        # The foundations set with 3 s per problem, practice: the countdown runs out by itself.
        short = page.locator(".widget-vbox", has=page.locator(".timed-start")).filter(
            has_text="Practice on a clock of your choosing: no badge. 0:03").last
        short.locator(".timed-start").click()
        expect(short.locator(".timed-feedback")).to_contain_text("Time's up", timeout=15_000)
        expect(short.locator(".timed-clock")).to_contain_text("Closed · Time's up")
        page.screenshot(path=str(ARTIFACTS / "study_time_up.png"))
        # Every problem runs out of time: the set ends with its summary, the badge not earned.
        for _ in range(4):
            short.locator(".timed-next").click()
            short.locator(".timed-start").click()
            expect(short.locator(".timed-feedback")).to_contain_text("Time's up", timeout=15_000)
        expect(short.locator(".timed-summary")).to_contain_text("Set finished: 0 of 5 solved")
        expect(short.locator(".timed-summary")).to_contain_text("Badge not earned")
        short.locator(".timed-summary").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "study_set_not_earned.png"))

        # Explain: a denial gets no concept ticked; then the learner marks a partial answer.
        text, check = page.locator(".explain-text textarea").first, page.locator(".explain-check").first
        result, ticks = page.locator(".explain-result").first, page.locator(".explain-judge").first.locator("input")
        text.fill("DDP does NOT use multiple processes and needs no DistributedSampler; gradients are "
                  "never all-reduced or averaged, and they drift apart and are never identical.")
        check.click()
        expect(result).to_contain_text("Suggested from your words: none")
        expect(ticks).to_have_count(len(prompt["concepts"]))
        assert not any(ticks.nth(i).is_checked() for i in range(len(prompt["concepts"])))
        first = prompt["concepts"][0]["phrases"][0]
        text.fill(f"My answer: {first}.")
        check.click()
        expect(result).to_contain_text("A model answer")
        expect(result).to_contain_text(f"Suggested from your words: {prompt['concepts'][0]['name']}")
        expect(ticks.first).to_be_checked()
        page.locator(".explain-save").first.click()
        expect(page.locator(".explain-saved").first).to_contain_text(
            f"1 of {len(prompt['concepts'])} concepts by your own marking")
        result.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "study_explain.png"))
    saved = Progress(progress).read()  # the file the lab's kernels write
    assert deck[0]["id"] in saved["cards"] and "ddp" in saved["badges"]
    assert saved["explain"][prompt["id"]]["covered"] == [prompt["concepts"][0]["name"]]


def test_answers_given_while_the_kernel_is_busy_are_judged_as_given(lab):
    """Typing, a change of mind and the Check clicks, all while the kernel sleeps: each check
    judges what the page showed when it was clicked.

    (The widgets hold back a state change behind the one before, a click is sent at once: a
    keystroke-at-a-time box was judged on its first letter, one that sent its text on leaving
    the box judged a second check on the first text, a changed choice on the first one.)
    """
    from playwright.sync_api import expect

    from grader.content import load

    concept, later = load("explain", "ddp")[0]["concepts"][:2]
    question = load("quiz", "ddp")[0]
    right = question["choices"][question["answer"]]
    wrong = question["choices"][(question["answer"] + 1) % len(question["choices"])]
    with browser_page() as page:
        open_notebook(page, lab, "busy.ipynb", until=".quiz-check")  # the sleep begins once both show
        text = page.locator(".explain-text textarea").first
        text.press_sequentially(f"My answer: {concept['phrases'][0]}.", delay=20)
        page.locator(".explain-check").first.click()
        text.press_sequentially(f" And {later['phrases'][0]}.", delay=20)  # more, and a second check
        page.locator(".explain-check").first.click()
        choices = page.locator(".choice-list").first
        choices.get_by_text(plain(wrong), exact=True).click()
        choices.get_by_text(plain(right), exact=True).click()
        page.locator(".quiz-check").first.click()
        expect(page.locator(".explain-result").first).to_contain_text(
            f"Suggested from your words: {concept['name']}, {later['name']}", timeout=60_000)
        expect(page.locator(".quiz-feedback").first).to_contain_text("Right", timeout=60_000)
