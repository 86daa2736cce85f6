"""Multiple-choice quizzes as an ipywidget: immediate feedback, an explanation, a score.

Question banks are data: ``grader/content/quiz/<topic>.json``, a list of questions
each with ``id``, ``question``, ``choices`` (at least two), ``answer`` (index of the right
choice) and ``explanation``.
"""


import anywidget
import ipywidgets as w
import traitlets

from ..content import load


class SentAtOnce(anywidget.AnyWidget):
    """An answer widget whose page also sends the answer (the trait named ``sent``) as a message
    of its own, at once, and the kernel applies it. On a busy kernel the widgets hold back a
    state change behind the one before, while a button's click is sent at once: without the
    message, *Check* would judge an answer the learner has since changed.
    """

    sent = None

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.on_msg(self._from_page)

    def _from_page(self, _, content, buffers):
        if set(content) == {self.sent}:  # as a state change from the page: not echoed back to it
            self.set_state(content)


class Choices(SentAtOnce):
    """Answer choices as radio buttons whose labels are HTML, so code in a choice shows as code.

    ``index`` is the chosen one (None before a choice), sent at once; arrow keys move between
    them as in any radio group.

    >>> Choices(options=["<code>model.module</code>", "model"]).index is None
    True
    """

    sent = "index"
    options = traitlets.List(traitlets.Unicode()).tag(sync=True)
    index = traitlets.Int(None, allow_none=True).tag(sync=True)
    _esm = """
    function render({ model, el }) {
      const name = "choice-" + Math.random().toString(36).slice(2);
      el.classList.add("choice-list");
      el.setAttribute("role", "radiogroup");
      const draw = () => {
        el.replaceChildren();
        model.get("options").forEach((html, i) => {
          const label = document.createElement("label");
          const input = document.createElement("input");
          input.type = "radio"; input.name = name; input.checked = model.get("index") === i;
          input.addEventListener("change", () => {
            model.set("index", i); model.save_changes(); model.send({ index: i });
          });
          const text = document.createElement("span");
          text.innerHTML = html;  // the course's own content
          label.append(input, text);
          el.append(label);
        });
      };
      model.on("change:options", draw);
      model.on("change:index", () => el.querySelectorAll("input").forEach(
        (input, i) => { input.checked = model.get("index") === i; }));
      draw();
    }
    export default { render };
    """
    _css = """
    .choice-list { display: flex; flex-direction: column; gap: 3px; margin: 4px 0 6px; }
    .choice-list label { display: flex; gap: 8px; align-items: baseline; cursor: pointer; }
    .choice-list code { background: #f2f2f2; padding: 0 3px; border-radius: 3px; }
    """


class Quiz:
    """Questions with a *Check* button each, feedback at once and a running score.

    The score counts each question's first answer.

    >>> quiz = Quiz(load("quiz", "foundations"))
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
            radio = Choices(options=q["choices"])
            check = w.Button(description="Check", button_style="primary")
            check.add_class("quiz-check")
            feedback = w.HTML()
            feedback.add_class("quiz-feedback")
            check.on_click(lambda _, i=i: self._check(i))
            self.choices.append(radio)
            self.feedback.append(feedback)
            rows.append(w.VBox([w.HTML(f"<b>Q{i + 1}.</b> {q['question']}"), radio, check, feedback]))
        self.widget = w.VBox([w.HTML("<small>Each question's <b>first</b> answer is the one that "
                                     "counts; you can keep trying to find the right one.</small>"),
                              *rows, self.score_label])
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
        first = self.first_answers.setdefault(i, right)
        if right and first:
            text = f"<span style='color:green'>✔ Right.</span> {q['explanation']}"
        elif right:
            text = (f"<span style='color:green'>✔ Right</span>, but only the first answer counts: "
                    f"this question scores 0. {q['explanation']}")
        else:  # why this choice is wrong, never which one is right: the explanation waits for that
            why = q["why_not"][radio.index] if q.get("why_not") else ""
            text = (f"<span style='color:#c62828'>✘ Not this one.</span> {why} It scores 0 (the first "
                    "answer is the one that counts). Think again and pick another: the explanation "
                    "comes with the right answer.")
        self.feedback[i].value = text
        self._render_score()
        return right

    def _render_score(self):
        right, answered = self.score
        self.score_label.value = (f"<b>Score: {right} / {len(self.questions)}</b> "
                                  f"({answered} answered; each question's first answer counts)")

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def show_quiz(topic):
    """A :class:`Quiz` widget for a topic.

    >>> len(show_quiz("data_parallel").questions) >= 5
    True
    """
    return Quiz(load("quiz", topic))
