"""Course content as data, one JSON file per topic and kind, loaded and checked here.

The kinds (``README.md`` in this folder gives each one's fields): ``cards``, ``quiz``,
``explain``, ``predict``, ``timed``, ``sheets``, and ``seedmap`` for the tests. The study
widgets, the cheat sheets and the Anki export all read through :func:`load`, which checks
every entry and names the file and the entry when something is wrong. ``thresholds.json``
holds the bars of the measured challenges (:func:`thresholds`).

>>> [card["level"] for card in load("cards", "foundations")][:1]
['beginner']
"""

import ast
import html
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEVELS = ("beginner", "intermediate", "advanced", "expert")
ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


class ContentError(ValueError):
    """A deck or question bank that cannot be used, with the file and entry named."""


# The lessons' topics as the course teaches them, lesson 00 first (tests/study checks it against source/).
COURSE_ORDER = ("foundations", "data_parallel", "ddp", "model_parallel", "batch_scaling", "communication")


def topics(kind):
    """Topics available for ``kind`` ("cards", "quiz", "timed", ...), alphabetically.

    >>> "foundations" in topics("cards")
    True
    """
    return sorted(p.stem for p in (HERE / kind).glob("*.json"))


def in_course_order(names):
    """Topic names as the course teaches them (:data:`COURSE_ORDER`); any other after, alphabetically.

    >>> in_course_order(["batch_scaling", "extra", "foundations"])
    ['foundations', 'batch_scaling', 'extra']
    """
    rank = {name: i for i, name in enumerate(COURSE_ORDER)}
    return sorted(names, key=lambda name: (rank.get(name, len(rank)), name))


def load_entries(path, list_key, required):
    """Read ``path`` and return its list ``list_key``, each entry checked for ``required`` fields.

    Every entry also needs an ``id`` (lower-case words joined by hyphens, unique in the
    file): progress and exports refer to entries by it, so it never changes once written.
    ``required`` maps a field to its type. Raises :class:`ContentError` naming the file
    and the entry (by number and, where it has one, its first words).

    >>> len(load_entries(HERE / "cards" / "foundations.json", "cards", {"front": str})) >= 10
    True
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ContentError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ContentError(f"{path}: not valid JSON ({e})") from None
    entries = data.get(list_key) if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ContentError(f"{path}: expected an object with a non-empty list {list_key!r}")
    seen = set()
    for i, entry in enumerate(entries, 1):
        where = f"{path}: entry {i}"
        if not isinstance(entry, dict):
            raise ContentError(f"{where}: expected an object, got {type(entry).__name__}")
        if not isinstance(entry.get("id"), str) or not ID.fullmatch(entry["id"]):
            raise ContentError(f"{where}: 'id' should be lower-case words joined by hyphens, "
                               f"got {entry.get('id')!r}")
        if entry["id"] in seen:
            raise ContentError(f"{where}: id {entry['id']!r} is used twice")
        seen.add(entry["id"])
        where += f" [{entry['id']}]"
        first = next((entry[k] for k in required if k != "level" and isinstance(entry.get(k), str)), "")
        if first:
            where += f" ({first[:40]!r})"
        for key, kind in required.items():
            value = entry.get(key)
            if value is None:
                raise ContentError(f"{where}: missing {key!r}")
            if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
                raise ContentError(f"{where}: {key!r} should be {kind.__name__}, got {type(value).__name__}")
            if isinstance(value, str) and not value.strip():
                raise ContentError(f"{where}: {key!r} is empty")
        if "level" in required and entry["level"] not in LEVELS:
            raise ContentError(f"{where}: level {entry['level']!r} is not one of {', '.join(LEVELS)}")
    return entries


MARKUP = re.compile(r"<[a-zA-Z/!][^>]*>|&[a-zA-Z]+;|&#\d+;")


def check_plain(path, entry_id, field, text):
    """Raise :class:`ContentError` if ``text``, a field the widgets show as plain text, holds markup.

    >>> check_plain("x.json", "a-1", "title", "Two ranks, one batch")
    >>> check_plain("x.json", "a-1", "title", "<code>no_sync</code> saves time")
    Traceback (most recent call last):
    ...
    grader.content.ContentError: x.json: entry [a-1]: 'title' is shown as plain text; it holds markup: '<code>'
    """
    found = MARKUP.search(text)
    if found:
        raise ContentError(f"{path}: entry [{entry_id}]: {field!r} is shown as plain text; "
                           f"it holds markup: {found.group()!r}")


def thresholds(name):
    """The grading rule ``name`` of ``thresholds.json``: the bars measured challenges ask for, per backend.

    >>> thresholds("ddp_speedup")["gloo"]["fraction_of_ranks"]
    0.6
    """
    return json.loads((HERE / "thresholds.json").read_text(encoding="utf-8"))[name]


def plain(text):
    """Content HTML as plain text shows it (Anki's export, the cheat sheets): markup becomes what it says.

    >>> plain("<code>model.module.state_dict()</code> &amp; a <b>barrier</b>")
    'model.module.state_dict() & a barrier'
    """
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def check_choices(path, entry):
    """Raise :class:`ContentError` unless ``entry`` has two or more choices and a valid answer."""
    where = f"{path}: entry [{entry['id']}]"
    if len(entry["choices"]) < 2 or not all(isinstance(c, str) and c.strip() for c in entry["choices"]):
        raise ContentError(f"{where}: 'choices' needs at least two non-empty strings")
    labels = [plain(c) for c in entry["choices"]]
    if len(set(labels)) != len(labels):
        raise ContentError(f"{where}: two choices read the same once shown as plain text: {labels}")
    if not 0 <= entry["answer"] < len(entry["choices"]):
        raise ContentError(f"{where}: 'answer' {entry['answer']} is not an index into "
                           f"{len(entry['choices'])} choices")


TIMED_KINDS = ("predict", "concept", "hyperparameter", "debug", "metrics")  # one problem of each in a set
FIELDS = {  # each kind's list and the fields every entry of it needs
    "cards": ("cards", {"level": str, "front": str, "back": str}),
    "quiz": ("questions", {"question": str, "choices": list, "answer": int, "explanation": str}),
    "predict": ("questions", {"code": str, "choices": list, "answer": int, "explanation": str}),
    "explain": ("prompts", {"prompt": str, "hint": str, "answer": str, "concepts": list}),
    "timed": ("problems", {"kind": str, "level": str, "title": str, "question": str, "choices": list,
                           "answer": int, "hint": str, "explanation": str}),
}


def _explain(path, prompt):
    for j, c in enumerate(prompt["concepts"], 1):
        if not (isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"].strip()
                and isinstance(c.get("phrases"), list) and c["phrases"]
                and all(isinstance(p, str) and re.search(r"[a-zA-Z0-9]", plain(p)) for p in c["phrases"])):
            raise ContentError(f"{path}: entry [{prompt['id']}]: concept {j} needs a 'name' "
                               f"and a non-empty list of 'phrases'")
        check_plain(path, prompt["id"], "concepts' name", c["name"])  # a checkbox's label
    if len(prompt["concepts"]) < 2:
        raise ContentError(f"{path}: entry [{prompt['id']}]: needs at least two concepts")


def _quiz(path, question):
    """Choices, and ``why_not`` if given: one text per wrong choice (null for the right one), never naming it."""
    check_choices(path, question)
    why_not = question.get("why_not")
    if why_not is None:
        return
    where = f"{path}: entry [{question['id']}]: 'why_not'"
    if not isinstance(why_not, list) or len(why_not) != len(question["choices"]):
        raise ContentError(f"{where} needs one entry per choice ({len(question['choices'])})")
    right = plain(question["choices"][question["answer"]]).lower()
    for i, text in enumerate(why_not):
        if i == question["answer"]:
            if text is not None:
                raise ContentError(f"{where}: entry {i} is the right choice's, so it is null")
        elif not isinstance(text, str) or not text.strip():
            raise ContentError(f"{where}: entry {i} should say why choice {i} is wrong")
        elif len(right) >= 8 and right in plain(text).lower():
            raise ContentError(f"{where}: entry {i} names the right choice, which gives it away")


def _predict(path, entry):
    check_choices(path, entry)
    if entry.get("ranks", 1) not in (1, 2):
        raise ContentError(f"{path}: entry [{entry['id']}]: 'ranks' must be 1 or 2")


def _timed(path, problem):
    check_choices(path, problem)
    check_plain(path, problem["id"], "title", problem["title"])
    if problem["kind"] not in TIMED_KINDS:
        raise ContentError(f"{path}: entry [{problem['id']}]: kind {problem['kind']!r} is not one of "
                           f"{', '.join(TIMED_KINDS)}")
    if problem["kind"] == "predict" and not isinstance(problem.get("code"), str):
        raise ContentError(f"{path}: entry [{problem['id']}]: a predict problem needs its 'code'")


CHECKS = {"quiz": _quiz, "predict": _predict, "explain": _explain, "timed": _timed}


def _set(path, problems):
    """A timed set's file as ``{"id", "badge", "seconds", "attempts", "problems"}``."""
    if sorted(p["kind"] for p in problems) != sorted(TIMED_KINDS):
        raise ContentError(f"{path}: a set has one problem of each kind: {', '.join(TIMED_KINDS)}")
    top = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(top.get("badge"), str) or not top["badge"].strip():
        raise ContentError(f"{path}: missing 'badge'")
    return {"id": path.stem, "badge": top["badge"], "seconds": top.get("seconds", 120),
            "attempts": top.get("attempts", 2), "problems": problems}


def _sheet(path):
    """A sheet's file as ``{"topic", "formulas", "idioms"}``, every idiom valid Python."""
    formulas = load_entries(path, "formulas", {"name": str, "formula": str, "note": str})
    idioms = load_entries(path, "idioms", {"title": str, "code": str})
    for idiom in idioms:
        try:
            ast.parse(idiom["code"])
        except SyntaxError as e:
            raise ContentError(f"{path}: entry [{idiom['id']}]: 'code' is not valid Python ({e.msg}, "
                               f"line {e.lineno})") from None
    return {"topic": json.loads(path.read_text(encoding="utf-8")).get("topic", path.stem),
            "formulas": formulas, "idioms": idioms}


def load(kind, topic_or_path):
    """The checked content of ``kind`` for a topic name (``"ddp"``) or a file's path.

    A list of entries for cards, quiz, explain and predict; a dict for a timed set
    (``{"id", "badge", "seconds", "attempts", "problems"}``) and a sheet
    (``{"topic", "formulas", "idioms"}``). Raises :class:`ContentError` naming the file and
    the entry.

    >>> len(load("quiz", "foundations")) >= 5, load("timed", "ddp")["attempts"]
    (True, 2)
    >>> load("cards", "no_such_topic")
    Traceback (most recent call last):
    ...
    grader.content.ContentError: .../cards/no_such_topic.json: no such file
    """
    path = Path(topic_or_path)
    if path.suffix != ".json":
        path = HERE / kind / f"{topic_or_path}.json"
    if kind == "sheets":
        return _sheet(path)
    list_key, required = FIELDS[kind]
    entries = load_entries(path, list_key, required)
    for entry in entries:
        CHECKS.get(kind, lambda *_: None)(path, entry)
    return _set(path, entries) if kind == "timed" else entries
