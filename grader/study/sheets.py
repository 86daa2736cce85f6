"""Cheat sheets: one printable page per topic, generated from the review content.

A sheet holds the topic's key facts (its flashcards, by level), its formulas and its code
idioms (``grader/content/sheets/<topic>.json``). The pages live in ``notebooks/cheatsheets/``
and are never edited by hand: ``make sheets`` writes them and a test checks they are in sync.
"""

import html
import re
from pathlib import Path

from ..content import HERE, LEVELS, load, topics

OUT = HERE.parents[1] / "notebooks" / "cheatsheets"


def _plain(text):
    """Card HTML as Markdown: code spans kept, other tags dropped, line breaks kept."""
    text = re.sub(r"<code>(.*?)</code>", lambda m: f"`{html.unescape(m.group(1))}`", text)
    text = re.sub(r"<br\s*/?>", " ", text)
    text = re.sub(r"</?(b|strong)>", "**", text)
    text = re.sub(r"</?(i|em)>", "*", text)
    return html.unescape(re.sub(r"<[^>]+>", "", text)).strip()


def render(topic):
    """The Markdown of a topic's cheat sheet.

    >>> render("ddp").splitlines()[0]
    '# Cheat sheet: DistributedDataParallel'
    """
    sheet, cards = load("sheets", topic), load("cards", topic)
    lines = [f"# Cheat sheet: {sheet['topic']}", "",
             # For maintainers only: a comment, which the rendered sheet does not show.
             f"<!-- Generated from grader/content/*/{topic}.json by `make sheets`; do not edit by hand. -->",
             "", "## Key facts", ""]
    for level in LEVELS:
        mine = [c for c in cards if c["level"] == level]
        if mine:
            lines += [f"### {level.capitalize()}", ""]
            lines += [f"- **{_plain(c['front'])}** {_plain(c['back'])}" for c in mine]
            lines.append("")
    lines += ["## Formulas", "", "| | formula | note |", "|---|---|---|"]
    lines += [f"| {f['name']} | `{f['formula']}` | {_plain(f['note'])} |" for f in sheet["formulas"]]
    lines += ["", "## Code idioms", ""]
    for idiom in sheet["idioms"]:
        lines += [f"**{idiom['title']}**", "", "```python", idiom["code"].rstrip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_all(out=OUT):
    """Write every topic's sheet to ``out``; returns the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for topic in topics("sheets"):
        path = out / f"{topic}.md"
        path.write_text(render(topic), encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_all():
        print(written)
