"""Course content as data: flashcard decks and question banks, one JSON file per topic.

``cards/<topic>.json`` and ``quiz/<topic>.json`` are the single source for the
widgets, and later for cheat sheets and exports. Loading validates every entry and
names the file and the entry when something is wrong.
"""

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEVELS = ("beginner", "intermediate", "advanced", "expert")
ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


class ContentError(ValueError):
    """A deck or question bank that cannot be used, with the file and entry named."""


def topics(kind):
    """Topics available for ``kind`` ("cards" or "quiz").

    >>> "foundations" in topics("cards")
    True
    """
    return sorted(p.stem for p in (HERE / kind).glob("*.json"))


def load_entries(path, list_key, required):
    """Read ``path`` and return its list ``list_key``, each entry checked for ``required`` fields.

    Every entry also needs an ``id`` (lower-case words joined by hyphens, unique in the
    file): progress and exports refer to entries by it, so it never changes once written.
    ``required`` maps a field to its type. Raises :class:`ContentError` naming the file
    and the entry (by number and, where it has one, its first words).

    >>> len(load_entries(HERE / "cards" / "foundations.json", "cards", {"front": str})) >= 10
    True
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ContentError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ContentError(f"{path}: not valid JSON ({e})") from None
    entries = data.get(list_key) if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ContentError(f"{path}: expected an object with a non-empty list {list_key!r}")
    seen = set()
    for i, entry in enumerate(entries, 1):
        where = f"{path}: entry {i}"
        if not isinstance(entry, dict):
            raise ContentError(f"{where}: expected an object, got {type(entry).__name__}")
        if not isinstance(entry.get("id"), str) or not ID.fullmatch(entry["id"]):
            raise ContentError(f"{where}: 'id' should be lower-case words joined by hyphens, "
                               f"got {entry.get('id')!r}")
        if entry["id"] in seen:
            raise ContentError(f"{where}: id {entry['id']!r} is used twice")
        seen.add(entry["id"])
        where += f" [{entry['id']}]"
        first = next((entry[k] for k in required if k != "level" and isinstance(entry.get(k), str)), "")
        if first:
            where += f" ({first[:40]!r})"
        for key, kind in required.items():
            value = entry.get(key)
            if value is None:
                raise ContentError(f"{where}: missing {key!r}")
            if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
                raise ContentError(f"{where}: {key!r} should be {kind.__name__}, got {type(value).__name__}")
            if isinstance(value, str) and not value.strip():
                raise ContentError(f"{where}: {key!r} is empty")
        if "level" in required and entry["level"] not in LEVELS:
            raise ContentError(f"{where}: level {entry['level']!r} is not one of {', '.join(LEVELS)}")
    return entries


MARKUP = re.compile(r"<[a-zA-Z/!][^>]*>|&[a-zA-Z]+;|&#\d+;")


def check_plain(path, entry_id, field, text):
    """Raise :class:`ContentError` if ``text``, a field the widgets show as plain text, holds markup.

    >>> check_plain("x.json", "a-1", "title", "Two ranks, one batch")
    >>> check_plain("x.json", "a-1", "title", "<code>no_sync</code> saves time")
    Traceback (most recent call last):
    ...
    grader.content.ContentError: x.json: entry [a-1]: 'title' is shown as plain text; it holds markup: '<code>'
    """
    found = MARKUP.search(text)
    if found:
        raise ContentError(f"{path}: entry [{entry_id}]: {field!r} is shown as plain text; "
                           f"it holds markup: {found.group()!r}")
