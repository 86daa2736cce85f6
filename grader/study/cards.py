"""Flashcards as an ipywidget: level, front and back, reveal by click or key.

Decks are data: ``grader/content/cards/<topic>.json``, a list of cards each with
``level`` (beginner, intermediate, advanced, expert), ``front`` and ``back``.
"""

import random
from pathlib import Path

import ipywidgets as w

from .content import HERE, LEVELS, load_entries

CARD_FIELDS = {"level": str, "front": str, "back": str}


def load_deck(topic_or_path):
    """The cards of a topic name (``"data_parallel"``) or a deck file path.

    >>> load_deck("foundations")[0]["level"] in LEVELS
    True
    """
    path = Path(topic_or_path)
    if path.suffix != ".json":
        path = HERE / "cards" / f"{topic_or_path}.json"
    return load_entries(path, "cards", CARD_FIELDS)


class Flashcards:
    """A deck shown one card at a time.

    Click *Reveal* (or type ``f`` in the key box) to flip; ``n`` and ``p`` move on
    and back; *Shuffle* reorders; the level menu filters.

    >>> deck = Flashcards(load_deck("foundations"))
    >>> deck.flip(); deck.revealed
    True
    """

    def __init__(self, cards, seed=None):
        self.all_cards = list(cards)
        self.cards = list(self.all_cards)
        self.index = 0
        self.revealed = False
        self._rng = random.Random(seed)

        self.level = w.Dropdown(options=["all levels", *LEVELS], description="Level")
        self.counter = w.Label()
        self.face = w.HTML()
        self.reveal_button = w.Button(description="Reveal", button_style="info")
        self.prev_button = w.Button(description="◀ Previous")
        self.next_button = w.Button(description="Next ▶")
        self.shuffle_button = w.Button(description="Shuffle")
        self.keys = w.Text(placeholder="click here, then f = flip, n = next, p = previous",
                           layout=w.Layout(width="24em"))
        for widget, css in [(self.face, "card-face"), (self.reveal_button, "card-reveal"),
                            (self.next_button, "card-next"), (self.prev_button, "card-prev"),
                            (self.keys, "card-keys"), (self.counter, "card-counter")]:
            widget.add_class(css)

        self.reveal_button.on_click(lambda _: self.flip())
        self.next_button.on_click(lambda _: self.move(1))
        self.prev_button.on_click(lambda _: self.move(-1))
        self.shuffle_button.on_click(lambda _: self.shuffle())
        self.level.observe(lambda ch: self.filter(ch["new"]), names="value")
        self.keys.observe(self._on_key, names="value")

        self.widget = w.VBox([
            w.HBox([self.level, self.counter]),
            self.face,
            w.HBox([self.prev_button, self.reveal_button, self.next_button, self.shuffle_button]),
            self.keys,
        ])
        self._render()

    @property
    def card(self):
        return self.cards[self.index] if self.cards else None

    def flip(self):
        self.revealed = not self.revealed
        self._render()

    def move(self, step):
        if self.cards:
            self.index = (self.index + step) % len(self.cards)
        self.revealed = False
        self._render()

    def shuffle(self):
        self._rng.shuffle(self.cards)
        self.index, self.revealed = 0, False
        self._render()

    def filter(self, level):
        wanted = None if level == "all levels" else level
        self.cards = [c for c in self.all_cards if wanted in (None, c["level"])]
        self.index, self.revealed = 0, False
        self._render()

    def _on_key(self, change):
        typed = change["new"]
        if not typed:
            return
        action = {"f": self.flip, " ": self.flip, "n": lambda: self.move(1),
                  "p": lambda: self.move(-1)}.get(typed[-1].lower())
        self.keys.value = ""
        if action:
            action()

    def _render(self):
        card = self.card
        if card is None:
            self.counter.value = "no cards at this level"
            self.face.value = ""
            return
        self.counter.value = f"card {self.index + 1} of {len(self.cards)}"
        side = card["back"] if self.revealed else card["front"]
        label = "answer" if self.revealed else "question"
        colour = "#e8f5e9" if self.revealed else "#e3f2fd"
        self.face.value = (
            f'<div style="border:1px solid #999;border-radius:8px;padding:12px;'
            f'background:{colour};min-height:5em">'
            f'<small><b>{card["level"]}</b> · {label}</small><p>{side}</p></div>')
        self.reveal_button.description = "Hide" if self.revealed else "Reveal"

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def show_cards(topic, level=None, seed=None):
    """A :class:`Flashcards` widget for a topic, optionally one level only.

    >>> show_cards("data_parallel", level="beginner").level.value
    'beginner'
    """
    deck = Flashcards(load_deck(topic), seed=seed)
    if level:
        deck.level.value = level
    return deck
