"""Review content beyond cards and quizzes: every file loads, every answer key is run."""

import contextlib
import io
import json

import pytest
import torch.distributed as dist

from conftest import REPO, read_nb
from grader import content
from grader.content import TIMED_KINDS, load
from grader.launch import launch
from grader.study import sheets
from grader.study.explain import covered
from grader.study.predict import run

TOPICS = content.topics("cards")
# How many items of each kind the five reference pages hold (see the seed map files).
REFERENCE = {"000": {"card": 5, "question": 5, "explain": 2},
             "001": {"card": 5, "question": 5, "explain": 2},
             "002": {"card": 5, "question": 5, "explain": 2},
             "003": {"problem": 5},
             "004": {"problem": 5}}


@pytest.mark.parametrize("topic", TOPICS)
def test_every_topic_has_each_review_mode(topic):
    assert len(load("explain", topic)) >= 2
    assert len(load("predict", topic)) >= 3
    assert sorted(p["kind"] for p in load("timed", topic)["problems"]) == sorted(TIMED_KINDS)
    assert load("sheets", topic)["formulas"] and load("sheets", topic)["idioms"]


@pytest.mark.parametrize("topic", TOPICS)
def test_each_explain_prompt_covers_all_its_concepts_in_its_own_model_answer(topic):
    for prompt in load("explain", topic):
        assert covered(prompt["answer"], prompt["concepts"]) == [c["name"] for c in prompt["concepts"]], prompt["id"]
        assert covered(prompt["prompt"], prompt["concepts"]) != [c["name"] for c in prompt["concepts"]], \
            f"{prompt['id']}: the prompt alone already covers every concept"


def programs():
    """(id, program, ranks, choices, answer) for every predict question and predict problem."""
    for topic in TOPICS:
        for q in load("predict", topic):
            yield q["id"], q.get("cpu_code", q["code"]), q.get("ranks", 1), q["choices"], q["answer"]
        for p in load("timed", topic)["problems"]:
            if p["kind"] == "predict":
                yield p["id"], p.get("cpu_code", p["code"]), p.get("ranks", 1), p["choices"], p["answer"]


def run_on_rank(code):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<predict>", "exec"), {"__name__": "__main__"})
    if dist.is_initialized():
        dist.destroy_process_group()
    return out.getvalue()


@pytest.mark.parametrize("item", list(programs()), ids=lambda item: item[0])
def test_the_marked_choice_is_what_the_program_prints(item):
    _, code, ranks, choices, answer = item
    printed = run(code) if ranks == 1 else launch(run_on_rank, code, nprocs=2, backend="gloo",
                                                  show_output=False, timeout=60)[0]
    lines = printed.splitlines()
    assert len(lines) == 1, f"the program should print one line, printed {printed!r}"
    assert lines[0].strip() == choices[answer].strip()
    assert [c for c in choices if c.strip() == lines[0].strip()] == [choices[answer]], "two choices are right"


def test_every_reference_item_has_a_course_counterpart():
    ids = set()
    for kind in ("cards", "quiz", "explain", "predict", "timed"):
        for path in (content.HERE / kind).glob("*.json"):
            data = json.loads(path.read_text())
            ids |= {e["id"] for key in ("cards", "questions", "prompts", "problems") for e in data.get(key, [])}
    listed = {}
    for topic in content.topics("seedmap"):
        for item in content.load_entries(content.HERE / "seedmap" / f"{topic}.json", "items",
                                         {"seed": str, "kind": str, "number": int, "about": str, "course": list}):
            unknown = set(item["course"]) - ids
            assert item["course"] and not unknown, f"{item['id']}: no course item {sorted(unknown)}"
            listed.setdefault(item["seed"], {}).setdefault(item["kind"], set()).add(item["number"])
    want = {seed: {kind: set(range(1, n + 1)) for kind, n in kinds.items()} for seed, kinds in REFERENCE.items()}
    assert listed == want
    assert sum(len(numbers) for kinds in listed.values() for numbers in kinds.values()) == 46  # 46 of 46


def test_every_reference_item_is_on_a_committed_cheat_sheet():
    # The reference pages, the seed map and the generated sheets stay in sync: every item a reference
    # page drills is mapped to at least one flashcard whose line is on its topic's committed sheet.
    committed = {topic: (sheets.OUT / f"{topic}.md").read_text() for topic in content.topics("sheets")}
    lines = {card["id"]: (topic, f"- **{sheets._plain(card['front'])}** {sheets._plain(card['back'])}")
             for topic in content.topics("cards") for card in load("cards", topic)}
    on_a_sheet, every = set(), set()
    for topic in content.topics("seedmap"):
        for item in json.loads((content.HERE / "seedmap" / f"{topic}.json").read_text())["items"]:
            key = (item["seed"], item["kind"], item["number"])
            every.add(key)
            if any(i in lines and lines[i][1] in committed[lines[i][0]] for i in item["course"]):
                on_a_sheet.add(key)
    assert len(every) == 46
    assert on_a_sheet == every, f"not on any cheat sheet (map a card, or run `make sheets`): {sorted(every - on_a_sheet)}"



def test_ids_are_unique_across_every_content_file():
    # Saved progress and Anki notes refer to an item by its id alone, whatever its file.
    seen = {}
    for path in sorted(content.HERE.glob("*/*.json")):
        if path.parent.name == "seedmap":
            continue
        data = json.loads(path.read_text())
        for entries in (v for v in data.values() if isinstance(v, list)):
            for entry in (e for e in entries if isinstance(e, dict) and "id" in e):
                assert entry["id"] not in seen, f"{entry['id']} is in {seen.get(entry['id'])} and {path}"
                seen[entry["id"]] = path
    assert len(seen) > 100


def test_nccl_returning_at_once_is_taught_with_when_it_holds():
    # An NCCL collective only queues its work once the group's communicator exists; the first
    # collective on a group made without a device_id blocks while NCCL creates it.
    texts = [path.read_text() for path in sorted(content.HERE.glob("*/*.json"))]
    texts += ["".join(cell["source"]) for cell in read_nb(REPO / "source" / "02_ddp" / "02_ddp.ipynb")["cells"]]
    for text in texts:
        for sentence in text.replace("\n", " ").split(". "):
            if "NCCL" in sentence and "queue" in sentence and "returns" in sentence:
                assert "communicator" in sentence, sentence
