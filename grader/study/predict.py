"""Predict the output: read a short program, pick the line it prints.

Questions are data: ``grader/content/predict/<topic>.json``, each with ``id``, ``code``,
``choices``, ``answer`` and ``explanation``; ``ranks: 2`` marks a program meant for two
processes (run on two gloo ranks). The answer key is never trusted: the test suite runs
every program (:func:`run`) and checks that the marked choice is exactly what it prints.
Programs print one line and run on any machine (they pick a GPU only if there is one).
"""

import contextlib
import html
import io
from pathlib import Path

from ..content import HERE, ContentError, load_entries
from .quiz import Quiz, check_choices

PREDICT_FIELDS = {"code": str, "choices": list, "answer": int, "explanation": str}


def load_predictions(topic_or_path):
    """The predict-the-output questions of a topic name or a file path.

    >>> len(load_predictions("data_parallel")) >= 3
    True
    """
    path = Path(topic_or_path)
    if path.suffix != ".json":
        path = HERE / "predict" / f"{topic_or_path}.json"
    entries = load_entries(path, "questions", PREDICT_FIELDS)
    for entry in entries:
        check_choices(path, entry)
        if entry.get("ranks", 1) not in (1, 2):
            raise ContentError(f"{path}: entry [{entry['id']}]: 'ranks' must be 1 or 2")
    return entries


def as_question(entry):
    """A predict entry as a multiple-choice question (the program shown as code)."""
    where = " (run on 2 processes)" if entry.get("ranks", 1) == 2 else ""
    return dict(entry, question=f"What does this print{where}?"
                                f"<pre>{html.escape(entry['code'])}</pre>")


def run(code):
    """Execute a program in a fresh namespace and return what it printed.

    >>> run("print(2 + 2)")
    '4\\n'
    """
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<predict>", "exec"), {"__name__": "__main__"})
    return out.getvalue()


def show_predict(topic):
    """A quiz of a topic's predict-the-output questions.

    >>> len(show_predict("ddp").questions) >= 3
    True
    """
    return Quiz([as_question(e) for e in load_predictions(topic)])
