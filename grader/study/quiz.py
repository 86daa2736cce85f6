"""Multiple-choice quizzes as an ipywidget: immediate feedback, an explanation, a score.

Question banks are data: ``grader/content/quiz/<topic>.json``, a list of questions
each with ``id``, ``question``, ``choices`` (at least two), ``answer`` (index of the right
choice) and ``explanation``.
"""

from pathlib import Path

import ipywidgets as w

from ..content import HERE, ContentError, load_entries

QUESTION_FIELDS = {"question": str, "choices": list, "answer": int, "explanation": str}


def load_questions(topic_or_path):
    """The questions of a topic name (``"foundations"``) or a bank file path.

    >>> len(load_questions("foundations")) >= 5
    True
    """
    path = Path(topic_or_path)
    if path.suffix != ".json":
        path = HERE / "quiz" / f"{topic_or_path}.json"
    questions = load_entries(path, "questions", QUESTION_FIELDS)
    for q in questions:
        check_choices(path, q)
    return questions


def check_choices(path, entry):
    """Raise :class:`ContentError` unless ``entry`` has two or more choices and a valid answer."""
    where = f"{path}: entry [{entry['id']}]"
    if len(entry["choices"]) < 2 or not all(isinstance(c, str) and c.strip() for c in entry["choices"]):
        raise ContentError(f"{where}: 'choices' needs at least two non-empty strings")
    if not 0 <= entry["answer"] < len(entry["choices"]):
        raise ContentError(f"{where}: 'answer' {entry['answer']} is not an index into "
                           f"{len(entry['choices'])} choices")


class Quiz:
    """Questions with a *Check* button each, feedback at once and a running score.

    The score counts each question's first answer.

    >>> quiz = Quiz(load_questions("foundations"))
    >>> quiz.answer(0, quiz.questions[0]["answer"])
    True
    >>> quiz.score
    (1, 1)
    """

    def __init__(self, questions):
        self.questions = list(questions)
        self.first_answers = {}
        self.score_label = w.HTML()
        self.score_label.add_class("quiz-score")
        self.choices, self.feedback, rows = [], [], []
        for i, q in enumerate(self.questions):
            radio = w.RadioButtons(options=q["choices"], value=None, layout=w.Layout(width="auto"))
            check = w.Button(description="Check", button_style="primary")
            check.add_class("quiz-check")
            feedback = w.HTML()
            feedback.add_class("quiz-feedback")
            check.on_click(lambda _, i=i: self._check(i))
            self.choices.append(radio)
            self.feedback.append(feedback)
            rows.append(w.VBox([w.HTML(f"<b>Q{i + 1}.</b> {q['question']}"), radio, check, feedback]))
        self.widget = w.VBox([*rows, self.score_label])
        self._render_score()

    @property
    def score(self):
        """(right first answers, questions answered)."""
        return sum(self.first_answers.values()), len(self.first_answers)

    def answer(self, i, choice):
        """Answer question ``i`` with choice index ``choice``; True when right."""
        self.choices[i].index = choice
        return self._check(i)

    def _check(self, i):
        q, radio = self.questions[i], self.choices[i]
        if radio.index is None:
            self.feedback[i].value = "<i>Pick an answer first.</i>"
            return None
        right = radio.index == q["answer"]
        self.first_answers.setdefault(i, right)
        verdict = ("<span style='color:green'>✔ Right.</span>" if right else
                   f"<span style='color:#c62828'>✘ Not quite: the answer is "
                   f"“{q['choices'][q['answer']]}”.</span>")
        self.feedback[i].value = f"{verdict} {q['explanation']}"
        self._render_score()
        return right

    def _render_score(self):
        right, answered = self.score
        self.score_label.value = (f"<b>Score: {right} / {len(self.questions)}</b> "
                                  f"({answered} answered)")

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def show_quiz(topic):
    """A :class:`Quiz` widget for a topic.

    >>> len(show_quiz("data_parallel").questions) >= 5
    True
    """
    return Quiz(load_questions(topic))
