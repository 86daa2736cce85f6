"""Flashcards: reveal, rate and come back when they are due.

Decks are data: ``grader/content/cards/<topic>.json``, a list of cards each with an ``id``,
a ``level`` (beginner, intermediate, advanced, expert), a ``front`` and a ``back``.
After revealing a card, rating it (Again, Hard, Good, Easy) saves its next review date in
the progress file (:mod:`.schedule`, :mod:`.progress`). Once a deck has the keyboard focus
(click it, or Tab to it), keys work too: space flips, ← and → move, 1–4 rate, Escape leaves.
"""

import datetime
import html
import json
import random

import anywidget
import ipywidgets as w

from ..content import LEVELS, in_course_order, load, topics
from . import schedule
from .progress import Progress

KEYS = {" ": "flip", "ArrowRight": "next", "ArrowLeft": "previous",
        "1": "again", "2": "hard", "3": "good", "4": "easy"}


class DeckKeys(anywidget.AnyWidget):
    """Keys for the deck it sits in, only while that deck has the keyboard focus.

    The deck becomes focusable (a click or Tab focuses it, with a visible ring; Escape gives
    the focus back). The keys it uses go to the kernel and no further, so a JupyterLab
    shortcut never fires on them; the pointer over a deck changes nothing, and typing in a
    cell elsewhere never reaches the deck.
    """

    _esm = """
    const KEYS = KEYS_JSON;
    function render({ model, el }) {
      el.style.display = "none";
      const attach = () => {
        const deck = el.closest(".card-deck");
        if (!deck) { if (!el.isConnected) requestAnimationFrame(attach); return; }
        if (deck.dataset.deckKeys) return;
        deck.dataset.deckKeys = "on";
        deck.tabIndex = 0;
        deck.setAttribute("data-lm-suppress-shortcuts", "true");
        deck.setAttribute("aria-label", "Flashcards: space flips, arrows move, 1 to 4 rate, Escape leaves");
        deck.addEventListener("keydown", (e) => {
          if (e.target.closest("input, textarea, select, [contenteditable]")) return;
          if (e.key === "Escape") { deck.blur(); e.preventDefault(); e.stopPropagation(); return; }
          if (!KEYS.includes(e.key) || e.ctrlKey || e.metaKey || e.altKey) return;
          e.preventDefault();
          e.stopPropagation();
          model.send({ key: e.key });
        });
      };
      requestAnimationFrame(attach);
    }
    export default { render };
    """.replace("KEYS_JSON", json.dumps(list(KEYS)))
    _css = """
    .card-deck:focus { outline: 3px solid #1565c0 !important; outline-offset: -3px; border-radius: 4px; }
    .card-deck:not(:focus) .card-keys-on { display: none; }
    .card-deck:focus .card-keys-off { display: none; }
    """


def when_text(due, now):
    """A due date as a learner reads it.

    >>> t = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    >>> when_text(t + datetime.timedelta(minutes=10), t), when_text(t + datetime.timedelta(days=3), t)
    ('in 10 minutes', 'in 3 days (2026-01-04)')
    >>> when_text(t + datetime.timedelta(seconds=50), t), when_text(t + datetime.timedelta(hours=1), t)
    ('in 1 minute', 'in 1 hour')
    """
    seconds = (due - now).total_seconds()
    if seconds < 3600:
        minutes = max(1, round(seconds / 60))
        return f"in {minutes} minute{'s' * (minutes != 1)}"
    if seconds < 86400:
        hours = round(seconds / 3600)
        return f"in {hours} hour{'s' * (hours != 1)}"
    days = round(seconds / 86400)
    return f"in {days} day{'s' * (days != 1)} ({due.date().isoformat()})"


class Flashcards:
    """A deck shown one card at a time; rating a revealed card schedules it.

    ``session=True`` makes it a review session, as Anki's: a rated card leaves the queue, but
    one rated Again comes back in the same session, as soon as its learning step (a minute)
    is up, or when nothing else is left; the counter says how many are left,
    and the level filter only narrows what is shown (the session and its order stay).
    Each rating button shows the interval it would give. ``progress=None`` keeps nothing
    (ratings only move on); ``clock`` gives the time.

    >>> import tempfile, pathlib
    >>> store = Progress(pathlib.Path(tempfile.mkdtemp()) / "progress.json")
    >>> deck = Flashcards(load("cards", "foundations"), progress=store)
    >>> deck.rate("good") is None           # not revealed yet: nothing to rate
    True
    >>> deck.flip(); deck.rate("good")["state"]
    1
    >>> list(store.read()["cards"]) == [load("cards", "foundations")[0]["id"]]
    True
    """

    def __init__(self, cards, seed=None, progress=None, session=False, clock=schedule.now,
                 fuzz=True, title=""):
        self.queue = list(cards)  # what is left (a session shrinks it), in order
        self.waiting = {}  # card id: when a card rated Again in this session is due again
        self.cards = list(self.queue)  # what the level filter shows of it
        self.wanted = None
        self.index = 0
        self.revealed = False
        self.progress, self.session, self.clock, self.fuzz = progress, session, clock, fuzz
        self._rng = random.Random(seed)

        self.level = w.Dropdown(options=["all levels", *LEVELS], description="Level")
        self.counter = w.Label()
        self.face = w.HTML()
        self.reveal_button = w.Button(description="Reveal", button_style="info")
        self.prev_button = w.Button(description="◀ Previous")
        self.next_button = w.Button(description="Next ▶")
        self.shuffle_button = w.Button(description="Shuffle")
        self.rate_buttons = [w.Button(description=r.capitalize(), tooltip=f"key {i}")
                             for i, r in enumerate(schedule.RATINGS, 1)]
        self.status = w.HTML(progress.opening_notice() if progress is not None else "")
        for widget, css in [(self.face, "card-face"), (self.reveal_button, "card-reveal"),
                            (self.next_button, "card-next"), (self.prev_button, "card-prev"),
                            (self.counter, "card-counter"), (self.status, "card-status")]:
            widget.add_class(css)
        for rating, button in zip(schedule.RATINGS, self.rate_buttons):
            button.add_class(f"card-rate-{rating}")
            button.on_click(lambda _, r=rating: self.rate(r))

        self.reveal_button.on_click(lambda _: self.flip())
        self.next_button.on_click(lambda _: self.move(1))
        self.prev_button.on_click(lambda _: self.move(-1))
        self.shuffle_button.on_click(lambda _: self.shuffle())
        self.level.observe(lambda ch: self.filter(ch["new"]), names="value")

        self.keys = DeckKeys()
        self.keys.on_msg(lambda _, content, buffers: self.press(content.get("key", "")))
        self.widget = w.VBox([
            w.HTML(f"<b>{html.escape(title)}</b>") if title else w.HTML(),
            w.HBox([self.level, self.counter]),
            self.face,
            w.HBox([self.prev_button, self.reveal_button, self.next_button, self.shuffle_button]),
            w.HBox([w.Label("How well did you know it?"), *self.rate_buttons]),
            self.status,
            w.HTML("<small><span class='card-keys-off'>Click the deck (or Tab to it) to use keys: "
                   "</span><span class='card-keys-on'><b>Keys on</b>: </span><kbd>space</kbd> flips, "
                   "<kbd>←</kbd> <kbd>→</kbd> move, <kbd>1</kbd>–<kbd>4</kbd> rate, <kbd>Esc</kbd> "
                   "leaves the deck.</small>"),
            self.keys,
        ])
        self.widget.add_class("card-deck")
        self._render()

    @property
    def card(self):
        return self.cards[self.index] if self.cards else None

    def press(self, key):
        """Act on a key as the deck does in the browser (``" "``, ``"ArrowRight"``, ``"3"``...)."""
        action = KEYS.get(key)
        if action == "flip":
            self.flip()
        elif action in ("next", "previous"):
            self.move(1 if action == "next" else -1)
        elif action:
            self.rate(action)

    def flip(self):
        self.revealed = not self.revealed
        self._render()

    def move(self, step):
        if self.cards:
            self.index = (self.index + step) % len(self.cards)
        self.revealed = False
        self._render()

    def shuffle(self):
        self._rng.shuffle(self.queue)
        self._view()

    def filter(self, level):
        self.wanted = None if level == "all levels" else level
        self._view()

    def _view(self, keep=None):
        """Show the queue's cards at the chosen level, on ``keep`` if it is still there."""
        self.cards = [c for c in self.queue if self.wanted in (None, c["level"])]
        self.index = self.cards.index(keep) if keep in self.cards else 0
        self.revealed = False
        self._render()

    def rate(self, rating):
        """Rate the revealed card; returns its new schedule (None if there was nothing to rate)."""
        card = self.card
        if card is None or not self.revealed:
            self.status.value = "<i>Reveal the answer first, then rate how well you knew it.</i>"
            return None
        when = self.clock()
        state = None
        if self.progress is not None:
            def change(r):
                if card["id"] not in r["cards"]:  # a new card: it counts against today's limit
                    today = r.get("new_today", {})
                    ids = today.get("ids", []) if today.get("date") == when.date().isoformat() else []
                    r["new_today"] = {"date": when.date().isoformat(), "ids": [*ids, card["id"]]}
                r["cards"][card["id"]] = schedule.review(r["cards"].get(card["id"]), rating, when, self.fuzz)
            state = self.progress.update(change)["cards"][card["id"]]
            # The file's notice (missing, set aside) was said on opening; now it holds this rating.
            self.status.value = (f"{rating.capitalize()}: that card comes back "
                                 f"{when_text(schedule.due_at(state), when)}.")
        if self.session:
            position = self.cards.index(card)
            self.queue.remove(card)
            self.waiting.pop(card["id"], None)
            if rating == "again":  # a learning step: back in this session once its step is up
                self.queue.append(card)
                self.waiting[card["id"]] = schedule.due_at(state) if state else when + datetime.timedelta(minutes=1)
                if state is not None:
                    self.status.value += " It comes back later in this session."
            following = self.cards[position + 1:] + self.cards[:position + 1]
            self._view(keep=self._next(following))
        else:
            self.move(1)
        return state

    def _next(self, following):
        """After a rating, as Anki: a card rated Again whose step is up, else the next card not
        waiting for its step, else (nothing else left) the waiting card due first, shown early."""
        left = [c for c in following if c in self.queue]
        now = self.clock()
        waiting = [c for c in left if c["id"] in self.waiting]
        up = sorted((c for c in waiting if self.waiting[c["id"]] <= now), key=lambda c: self.waiting[c["id"]])
        rest = [c for c in left if c["id"] not in self.waiting]
        return (up or rest or sorted(waiting, key=lambda c: self.waiting[c["id"]]) or [None])[0]

    def _render(self):
        card = self.card
        for button in self.rate_buttons:
            button.disabled = not self.revealed
        if card is None:
            self.counter.value = f"{len(self.queue)} left today" if self.session else ""
            others = f" ({len(self.queue)} left at other levels)" if self.queue else ""
            self.face.value = ("<p><b>All done for now.</b> Come back when more cards are due.</p>"
                               if self.session and not self.queue else f"<p>No cards at this level{others}.</p>")
            return
        self.counter.value = f"card {self.index + 1} of {len(self.cards)}"
        if self.session:
            self.counter.value += f" · {len(self.queue)} left today"
        for rating, button in zip(schedule.RATINGS, self.rate_buttons):
            button.description = rating.capitalize()
            if self.revealed and self.progress is not None:
                state = self.progress.read()["cards"].get(card["id"])
                when = self.clock()
                due = schedule.due_at(schedule.review(state, rating, when, fuzz=False))
                button.description += f" · {when_text(due, when)[3:].split(' (')[0]}"
        # Revealed, the answer shows under its question: a learner compares the two.
        answer = f'<hr style="border:0;border-top:1px solid #999"><small>answer</small><p>{card["back"]}</p>'
        colour = "#e8f5e9" if self.revealed else "#e3f2fd"
        self.face.value = (
            f'<div style="border:1px solid #999;border-radius:8px;padding:12px;'
            f'background:{colour};min-height:5em">'
            f'<small><b>{card["level"]}</b> · question</small><p>{card["front"]}</p>'
            f'{answer if self.revealed else ""}</div>')
        self.reveal_button.description = "Hide" if self.revealed else "Reveal"

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def show_cards(topic, level=None, seed=None, progress="default"):
    """A :class:`Flashcards` widget for a topic, optionally one level only.

    Ratings are saved in the progress file (``progress=None`` keeps nothing), which also
    notes the topic as opened: :func:`review_due` brings new cards from opened topics first.

    >>> show_cards("data_parallel", level="beginner", progress=None).level.value
    'beginner'
    """
    store = Progress() if progress == "default" else progress
    if store is not None:
        store.update(lambda r: r.setdefault("opened", {}).setdefault(topic, schedule.now().isoformat()))
    deck = Flashcards(load("cards", topic), seed=seed, progress=store)
    if level:
        deck.level.value = level
    return deck


def review_due(topic_names=None, new=5, progress="default", clock=schedule.now, new_per_day=20):
    """Today's review session: every card due now, from every topic, then new ones.

    ``new`` is how many never-seen cards each topic adds, and ``new_per_day`` caps the new
    cards of a day, all sessions together (the progress file counts them, so a restart
    does not start the count again). Every topic by default, new cards come first from the
    lessons the learner has opened (whose flashcards :func:`show_cards` showed), then from the
    others, each group in the course's order (lesson 00's first): a cap that leaves some out
    leaves out lessons not reached yet.

    >>> import tempfile, pathlib
    >>> session = review_due(["ddp"], new=3, progress=Progress(pathlib.Path(tempfile.mkdtemp()) / "p.json"))
    >>> len(session.cards)
    3
    """
    store = Progress() if progress == "default" else progress
    record = store.read() if store else {"cards": {}}
    schedules = record["cards"]
    when = clock()
    today = record.get("new_today", {})
    introduced = len(today.get("ids", [])) if today.get("date") == when.date().isoformat() else 0
    # New cards: first from the topics whose lesson the learner has opened, then the others
    order = topic_names or sorted(in_course_order(topics("cards")), key=lambda t: t not in record.get("opened", {}))
    cards = [c for topic in order for c in schedule.due(load("cards", topic), schedules, when, new=new)]
    cards.sort(key=lambda c: c["id"] not in schedules)  # due cards before new ones
    seen = sum(c["id"] in schedules for c in cards)
    cards = cards[:seen + max(0, new_per_day - introduced)]
    fresh = len(cards) - seen
    return Flashcards(cards, progress=store, session=True, clock=clock,
                      title=f"Today's review: {seen} due, {fresh} new (new cards today: "
                            f"{introduced} of {new_per_day} a day)")
