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

from ..content import load
from .quiz import Quiz

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
    return Quiz([as_question(e) for e in load("predict", topic)])
