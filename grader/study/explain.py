"""Explain prompts: write an answer in your own words, then judge it against a model answer.

Prompts are data: ``grader/content/explain/<topic>.json``, each with ``id``, ``prompt``,
``hint``, ``answer`` (a model answer) and ``concepts``: a list of ``{"name", "phrases"}``.
After *Check* the learner sees the model answer and each concept, and ticks the ones their
answer really covered; that honest self-assessment is the learning step, and it is saved
and schedules the prompt's next review like a card rating. A matcher only pre-ticks its
suggestions: a concept whose phrase appears in the text, up to case, punctuation and
common word endings (``gradients`` matches ``gradient``), and not negated in its clause
("not", "never", "no", "without", "doesn't" ... a few words before).
"""

import html
import re

import ipywidgets as w
import traitlets

from ..content import load
from . import schedule
from .cards import when_text
from .progress import Progress
from .quiz import SentAtOnce

SUFFIXES = ("ing", "ed", "es", "s", "ly", "e")
# Words that negate what follows them in a clause ("doesn't" splits into "doesn" and "t").
NEGATIONS = {"not", "no", "never", "without", "nor", "neither", "cannot", "t", "doesn", "don", "isn",
             "aren", "wasn", "weren", "won", "shouldn", "needn", "hardly", "none"}
NEGATION_REACH = 4  # words before a phrase that a negation can reach


def stem(word):
    """A word without its common ending, so variants compare equal.

    >>> stem("averaged") == stem("averages") == stem("average") == stem("averaging")
    True
    >>> stem("copies") == stem("copied") == stem("copy")
    True
    >>> stem("processes") == stem("process"), stem("losses") == stem("loss")
    (True, True)
    """
    if len(word) > 4 and word.endswith(("ies", "ied")):
        return word[:-3] + "y"
    if word.endswith("ss"):  # process, pass, loss: no plural ending to take off
        return word
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def words(text):
    """The stems of the words in ``text`` (HTML tags and punctuation dropped)."""
    text = re.sub(r"<[^>]+>", " ", html.unescape(text)).lower()
    return [stem(t) for t in re.findall(r"[a-z0-9_]+", text)]


def clauses(text):
    """``text`` cut at punctuation into clauses, each a list of word stems."""
    text = re.sub(r"<[^>]+>", " ", html.unescape(text))
    return [words(part) for part in re.split(r"[.,;:!?()\n]|\bbut\b", text, flags=re.I)]


def mentions(text, phrase):
    """Whether ``phrase`` appears in ``text`` (word by word, up to endings and case) and is
    not negated by a word shortly before it in the same clause.

    >>> mentions("Each GPU averages its gradients with All-Reduce.", "all-reduce")
    True
    >>> mentions("the gradients are summed", "averaged gradient")
    False
    >>> mentions("gradients are never all-reduced or averaged", "averaged")
    False
    >>> mentions("it doesn't average anything, but each rank averages gradients", "average")
    True
    """
    want = words(phrase)
    for have in clauses(text):
        for i in range(len(have) - len(want) + 1):
            if want and have[i:i + len(want)] == want and \
                    not NEGATIONS & set(have[max(0, i - NEGATION_REACH):i]):
                return True
    return False


def covered(text, concepts):
    """The names of the concepts ``text`` covers, in the prompt's order.

    >>> covered("it splits the batch", [{"name": "split", "phrases": ["split", "scatter"]},
    ...                                 {"name": "gather", "phrases": ["gather"]}])
    ['split']
    """
    return [c["name"] for c in concepts if any(mentions(text, p) for p in c["phrases"])]


class Answer(SentAtOnce):
    """A text box whose text is sent at once at every keystroke: with a plain text box, on a
    busy kernel, *Check* could judge a text cut short, or the text of an earlier check.

    >>> Answer(value="all-reduce").value
    'all-reduce'
    """

    sent = "value"
    value = traitlets.Unicode("").tag(sync=True)
    placeholder = traitlets.Unicode("").tag(sync=True)
    _esm = """
    function render({ model, el }) {
      const box = document.createElement("textarea");
      box.placeholder = model.get("placeholder");
      box.value = model.get("value");
      box.addEventListener("input", () => {
        model.set("value", box.value); model.save_changes(); model.send({ value: box.value });
      });
      model.on("change:value", () => {
        if (box.value !== model.get("value")) box.value = model.get("value");
      });
      el.append(box);
    }
    export default { render };
    """
    _css = """
    .explain-text textarea { width: 100%; height: 7em; box-sizing: border-box; resize: vertical;
                             font: inherit; padding: 4px 6px; }
    """


class Explain:
    """One prompt: a text box and *Check*; then the model answer, the concepts to tick (the
    matcher's suggestions pre-ticked) and *Save*, which records the self-assessment.

    >>> import tempfile, pathlib
    >>> store = Progress(pathlib.Path(tempfile.mkdtemp()) / "progress.json")
    >>> box = Explain(load("explain", "ddp")[0], progress=store)
    >>> box.check("")
    []
    >>> "model answer" in box.result.value and not any(t.value for t in box.ticks)
    True
    >>> box.ticks[0].value = True; box.save()["covered"] == [box.prompt["concepts"][0]["name"]]
    True
    """

    def __init__(self, prompt, progress=None, clock=schedule.now):
        self.prompt, self.progress, self.clock = prompt, progress, clock
        self.text = Answer(placeholder="Your explanation, in your own words", layout=w.Layout(width="100%"))
        self.submit = w.Button(description="Check", button_style="primary")
        self.hint_button = w.Button(description="Hint")
        self.hint = w.HTML()
        self.result = w.HTML()
        self.ticks = [w.Checkbox(description=c["name"], indent=False, layout=w.Layout(width="auto"))
                      for c in prompt["concepts"]]
        self.save_button = w.Button(description="Save my marks", button_style="success")
        self.saved = w.HTML()
        self.judge = w.VBox([w.HTML("<b>Which of these did your answer really cover?</b> "
                                    "<small>(the ticks are the matcher's suggestions; "
                                    "you decide)</small>"),
                             *self.ticks, self.save_button, self.saved],
                            layout=w.Layout(display="none"))
        for widget, css in [(self.text, "explain-text"), (self.submit, "explain-check"),
                            (self.result, "explain-result"), (self.save_button, "explain-save"),
                            (self.saved, "explain-saved"), (self.judge, "explain-judge")]:
            widget.add_class(css)
        for tick in self.ticks:
            tick.add_class("explain-tick")
        self.submit.on_click(lambda _: self.check(self.text.value))
        self.save_button.on_click(lambda _: self.save())
        self.hint_button.on_click(lambda _: setattr(self.hint, "value", f"<i>Hint: {prompt['hint']}</i>"))
        self.widget = w.VBox([w.HTML(f"<b>Explain.</b> {prompt['prompt']}"), self.text,
                              w.HBox([self.submit, self.hint_button]), self.hint, self.result,
                              self.judge])

    def check(self, text):
        """Show the model answer and the concepts to tick; returns the matcher's suggestions."""
        names = covered(text, self.prompt["concepts"])
        for tick in self.ticks:
            tick.value = tick.description in names
        self.result.value = (
            f"<details open><summary><b>A model answer</b></summary>{self.prompt['answer']}</details>"
            f"<small>Suggested from your words: {html.escape(', '.join(names)) or 'none'}. "
            f"Read the model answer, then tick what your answer really said.</small>")
        self.judge.layout.display = "flex"
        self.saved.value = ""
        return names

    def save(self):
        """Save the self-assessment; the share of concepts covered rates the prompt like a card."""
        names = [t.description for t in self.ticks if t.value]
        share = len(names) / len(self.ticks)
        rating = "good" if share == 1 else "hard" if share >= 0.5 else "again"
        when = self.clock()
        entry = {"covered": names, "of": len(self.ticks), "rating": rating, "when": when.isoformat()}
        text = f"<b>{len(names)} of {len(self.ticks)} concepts</b> by your own marking ({rating})."
        if self.progress is not None:
            def record(r):
                explain = r.setdefault("explain", {})
                old = explain.get(self.prompt["id"], {}).get("schedule")
                explain[self.prompt["id"]] = {**entry, "schedule": schedule.review(old, rating, when)}
            saved = self.progress.update(record)["explain"][self.prompt["id"]]
            text += f" Saved: this prompt comes back {when_text(schedule.due_at(saved['schedule']), when)}."
        self.saved.value = text
        return entry

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def show_explain(topic, progress="default"):
    """Every explain prompt of a topic, one under the other; self-assessments are saved in
    the progress file (``progress=None`` keeps nothing).

    >>> len(show_explain("foundations", progress=None).children) >= 2
    True
    """
    store = Progress() if progress == "default" else progress
    return w.VBox([Explain(p, progress=store).widget for p in load("explain", topic)])
