"""A small dashboard: cards reviewed and due per topic, badges earned."""

import html

import ipywidgets as w

from ..content import load, topics
from . import schedule
from .progress import Progress
from .timed import MEDAL


def summary(record, when=None):
    """Per topic: ``(topic, cards, reviewed, due now, badge or None)``.

    >>> summary({"cards": {}, "badges": {}})[0][2:]
    (0, 0, None)
    """
    when = when or schedule.now()
    rows = []
    for topic in topics("cards"):
        ids = [c["id"] for c in load("cards", topic)]
        reviewed = [i for i in ids if i in record["cards"]]
        due = [i for i in reviewed if schedule.due_at(record["cards"][i]) <= when]
        badge = None
        if topic in topics("timed") and topic in record["badges"]:
            badge = f"{load('timed', topic)['badge']} ({record['badges'][topic]})"
        rows.append((topic, len(ids), len(reviewed), len(due), badge))
    return rows


def dashboard(progress="default"):
    """An HTML table of the learner's progress, read from the progress file.

    >>> import tempfile, pathlib
    >>> "Badges" in dashboard(Progress(pathlib.Path(tempfile.mkdtemp()) / "p.json")).value
    True
    """
    store = Progress() if progress == "default" else progress
    record = store.read()
    cell = "style='padding:3px 14px 3px 0;text-align:{}'"
    left, right = cell.format("left"), cell.format("right")
    rows = "".join(f"<tr><td {left}>{t}</td><td {right}>{n}</td><td {right}>{seen}</td><td {right}>{due}</td>"
                   f"<td {left}>{MEDAL + ' ' + html.escape(b) if b else '—'}</td></tr>"
                   for t, n, seen, due, b in summary(record))
    notice = f"<p><i>{html.escape(store.notice)}</i></p>" if store.notice else ""
    head = "".join(f"<th {left if i in (0, 4) else right}>{h}</th>"
                   for i, h in enumerate(["topic", "cards", "reviewed", "due now", "Badges"]))
    return w.HTML(f"{notice}<table class='study-dashboard' style='border-collapse:collapse'>"
                  f"<tr>{head}</tr>{rows}</table>")
