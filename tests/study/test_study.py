"""The study side's logic, without a browser: scheduling, progress, matching, timers, exports."""

import datetime
import json
import sqlite3
import subprocess
import sys
import zipfile

import genanki
import pytest

from conftest import LESSONS
from grader import content
from grader.content import ContentError, load, topics
from grader.study import anki, schedule, sheets
from grader.study.cards import Flashcards, review_due
from grader.study.dashboard import summary
from grader.study.explain import Explain, covered, mentions
from grader.study.progress import Progress
from grader.study.timed import Attempt, ChallengeSet, show_timed

T0 = datetime.datetime(2026, 3, 1, 9, 0, tzinfo=datetime.timezone.utc)
CARDS = [{"id": f"t-{i}", "level": "beginner", "front": f"F{i}", "back": f"B{i}"} for i in range(4)]


@pytest.fixture
def store(tmp_path):
    return Progress(tmp_path / "progress.json")


# --- scheduling ---------------------------------------------------------------------------

def test_ratings_order_the_next_review_and_good_twice_leaves_learning():
    after = {r: schedule.due_at(schedule.review(None, r, T0, fuzz=False)) for r in schedule.RATINGS}
    assert after["again"] <= after["hard"] <= after["good"] < after["easy"]
    assert after["again"] - T0 < datetime.timedelta(minutes=10) and after["easy"] - T0 >= datetime.timedelta(days=1)
    first = schedule.review(None, "good", T0, fuzz=False)
    second = schedule.review(first, "good", schedule.due_at(first), fuzz=False)
    assert schedule.due_at(second) - schedule.due_at(first) >= datetime.timedelta(days=1)


def test_scheduling_without_fuzz_is_deterministic_and_rejects_unknown_ratings():
    assert schedule.review(None, "hard", T0, fuzz=False) == schedule.review(None, "hard", T0, fuzz=False)
    with pytest.raises(ValueError, match="again, hard, good, easy"):
        schedule.review(None, "great", T0)


def test_due_gives_due_cards_earliest_first_then_new_ones():
    early = schedule.review(None, "again", T0, fuzz=False)
    later = schedule.review(None, "good", T0, fuzz=False)
    future = schedule.review(None, "easy", T0, fuzz=False)
    schedules = {"t-0": later, "t-1": early, "t-2": future}
    when = T0 + datetime.timedelta(hours=1)
    assert [c["id"] for c in schedule.due(CARDS, schedules, when, new=5)] == ["t-1", "t-0", "t-3"]
    assert [c["id"] for c in schedule.due(CARDS, schedules, when, new=0)] == ["t-1", "t-0"]


# --- the progress file --------------------------------------------------------------------

def test_a_missing_file_starts_fresh_and_says_where_progress_goes(store):
    assert store.read() == {"version": 1, "cards": {}, "badges": {}}
    assert "starting fresh" in store.notice and str(store.path) in store.notice
    assert not store.path.exists()  # reading writes nothing


@pytest.mark.parametrize("bad, why", [("", "empty"), ("{not json", "not valid JSON"),
                                      ("[1, 2]", "expected an object"), ('{"cards": 3}', "'cards'")])
def test_an_unreadable_file_is_kept_aside_untouched_and_named(store, bad, why):
    store.path.write_text(bad)
    record = store.update(lambda r: r["badges"].update(ddp="2026-03-01"))
    assert record["badges"] == {"ddp": "2026-03-01"}
    aside = list(store.path.parent.glob("progress.json.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_text() == bad
    assert why in store.notice and str(aside[0]) in store.notice
    store.path.write_text(bad)  # a second bad file in the same second gets its own name
    store.read()
    assert len(list(store.path.parent.glob("progress.json.unreadable-*"))) == 2


def test_review_widgets_say_at_once_that_an_unreadable_file_was_kept_aside(store):
    for open_widget, status in [(lambda: Flashcards(CARDS, progress=store), lambda w: w.status.value),
                                (lambda: ChallengeSet(load("timed", "ddp"), progress=store), lambda w: w.badge.value)]:
        store.path.write_text("{not json")
        shown = status(open_widget())  # before any rating or answer
        aside = sorted(store.path.parent.glob("progress.json.unreadable-*"))[-1]
        assert "could not be read" in shown and str(aside) in shown and aside.read_text() == "{not json"


def test_a_write_that_fails_leaves_the_previous_file_whole(store, monkeypatch):
    store.update(lambda r: r["badges"].update(first="2026-03-01"))
    before = store.path.read_bytes()

    def dump_then_fail(obj, f, **kwargs):
        f.write('{"version": 1, "cards": {"half')
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", dump_then_fail)
    with pytest.raises(OSError, match="disk full"):
        store.update(lambda r: r["badges"].update(second="2026-03-02"))
    assert store.path.read_bytes() == before
    assert [p.name for p in store.path.parent.iterdir() if p.name.startswith(".")] == []


WRITER = """
import sys
from grader.study.progress import Progress
store = Progress(sys.argv[1])
for i in range(40):
    store.update(lambda r: r["cards"].__setitem__(f"{sys.argv[2]}-{i}", {"due": "2026-01-01T00:00:00+00:00"}))
"""


def test_two_kernels_writing_at_once_lose_nothing(store):
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.path), name]) for name in ("a", "b")]
    assert [p.wait(timeout=120) for p in writers] == [0, 0]
    assert len(store.read()["cards"]) == 80


# --- flashcards with ratings --------------------------------------------------------------

def test_rating_a_revealed_card_saves_its_schedule_and_moves_on(store):
    deck = Flashcards(CARDS, progress=store, clock=lambda: T0, fuzz=False)
    assert deck.rate("good") is None and "Reveal the answer first" in deck.status.value
    assert all(b.disabled for b in deck.rate_buttons)
    deck.press(" ")
    assert not any(b.disabled for b in deck.rate_buttons)
    deck.press("3")
    saved = store.read()["cards"]
    assert list(saved) == ["t-0"] and saved["t-0"] == schedule.review(None, "good", T0, fuzz=False)
    assert deck.index == 1 and "comes back in 10 minutes" in deck.status.value


def test_a_session_brings_again_back_keeps_its_place_when_filtered_and_counts_down(store):
    deck = [{"id": f"s-{i}", "level": level, "front": f"F{i}", "back": f"B{i}"}
            for i, level in enumerate(["beginner", "beginner", "expert", "beginner"])]
    session = Flashcards(deck, progress=store, session=True, clock=lambda: T0, fuzz=False)
    assert "4 left today" in session.counter.value
    session.flip()
    assert [b.description for b in session.rate_buttons] == \
        ["Again · 1 minute", "Hard · 6 minutes", "Good · 10 minutes", "Easy · 8 days"]
    session.rate("again")  # s-0 goes to the back of the queue, not out of it
    assert session.card["id"] == "s-1" and "later in this session" in session.status.value
    assert [c["id"] for c in session.queue] == ["s-1", "s-2", "s-3", "s-0"]
    assert "4 left today" in session.counter.value
    session.flip(); session.rate("good")
    assert "3 left today" in session.counter.value and "No saved progress" not in session.status.value
    session.level.value = "expert"  # narrows the view; the session and its order stay
    assert [c["id"] for c in session.cards] == ["s-2"]
    session.flip(); session.rate("good")
    assert "No cards at this level (2 left at other levels)" in session.face.value
    session.level.value = "all levels"
    assert [c["id"] for c in session.cards] == ["s-3", "s-0"] and "2 left today" in session.counter.value


def test_again_comes_back_when_its_learning_step_is_up_not_only_at_the_end(store):
    deck = [{"id": f"s-{i}", "level": "beginner", "front": f"F{i}", "back": f"B{i}"} for i in range(4)]
    t = [T0]
    session = Flashcards(deck, progress=store, session=True, clock=lambda: t[0], fuzz=False)
    session.flip(); session.rate("again")  # s-0: due again in a minute
    assert session.card["id"] == "s-1"
    t[0] += datetime.timedelta(seconds=30)
    session.flip(); session.rate("good")  # its minute is not up: the next new card
    assert session.card["id"] == "s-2"
    t[0] += datetime.timedelta(seconds=40)
    session.flip(); session.rate("good")  # 70 s: s-0's step is up, before s-3
    assert session.card["id"] == "s-0"
    session.flip(); session.rate("again")  # again: s-3 first, then s-0 shown early, the only one left
    assert session.card["id"] == "s-3"
    session.flip(); session.rate("easy")
    assert session.card["id"] == "s-0" and "1 left today" in session.counter.value
    session.flip(); session.rate("good")
    assert session.card is None and "All done for now" in session.face.value


def test_new_cards_have_a_daily_limit_that_a_restart_keeps(store):
    session = review_due(["ddp"], new=10, progress=store, clock=lambda: T0, new_per_day=4)
    assert len(session.cards) == 4 and "new cards today: 0 of 4" in session.widget.children[0].value
    for _ in range(3):
        session.flip()
        session.rate("good")
    again = review_due(["ddp"], new=10, progress=store, clock=lambda: T0, new_per_day=4)  # a restart
    assert len(again.cards) == 1 and "new cards today: 3 of 4" in again.widget.children[0].value
    tomorrow = T0 + datetime.timedelta(days=1)
    assert len(review_due(["ddp"], new=10, progress=store, clock=lambda: tomorrow, new_per_day=4).cards) >= 4


def test_new_cards_come_in_the_courses_order_lesson_00_first(store):
    assert [lesson.split("_", 1)[1] for lesson in LESSONS] == list(content.COURSE_ORDER)
    assert set(topics("cards")) == set(content.COURSE_ORDER)
    topic_of = {c["id"]: topic for topic in topics("cards") for c in load("cards", topic)}
    session = review_due(new=5, progress=store, clock=lambda: T0, new_per_day=20)  # a learner's first day
    assert [topic_of[c["id"]] for c in session.cards] == [t for t in content.COURSE_ORDER[:4] for _ in range(5)]


def test_new_cards_come_first_from_the_lessons_the_learner_opened(store):
    from grader.study import show_cards

    topic_of = {c["id"]: topic for topic in topics("cards") for c in load("cards", topic)}
    # A learner who went straight to lessons 04 and 03 (their flashcards shown): those come
    # first, in the course's order, then the lessons not opened yet, from lesson 00.
    show_cards("batch_scaling", progress=store)
    show_cards("model_parallel", progress=store)
    show_cards("model_parallel", progress=store)  # shown again: still one topic, first opened at its first showing
    assert list(store.read()["opened"]) == ["batch_scaling", "model_parallel"]
    session = review_due(new=5, progress=store, clock=lambda: T0, new_per_day=20)
    assert [topic_of[c["id"]] for c in session.cards] == \
        [t for t in ("model_parallel", "batch_scaling", "foundations", "data_parallel") for _ in range(5)]
    # Nothing kept, nothing noted
    show_cards("ddp", progress=None)
    assert "ddp" not in store.read()["opened"]


def test_a_due_session_draws_due_cards_from_every_topic_then_new_ones(store):
    first = {"fnd": load("cards", "foundations")[0], "ddp": load("cards", "ddp")[0]}
    store.update(lambda r: r["cards"].update({c["id"]: schedule.review(None, "again", T0, fuzz=False)
                                              for c in first.values()}))
    later = T0 + datetime.timedelta(hours=2)
    session = review_due(new=1, progress=store, clock=lambda: later)
    ids = [c["id"] for c in session.cards]
    assert sorted(ids[:2]) == sorted(c["id"] for c in first.values())
    assert len(ids) == 2 + len(topics("cards")) and "2 due" in session.widget.children[0].value
    while session.cards:  # rating every card ends the session
        session.flip()
        session.rate("easy")
    assert "All done" in session.face.value
    assert not review_due(new=0, progress=store, clock=lambda: later).cards


# --- explain ------------------------------------------------------------------------------

def test_concepts_match_variants_and_phrases_not_scattered_words():
    assert mentions("Gradients get AVERAGED across ranks", "average the gradient") is False
    assert mentions("they average gradients", "averaged gradient")
    assert mentions("uses all-reduce", "all reduce") and mentions("an allreduce", "allreduce")
    concepts = [{"name": "one process per GPU", "phrases": ["process per gpu", "one process each"]},
                {"name": "all-reduce", "phrases": ["all-reduce", "allreduce"]},
                {"name": "buckets", "phrases": ["bucket"]}]
    assert covered("DDP starts a process per GPU; buckets of gradients are all-reduced.", concepts) == \
        ["one process per GPU", "all-reduce", "buckets"]
    assert covered("nothing relevant", concepts) == []
    # Words ending in -ss keep their last s: the plural matches, the bare word still does.
    assert mentions("two processes", "process") and mentions("the loss", "losses") and mentions("it passes", "pass")


def test_a_negated_phrase_is_not_credited_and_a_plain_one_still_is():

    prompt = load("explain", "ddp")[0]
    denial = ("DDP does NOT use multiple processes and needs no DistributedSampler; gradients are never "
              "all-reduced or averaged, and the replicas drift apart and are never identical")
    # Was 4 of 4. A negation denies its whole clause ("the replicas drift apart and are never
    # identical" names replicas in a clause that says "never").
    assert covered(denial, prompt["concepts"]) == []
    for negated in ["it isn't averaged", "it does not average", "without averaging", "no averaging",
                    "it doesn't really average", "never averaged"]:
        assert not mentions(negated, "average"), negated
    # A negation reaches to the end of its own clause, and no further.
    assert mentions("not the weights: the gradients are averaged", "average")
    assert mentions("nothing is lost, and every rank averages", "average")
    assert not mentions("no copy is made until the ranks later average them", "average")
    assert mentions("no copy is made, and the ranks later average them", "average")
    # Denials that reach further (issue 33: "a myth that ..." ticked all four concepts)
    myth = ("It is a myth that DDP uses one process per GPU, that each rank trains on its own shard of the data, "
            "that gradients are all-reduced and averaged in the backward pass, or that the replicas stay identical.")
    assert covered(myth, prompt["concepts"]) == []
    assert covered(myth.replace("It is a myth that", "People think that"), prompt["concepts"]) == \
        [c["name"] for c in prompt["concepts"]]
    for denied in ["Neither is there one process per GPU, nor are gradients averaged",
                   "Instead of one process per GPU, DDP runs threads", "DDP runs threads rather than a process per GPU",
                   "It is wrong to say that gradients are averaged, or that there is a process per GPU"]:
        assert covered(denied, prompt["concepts"]) == [], denied
    assert covered("DDP runs one process per GPU instead of threads", prompt["concepts"]) == [prompt["concepts"][0]["name"]]
    assert mentions("Not one thread per GPU but one process per GPU", "process per GPU")


def test_explain_shows_the_model_answer_and_saves_the_learners_own_marks(tmp_path):
    from grader.study.progress import Progress

    prompt = {"id": "x", "prompt": "Why?", "hint": "h", "answer": "MODEL",
              "concepts": [{"name": "split", "phrases": ["split"]}, {"name": "gather", "phrases": ["gather"]},
                           {"name": "replicate", "phrases": ["replica", "copy"]}]}
    store = Progress(tmp_path / "progress.json")
    box = Explain(prompt, progress=store)
    assert box.judge.layout.display == "none"  # nothing to judge before the answer is written
    # The text as the page sends it at every keystroke: a message of its own, not a state update.
    box.text._handle_custom_msg({"value": "It splits the batch and copies the model, but does not gather."}, [])
    box.submit.click()
    assert "MODEL" in box.result.value and box.judge.layout.display == "flex"
    assert [t.value for t in box.ticks] == [True, False, True]  # suggestions, negated gather left out
    box.ticks[2].value = False  # the learner decides: "copies the model" was not what was asked
    box.save_button.click()
    saved = store.read()["explain"]["x"]
    assert saved["covered"] == ["split"] and saved["rating"] == "again" and saved["schedule"]
    assert "1 of 3 concepts" in box.saved.value and "comes back in" in box.saved.value
    box.ticks[1].value = box.ticks[2].value = True
    box.save()
    assert store.read()["explain"]["x"]["rating"] == "good"


# --- timed sets ---------------------------------------------------------------------------

def test_a_set_finished_without_the_badge_leaves_only_its_summary(store):
    s = ChallengeSet(load("timed", "ddp"), clock=lambda: 0.0, progress=store)
    assert "No saved progress yet" in s.badge.value  # said on opening, until the first answer is saved
    s.open(0)
    assert s.badge.value == ""
    for i, problem in enumerate(s.set["problems"]):
        s.open(i)
        for _ in range(s.set["attempts"]):
            s.submit(i, (problem["answer"] + 1) % len(problem["choices"]))
    assert "Badge not earned" in s.summary.value and s.badge.value == ""


def test_an_attempt_runs_out_of_tries_and_of_time():
    t = [0.0]
    a = Attempt({"answer": 2}, seconds=120, attempts=2, clock=lambda: t[0])
    assert a.remaining() == 120 and not a.over
    a.start()
    t[0] = 30.2
    assert a.remaining() == 90 and a.answer(0) == "wrong" and a.left == 1
    assert a.answer(1) == "wrong" and a.left == 0 and a.over and a.answer(2) == "over"
    b = Attempt({"answer": 2}, seconds=120, attempts=2, clock=lambda: t[0])
    b.start()
    t[0] += 120
    assert b.remaining() == 0 and b.over and b.answer(2) == "time" and not b.solved


def test_a_wrong_answer_gets_a_nudge_and_the_explanation_waits_until_the_problem_closes(store):
    t = [0.0]
    s = ChallengeSet(load("timed", "ddp"), clock=lambda: t[0], progress=store)
    problem, wrong = s.set["problems"][0], (s.set["problems"][0]["answer"] + 1) % len(s.set["problems"][0]["choices"])
    s.start_button.click()
    s.choices.index = wrong
    s.submit_button.click()
    assert "1 attempt left." in s.feedback.value and problem["hint"] in s.feedback.value
    assert problem["explanation"] not in s.feedback.value
    assert problem["choices"][problem["answer"]] not in s.feedback.value
    assert "1 attempt left" in s.clock_label.value
    s.choices.index = wrong  # the second wrong answer closes it: now the answer and the why
    s.submit_button.click()
    assert "No attempts left" in s.feedback.value and problem["explanation"] in s.feedback.value
    assert problem["choices"][problem["answer"]] in s.feedback.value
    assert "No attempts left" in s.clock_label.value and "over" not in s.clock_label.value


def test_attempts_and_clocks_survive_a_restart_and_a_finished_set_says_how_it_went(store):
    t = [1000.0]
    s = ChallengeSet(load("timed", "ddp"), clock=lambda: t[0], progress=store)
    problems = s.set["problems"]
    s.open(0)
    s.submit(0, (problems[0]["answer"] + 1) % len(problems[0]["choices"]))
    t[0] += 30
    again = ChallengeSet(load("timed", "ddp"), clock=lambda: t[0], progress=store)  # a new kernel, same file
    assert again.attempts[0].left == 1 and again.attempts[0].remaining() == s.set["seconds"] - 30
    assert again.ticker.running and again.summary.value == ""
    again.submit(0, (problems[0]["answer"] + 1) % len(problems[0]["choices"]))  # out of attempts
    for i in range(1, len(problems)):
        again.open(i)
        t[0] += 10
        assert again.submit(i, problems[i]["answer"]) == "right"
    assert not again.earned and "Badge not earned" in again.summary.value
    assert f"4 of {len(problems)} solved" in again.summary.value and problems[0]["title"] in again.summary.value
    assert "ddp" not in store.read()["badges"]
    third = ChallengeSet(load("timed", "ddp"), clock=lambda: t[0], progress=store)
    assert "4 of 5 solved" in third.summary.value and third.submit_button.disabled


def test_a_shown_answer_closes_its_problem_whatever_clock_the_set_is_shown_with_again(store):
    t, problems = [0.0], load("timed", "ddp")["problems"]
    short = ChallengeSet({**load("timed", "ddp"), "seconds": 5}, clock=lambda: t[0], progress=store, practice=True)
    assert "Practice" in short.widget.children[0].value and "no badge" in short.widget.children[0].value
    for i in range(len(problems)):
        short.open(i)
    t[0] = 6
    short.ticker.tick += 1  # every clock ran out: the answers are shown
    for seconds in (None, 3600):  # shown again, with the set's own clock and with an hour
        again = show_timed("ddp", seconds=seconds, progress=store)  # the real clock: long past those deadlines
        assert all(a.over and not a.solved for a in again.attempts) and again.practice == bool(seconds)
    full = ChallengeSet(load("timed", "ddp"), clock=lambda: t[0], progress=store)
    assert [full.submit(i, p["answer"]) for i, p in enumerate(problems)] == ["time"] * len(problems)
    assert not full.earned and "ddp" not in store.read()["badges"]
    assert "Closed · Time's up" in full.clock_label.value and full.submit_button.disabled


def test_practice_earns_no_badge_even_when_every_problem_is_solved(store):
    t, problems = [0.0], load("timed", "ddp")["problems"]
    long = ChallengeSet({**load("timed", "ddp"), "seconds": 3600}, clock=lambda: t[0], progress=store, practice=True)
    for i, p in enumerate(problems):
        long.open(i)
        assert long.submit(i, p["answer"]) == "right"
    assert not long.earned and "No badge: practice" in long.summary.value and "ddp" not in store.read()["badges"]
    again = ChallengeSet(load("timed", "ddp"), clock=lambda: t[0], progress=store)  # the set's own clock now
    assert not again.earned and "ddp" not in store.read()["badges"]


def test_a_problem_past_its_deadline_opens_closed_and_a_finished_sets_time_stops_at_the_last_answer(store):
    t, problems = [0.0], load("timed", "data_parallel")["problems"]
    s = ChallengeSet(load("timed", "data_parallel"), clock=lambda: t[0], progress=store)
    s.open(0)
    t[0] = 500  # the kernel restarted long after: the deadline passed meanwhile
    again = ChallengeSet(load("timed", "data_parallel"), clock=lambda: t[0], progress=store)
    assert again.attempts[0].over and again.submit_button.disabled and not again.ticker.running
    assert "Closed · Time's up" in again.clock_label.value and "Time left" not in again.clock_label.value
    for i, p in enumerate(problems[1:], 1):  # three seconds each
        again.open(i)
        t[0] += 3
        again.submit(i, p["answer"])
    t[0] += 100  # a minute and more after the last answer
    again.ticker.tick += 1
    assert "4 of 5 solved</b> in 2:12." in again.summary.value  # 120 s for the first, 4 x 3 s for the rest


def test_the_countdown_expires_and_reveals_the_answer(store):
    t = [0.0]
    s = ChallengeSet(load("timed", "foundations"), clock=lambda: t[0], progress=store)
    s.open(0)
    assert "2:00" in s.clock_label.value and s.ticker.running
    t[0] = 119.5
    s.ticker.tick += 1
    assert "0:01" in s.clock_label.value and "Time's up" not in s.feedback.value
    t[0] = 121
    s.ticker.tick += 1
    problem = s.set["problems"][0]
    assert "Closed · Time's up" in s.clock_label.value and "Time's up" in s.feedback.value
    assert problem["choices"][problem["answer"]] in s.feedback.value
    assert not s.ticker.running and s.submit_button.disabled
    assert s.submit(0, problem["answer"]) == "time"


def test_all_five_right_earns_the_badge_once_and_keeps_it(store):
    t = [0.0]
    s = ChallengeSet(load("timed", "data_parallel"), clock=lambda: t[0], progress=store)
    for i, p in enumerate(s.set["problems"]):
        assert not s.earned
        s.open(i)
        assert s.submit(i, p["answer"]) == "right"
    assert s.earned and s.set["badge"] in s.badge.value
    assert list(store.read()["badges"]) == ["data_parallel"]
    assert summary(store.read())[topics("cards").index("data_parallel")][4].startswith(s.set["badge"])


def test_a_set_must_have_one_problem_of_each_kind(tmp_path):
    data = json.loads((content.HERE / "timed" / "ddp.json").read_text())
    data["problems"][1]["kind"] = data["problems"][0]["kind"]
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ContentError, match="one problem of each kind"):
        load("timed", path)


# --- cheat sheets and Anki ----------------------------------------------------------------

@pytest.mark.parametrize("topic", topics("cards"))
def test_cheat_sheets_are_in_sync_with_the_content(topic):
    committed = sheets.OUT / f"{topic}.md"
    assert committed.exists(), "run `make sheets`"
    assert committed.read_text() == sheets.render(topic), "out of date: run `make sheets`"


@pytest.mark.parametrize("topic", topics("sheets"))
def test_a_cheat_sheet_holds_every_card_formula_and_idiom(topic):
    text = sheets.render(topic)
    data = sheets.load("sheets", topic)
    assert text.count("\n- **") == len(load("cards", topic))
    assert all(f["formula"] in text for f in data["formulas"])
    assert text.count("```python") == len(data["idioms"])


def test_an_idiom_that_is_not_python_is_refused(tmp_path):
    path = tmp_path / "sheet.json"
    path.write_text(json.dumps({"formulas": [{"id": "f-1", "name": "n", "formula": "a = b", "note": "x"}],
                                "idioms": [{"id": "i-1", "title": "t", "code": "def broken(:"}]}))
    with pytest.raises(ContentError, match=r"\[i-1\]: 'code' is not valid Python"):
        sheets.load("sheets", path)


def anki_notes(path):
    with zipfile.ZipFile(path) as z:
        db = path.with_suffix(".anki2")
        db.write_bytes(z.read("collection.anki2"))
    with sqlite3.connect(db) as conn:
        return {guid: flds.split("\x1f") for guid, flds in conn.execute("select guid, flds from notes")}


def test_anki_export_has_a_note_per_item_with_guids_from_content_ids(tmp_path):
    path = anki.export(["ddp"], tmp_path)
    notes = anki_notes(path)
    ids = [c["id"] for c in load("cards", "ddp")] + [q["id"] for q in load("quiz", "ddp")]
    assert set(notes) == {genanki.guid_for(i) for i in ids}
    assert notes[genanki.guid_for("ddp-card-01")][3] == "ddp-card-01"
    again = anki_notes(anki.export(["ddp"], tmp_path / "again"))
    assert set(again) == set(notes)  # a re-export updates the same notes in Anki


def test_anki_export_of_every_topic_is_one_file_with_a_deck_each(tmp_path):
    path = anki.export(out=tmp_path)
    assert path.name == "multi-gpu-course.apkg"
    with zipfile.ZipFile(path) as z:
        (tmp_path / "c.anki2").write_bytes(z.read("collection.anki2"))
    with sqlite3.connect(tmp_path / "c.anki2") as conn:
        decks = json.loads(conn.execute("select decks from col").fetchone()[0])
    names = {d["name"] for d in decks.values()}
    assert {f"Multi-GPU Training with PyTorch::{t}" for t in topics("cards")} <= names
