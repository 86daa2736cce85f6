"""The explain matcher against a labelled set of answers: how far its pre-ticks can be trusted."""

import json
import re

from grader.content import load, topics
from grader.study.explain import covered

from conftest import REPO

LABELLED = REPO / "tests" / "study" / "explain_labelled.json"


def measure():
    """{kind: (pre-ticks right, pre-ticks, concepts covered)} over the labelled answers, and "all"."""
    prompts = {p["id"]: p for topic in topics("explain") for p in load("explain", topic)}
    tally = {}
    for answer in json.loads(LABELLED.read_text())["answers"]:
        concepts = prompts[answer["prompt"]]["concepts"]
        ticked = {i for i, c in enumerate(concepts) if c["name"] in covered(answer["text"], concepts)}
        truth = set(answer["covers"])
        for kind in (answer["kind"], "all"):
            right, ticks, relevant = tally.get(kind, (0, 0, 0))
            tally[kind] = (right + len(ticked & truth), ticks + len(ticked), relevant + len(truth))
    return tally


def test_the_matcher_pre_ticks_only_what_an_answer_covers_and_the_guide_says_how_often():
    tally = measure()
    right, ticks, relevant = tally["all"]
    # A pre-tick the answer did not earn is the failure that matters: none on this set
    # (the wrong answers in the right words included).
    assert right == ticks, tally
    # The guide states what was measured: precision, and recall per kind of answer.
    guide = (REPO / "docs" / "self-learner.md").read_text().replace("\n", " ")
    count = len(json.loads(LABELLED.read_text())["answers"])
    assert re.search(rf"Measured on {count} labelled answers", guide)
    stated = re.search(r"precision (\d+) % \((\d+) of (\d+) pre-ticks\), recall (\d+) % on right answers in the "
                       r"course's words and (\d+) % on right answers in other words", guide)
    assert stated, "docs/self-learner.md states the matcher's measured precision and recall"
    recall = {kind: round(100 * tally[kind][0] / tally[kind][2]) for kind in ("right", "other-words")}
    assert tuple(int(x) for x in stated.groups()) == (round(100 * right / ticks), right, ticks,
                                                       recall["right"], recall["other-words"]), (tally, stated.groups())
