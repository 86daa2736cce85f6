"""Export the review content to Anki: one ``.apkg`` per topic, or one for every topic.

Each card and quiz question becomes a note whose GUID comes from its content id, so
importing a new export after the content changed updates the notes already in Anki
instead of adding copies. Deck and note-type ids are fixed for the same reason.

    python -m grader.study.anki                 # every topic, one file: multi-gpu-course.apkg
    python -m grader.study.anki ddp --out decks # one topic
"""

import argparse
import hashlib
from pathlib import Path

import genanki

from ..content import load, topics

MODEL = genanki.Model(
    1607392319, "Multi-GPU course card",
    fields=[{"name": "Front"}, {"name": "Back"}, {"name": "Level"}, {"name": "Id"}],
    templates=[{"name": "Card", "qfmt": "<small>{{Level}}</small><br>{{Front}}",
                "afmt": "{{FrontSide}}<hr id=answer>{{Back}}"}],
    css=".card { font-family: sans-serif; font-size: 18px; text-align: left; }")


def deck_id(name):
    """A stable deck id for a deck name (the same on every export).

    >>> deck_id("ddp") == deck_id("ddp") != deck_id("foundations")
    True
    """
    return (1 << 30) + int(hashlib.sha1(f"multi-gpu-course/{name}".encode()).hexdigest()[:7], 16)


def notes(topic):
    """The Anki notes of a topic: its flashcards, then its quiz questions."""
    for card in load("cards", topic):
        yield genanki.Note(model=MODEL, fields=[card["front"], card["back"], card["level"], card["id"]],
                           guid=genanki.guid_for(card["id"]), tags=[topic, card["level"]])
    for q in load("quiz", topic):
        choices = "".join(f"<li>{c}</li>" for c in q["choices"])
        back = f"<b>{q['choices'][q['answer']]}</b><br>{q['explanation']}"
        yield genanki.Note(model=MODEL, fields=[f"{q['question']}<ol type=A>{choices}</ol>", back,
                                                "quiz", q["id"]],
                           guid=genanki.guid_for(q["id"]), tags=[topic, "quiz"])


def export(topic_names=None, out="."):
    """Write an ``.apkg``: one topic's deck, or (no topic) one file with a deck per topic.

    Returns the path written.

    >>> import tempfile, zipfile
    >>> path = export(["ddp"], tempfile.mkdtemp())
    >>> path.name, "collection.anki2" in zipfile.ZipFile(path).namelist()
    ('ddp.apkg', True)
    """
    names = list(topic_names or topics("cards"))
    decks = []
    for topic in names:
        deck = genanki.Deck(deck_id(topic), f"Multi-GPU Training with PyTorch::{topic}")
        for note in notes(topic):
            deck.add_note(note)
        decks.append(deck)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / (f"{names[0]}.apkg" if len(names) == 1 else "multi-gpu-course.apkg")
    genanki.Package(decks).write_to_file(str(path))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description="Export the course's flashcards and questions to Anki.")
    parser.add_argument("topics", nargs="*", help=f"topics (default: all): {', '.join(topics('cards'))}")
    parser.add_argument("--out", default=".", help="folder to write to")
    parser.add_argument("--each", action="store_true", help="one file per topic instead of one in all")
    args = parser.parse_args(argv)
    chosen = args.topics or topics("cards")
    for group in ([[t] for t in chosen] if args.each else [chosen]):
        print(export(group, args.out))


if __name__ == "__main__":
    main()
