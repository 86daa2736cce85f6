"""Explain prompts: write an answer in your own words, see which key concepts it covers.

Prompts are data: ``grader/content/explain/<topic>.json``, each with ``id``, ``prompt``,
``hint``, ``answer`` (a model answer) and ``concepts``: a list of ``{"name", "phrases"}``.
A concept counts as covered when any of its phrases appears in the learner's text.
Matching ignores case, punctuation and common word endings (``gradients`` matches
``gradient``, ``averaged`` matches ``average``), so it is deterministic and forgiving of
grammar, not of missing ideas.
"""

import html
import re
from pathlib import Path

import ipywidgets as w

from ..content import HERE, ContentError, load_entries

PROMPT_FIELDS = {"prompt": str, "hint": str, "answer": str, "concepts": list}
SUFFIXES = ("ing", "ed", "es", "s", "ly", "e")


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


def mentions(text, phrase):
    """Whether ``phrase`` appears in ``text``, word by word, up to endings and case.

    >>> mentions("Each GPU averages its gradients with All-Reduce.", "all-reduce")
    True
    >>> mentions("the gradients are summed", "averaged gradient")
    False
    """
    have, want = words(text), words(phrase)
    return bool(want) and any(have[i:i + len(want)] == want for i in range(len(have) - len(want) + 1))


def covered(text, concepts):
    """The names of the concepts ``text`` covers, in the prompt's order.

    >>> covered("it splits the batch", [{"name": "split", "phrases": ["split", "scatter"]},
    ...                                 {"name": "gather", "phrases": ["gather"]}])
    ['split']
    """
    return [c["name"] for c in concepts if any(mentions(text, p) for p in c["phrases"])]


def load_prompts(topic_or_path):
    """The explain prompts of a topic name or a file path.

    >>> len(load_prompts("ddp")) >= 2
    True
    """
    path = Path(topic_or_path)
    if path.suffix != ".json":
        path = HERE / "explain" / f"{topic_or_path}.json"
    prompts = load_entries(path, "prompts", PROMPT_FIELDS)
    for prompt in prompts:
        for j, c in enumerate(prompt["concepts"], 1):
            if not (isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"].strip()
                    and isinstance(c.get("phrases"), list) and c["phrases"]
                    and all(isinstance(p, str) and words(p) for p in c["phrases"])):
                raise ContentError(f"{path}: entry [{prompt['id']}]: concept {j} needs a 'name' "
                                   f"and a non-empty list of 'phrases'")
        if len(prompt["concepts"]) < 2:
            raise ContentError(f"{path}: entry [{prompt['id']}]: needs at least two concepts")
    return prompts


class Explain:
    """One prompt: a text box, *Check*, then the concepts covered and missed and a model answer.

    >>> box = Explain(load_prompts("ddp")[0])
    >>> box.check("")
    []
    >>> box.result.value.startswith("<b>0 of")
    True
    """

    def __init__(self, prompt):
        self.prompt = prompt
        self.text = w.Textarea(placeholder="Your explanation, in your own words",
                               layout=w.Layout(width="100%", height="7em"))
        self.submit = w.Button(description="Check", button_style="primary")
        self.hint_button = w.Button(description="Hint")
        self.hint = w.HTML()
        self.result = w.HTML()
        for widget, css in [(self.text, "explain-text"), (self.submit, "explain-check"),
                            (self.result, "explain-result")]:
            widget.add_class(css)
        self.submit.on_click(lambda _: self.check(self.text.value))
        self.hint_button.on_click(lambda _: setattr(self.hint, "value", f"<i>Hint: {prompt['hint']}</i>"))
        self.widget = w.VBox([w.HTML(f"<b>Explain.</b> {prompt['prompt']}"), self.text,
                              w.HBox([self.submit, self.hint_button]), self.hint, self.result])

    def check(self, text):
        """Score ``text``: the names of the concepts it covers (also shown in the widget)."""
        names = covered(text, self.prompt["concepts"])
        missed = [c["name"] for c in self.prompt["concepts"] if c["name"] not in names]
        total = len(self.prompt["concepts"])
        self.result.value = (
            f"<b>{len(names)} of {total} concepts covered.</b><br>"
            f"Covered: {', '.join(names) or 'none yet'}<br>"
            f"Missed: {', '.join(missed) or 'none'}<br>"
            f"<details open><summary>A model answer</summary>{self.prompt['answer']}</details>")
        return names

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def show_explain(topic):
    """Every explain prompt of a topic, one under the other.

    >>> len(show_explain("foundations").children) >= 2
    True
    """
    return w.VBox([Explain(p).widget for p in load_prompts(topic)])
