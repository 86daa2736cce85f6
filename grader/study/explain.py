"""Explain prompts: write an answer in your own words, then judge it against a model answer.

Prompts are data: ``grader/content/explain/<topic>.json``, each with ``id``, ``prompt``,
``hint``, ``answer`` (a model answer) and ``concepts``: a list of ``{"name", "phrases"}``.
After *Check* the learner sees the model answer and each concept, and ticks the ones their
answer really covered; that honest self-assessment is the learning step, and it is saved
and schedules the prompt's next review like a card rating. A matcher only pre-ticks its
suggestions, and only where the words leave no doubt: a concept one of whose phrases (its
list of ways to say it, in the content) appears in the text, up to case, punctuation and
common word endings (``gradients`` matches ``gradient``), with none of its words denied.
A denial reaches:

- from "not", "never", "no", "without", "doesn't", "nor" ... its whole clause ("activations
  are not kept" denies "activations");
- from "instead of", "rather than", "unlike", "as opposed to" to the end of its clause;
- from "neither", or a word that calls the rest false ("a myth that", "it is wrong / false /
  untrue / incorrect that", "a misconception", "a mistake"), to the end of the sentence;

and "but", "however", "yet", "whereas" end it. Measured on a labelled set of answers
(tests/study/explain_labelled.json: right answers, wrong ones in the right words, right ones
in other words), docs/self-learner.md gives its precision and recall.
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
# Words that deny their whole clause, before and after them ("doesn't" splits into "doesn" and "t"):
# "activations are not kept" denies "activations" too.
NEGATIONS = {"not", "no", "never", "without", "nor", "cannot", "t", "doesn", "don", "isn", "aren", "wasn",
             "weren", "won", "shouldn", "needn", "hardly", "none"}
# Words that deny what follows them in their clause: "threads instead of a process per GPU".
SWAPS = {"instead", "rather", "unlike", "opposed"}
# Words that deny the rest of their sentence: "neither ... nor ...", "it is a myth that ...".
DENIALS = {"neither", "myth", "false", "untrue", "wrong", "incorrect", "misconception", "mistake", "mistaken",
           "fallacy"}
CONTRASTS = {"but", "however", "yet", "whereas"}  # a denial ends here


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


def plain(text):
    """``text`` without HTML tags or entities, in lower case."""
    return re.sub(r"<[^>]+>", " ", html.unescape(text)).lower()


def words(text):
    """The stems of the words in ``text`` (HTML tags and punctuation dropped)."""
    return [stem(t) for t in re.findall(r"[a-z0-9_]+", plain(text))]


def sentences(text):
    """``text`` as sentences, each a list of (word stem, denied): whether a denial reaches the word.

    >>> [[w for w, denied in s if denied] for s in sentences("It is not a copy, it is a shard. Not this")]
    [['it', 'is', 'not', 'a', 'copy'], ['not', 'thi']]
    >>> [w for w, denied in sentences("a myth that it splits, or that it gathers")[0] if not denied]
    ['a']
    >>> [w for w, denied in sentences("one process instead of threads")[0] if not denied]
    ['one', 'process']
    """
    marked = []
    for sentence in re.split(r"[.;!?\n]+", plain(text)):
        marked.append([])
        whole = False  # a denial of the rest of the sentence
        for clause in re.split(r"[,:()]|\b(?=(?:but|however|yet|whereas)\b)", sentence):
            tokens = re.findall(r"[a-z0-9_]+", clause)
            if tokens and tokens[0] in CONTRASTS:
                whole = False
            negated, swapped = bool(NEGATIONS & set(tokens)), False
            for token in tokens:
                swapped = swapped or token in SWAPS
                whole = whole or token in DENIALS
                marked[-1].append((stem(token), negated or swapped or whole))
    return marked


def mentions(text, phrase):
    """Whether ``phrase`` appears in ``text`` (word by word, up to endings and case) with
    none of its words denied.

    >>> mentions("Each GPU averages its gradients with All-Reduce.", "all-reduce")
    True
    >>> mentions("the gradients are summed", "averaged gradient")
    False
    >>> mentions("gradients are never all-reduced or averaged", "averaged")
    False
    >>> mentions("it doesn't average anything, but each rank averages gradients", "average")
    True
    >>> mentions("It is a myth that DDP starts a process per GPU, or that it averages", "average")
    False
    >>> mentions("a single process with threads instead of one process per GPU", "one process per GPU")
    False
    """
    want = words(phrase)
    for have in sentences(text):
        for i in range(len(have) - len(want) + 1):
            if want and [w for w, _ in have[i:i + len(want)]] == want and \
                    not any(denied for _, denied in have[i:i + len(want)]):
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
