"""When to see a card again: FSRS (the ``fsrs`` package) over the saved progress.

A card's schedule is FSRS's own card record as a dict, kept in the progress file under
the card's content id. Rating a card (Again, Hard, Good, Easy) moves its due date;
a "due" session draws every card whose date has come, from every topic, then a few new
ones.
"""

from datetime import datetime, timezone

import fsrs

RATINGS = ("again", "hard", "good", "easy")


def now():
    """The current time, as FSRS wants it (aware, UTC)."""
    return datetime.now(timezone.utc)


def review(state, rating, when=None, fuzz=True):
    """The schedule after rating a card: ``state`` is its saved schedule (None if new).

    ``fuzz=False`` turns off FSRS's random spread of intervals (for tests).

    >>> from datetime import datetime, timezone
    >>> t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> first = review(None, "good", t, fuzz=False)
    >>> first["due"]     # still learning: again in ten minutes
    '2026-01-01T00:10:00+00:00'
    >>> review(first, "good", datetime.fromisoformat(first["due"]), fuzz=False)["due"][:10]
    '2026-01-03'
    """
    if rating not in RATINGS:
        raise ValueError(f"rating must be one of {', '.join(RATINGS)}, not {rating!r}")
    when = when or now()
    card = fsrs.Card.from_dict(state) if state else fsrs.Card(card_id=0, due=when)  # the id lives in the key
    card, _ = fsrs.Scheduler(enable_fuzzing=fuzz).review_card(
        card, fsrs.Rating[rating.capitalize()], review_datetime=when)
    return card.to_dict()


def due_at(state):
    """When a saved schedule is next due (None for a card never reviewed)."""
    return datetime.fromisoformat(state["due"]) if state else None


def due(entries, schedules, when=None, new=10):
    """The entries to review now: those due (earliest first), then up to ``new`` never seen.

    ``schedules`` maps card ids to saved schedules (the progress file's ``cards``).

    >>> cards = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    >>> [c["id"] for c in due(cards, {"b": review(None, "again")}, new=1)]
    ['a']
    """
    when = when or now()
    seen = [e for e in entries if e["id"] in schedules and due_at(schedules[e["id"]]) <= when]
    seen.sort(key=lambda e: due_at(schedules[e["id"]]))
    unseen = [e for e in entries if e["id"] not in schedules][:new]
    return seen + unseen
