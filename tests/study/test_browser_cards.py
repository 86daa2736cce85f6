"""A flashcard deck in JupyterLab takes keys only while it has the keyboard focus."""

import pytest

from browser import ARTIFACTS, browser_page, notebook, open_notebook, plain, start_lab

pytestmark = [pytest.mark.browser, pytest.mark.slow]
CARDS = notebook("from grader.study import show_cards", 'show_cards("ddp")', "")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from start_lab(tmp_path_factory.mktemp("lab"), {"cards.ipynb": CARDS})


def test_keys_reach_the_deck_only_while_it_has_the_focus(lab):
    from playwright.sync_api import expect

    from grader.content import load

    expect.set_options(timeout=30_000)
    deck = load("cards", "ddp")
    with browser_page() as page:
        open_notebook(page, lab, "cards.ipynb", until=".card-face")
        face, counter = page.locator(".card-face").first, page.locator(".card-counter").first
        expect(face).to_contain_text(plain(deck[0]["front"]))

        # Typing in a cell with the pointer over the deck: the text reaches the cell, not the deck.
        editor = page.locator(".jp-CodeCell .cm-content").last
        editor.click()
        page.locator(".card-deck").first.hover()
        page.keyboard.type("x = 1 2 3 4")
        expect(editor).to_have_text("x = 1 2 3 4")
        expect(face).to_contain_text(plain(deck[0]["front"]))
        expect(counter).to_have_text("card 1 of " + str(len(deck)))
        assert page.evaluate("document.activeElement.closest('.card-deck') === null")
        page.screenshot(path=str(ARTIFACTS / "cards_typing_over_the_deck.png"))

        # A click gives the deck the focus (a ring shows it): space flips, → moves, 3 rates.
        face.click()
        assert page.evaluate("document.activeElement.closest('.card-deck') !== null")
        expect(page.locator(".card-keys-on").first).to_be_visible()
        # The ring is drawn inside the deck, so the output area around it clips none of it.
        assert page.evaluate("(s => parseFloat(s.outlineOffset) + parseFloat(s.outlineWidth))"
                             "(getComputedStyle(document.activeElement.closest('.card-deck')))") <= 0
        page.keyboard.press("Space")
        expect(face).to_contain_text(plain(deck[0]["back"]))
        expect(face).to_contain_text(plain(deck[0]["front"]))  # revealed, the question stays above its answer
        page.screenshot(path=str(ARTIFACTS / "cards_focused_deck.png"))
        page.keyboard.press("ArrowRight")
        expect(face).to_contain_text(plain(deck[1]["front"]))
        page.keyboard.press("Space")
        page.keyboard.press("3")
        expect(page.locator(".card-status").first).to_contain_text("Good: that card comes back")
        expect(face).to_contain_text(plain(deck[2]["front"]))
        # The keys it used never reached JupyterLab: the notebook still has its three cells.
        expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(3)

        # Escape gives the focus back: space no longer flips the card.
        page.keyboard.press("Escape")
        assert page.evaluate("document.activeElement.closest('.card-deck') === null")
        expect(page.locator(".card-keys-off").first).to_be_visible()
        page.keyboard.press("Space")
        expect(face).to_contain_text(plain(deck[2]["front"]))
        expect(face).not_to_contain_text(plain(deck[2]["back"]))

        # A keyboard-only student reaches the deck with Tab: it comes just before its own controls.
        page.locator(".card-deck select").first.focus()
        page.keyboard.press("Shift+Tab")
        assert page.evaluate("document.activeElement.classList.contains('card-deck')")
        page.keyboard.press("Space")
        expect(face).to_contain_text(plain(deck[2]["back"]))
        # JupyterLab's news pop-up is off for the course: nothing covers the widgets.
        expect(page.get_by_text("Jupyter news")).to_have_count(0)
