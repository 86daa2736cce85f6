"""A small dashboard: cards reviewed and due per topic, badges earned."""

import html

import ipywidgets as w

from ..content import topics
from . import schedule
from .cards import load_deck
from .progress import Progress
from .timed import load_set


def summary(record, when=None):
    """Per topic: ``(topic, cards, reviewed, due now, badge or None)``.

    >>> summary({"cards": {}, "badges": {}})[0][2:]
    (0, 0, None)
    """
    when = when or schedule.now()
    rows = []
    for topic in topics("cards"):
        ids = [c["id"] for c in load_deck(topic)]
        reviewed = [i for i in ids if i in record["cards"]]
        due = [i for i in reviewed if schedule.due_at(record["cards"][i]) <= when]
        badge = None
        if topic in topics("timed") and topic in record["badges"]:
            badge = f"{load_set(topic)['badge']} ({record['badges'][topic]})"
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
    rows = "".join(f"<tr><td>{t}</td><td>{n}</td><td>{seen}</td><td>{due}</td>"
                   f"<td>{'🎖 ' + html.escape(b) if b else '—'}</td></tr>"
                   for t, n, seen, due, b in summary(record))
    notice = f"<p><i>{html.escape(store.notice)}</i></p>" if store.notice else ""
    return w.HTML(f"{notice}<table class='study-dashboard'><tr><th>topic</th><th>cards</th>"
                  f"<th>reviewed</th><th>due now</th><th>Badges</th></tr>{rows}</table>")
