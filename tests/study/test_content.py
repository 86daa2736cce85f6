"""Decks, question banks and their widgets."""

import json

import pytest

from grader import content
from grader.content import ContentError, load, plain
from grader.study.cards import Flashcards, show_cards
from grader.study.quiz import Quiz, show_quiz


@pytest.mark.parametrize("topic", content.topics("cards"))
def test_every_deck_loads_with_enough_cards(topic):
    cards = load("cards", topic)
    assert len(cards) >= 10
    assert {c["level"] for c in cards} <= set(content.LEVELS)


@pytest.mark.parametrize("topic", content.topics("quiz"))
def test_every_question_bank_loads(topic):
    questions = load("quiz", topic)
    assert len(questions) >= 5
    # Every wrong choice says why it is wrong, so a wrong answer teaches without giving the answer away.
    assert [q["id"] for q in questions if not q.get("why_not")] == []


def test_each_deck_has_a_question_bank():
    assert content.topics("cards") == content.topics("quiz")


def write(tmp_path, data, name="deck.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize("cards, message", [
    ([{"id": "c-1", "level": "beginner", "front": "Q"}], "entry 1 [c-1] ('Q'): missing 'back'"),
    ([{"id": "c-1", "level": "beginner", "front": "Q", "back": "A"},
      {"id": "c-2", "level": "guru", "front": "Second", "back": "A"}], "entry 2 [c-2] ('Second'): level 'guru'"),
    ([{"id": "c-1", "level": "beginner", "front": "  ", "back": "A"}], "'front' is empty"),
    ([{"id": "c-1", "level": "beginner", "front": 3, "back": "A"}], "'front' should be str"),
    ([{"level": "beginner", "front": "Q", "back": "A"}], "entry 1: 'id' should be lower-case words"),
    ([{"id": "Card 1", "level": "beginner", "front": "Q", "back": "A"}], "got 'Card 1'"),
    ([{"id": "c-1", "level": "beginner", "front": "Q", "back": "A"},
      {"id": "c-1", "level": "beginner", "front": "Q2", "back": "A"}], "entry 2: id 'c-1' is used twice"),
    (["just text"], "entry 1: expected an object"),
    ([], "non-empty list 'cards'"),
])
def test_malformed_deck_names_file_and_card(tmp_path, cards, message):
    path = write(tmp_path, {"cards": cards})
    with pytest.raises(ContentError) as e:
        load("cards", path)
    assert str(path) in str(e.value) and message in str(e.value)


def test_deck_that_is_not_json_names_the_file(tmp_path):
    path = write(tmp_path, "{cards: [")
    with pytest.raises(ContentError, match="not valid JSON"):
        load("cards", path)
    with pytest.raises(ContentError, match="no such file"):
        load("cards", tmp_path / "missing.json")


@pytest.mark.parametrize("question, message", [
    ({"id": "q-1", "question": "Q", "choices": ["a"], "answer": 0, "explanation": "e"}, "at least two"),
    ({"id": "q-1", "question": "Q", "choices": ["a", "b"], "answer": 2, "explanation": "e"},
     "'answer' 2 is not an index"),
    ({"id": "q-1", "question": "Q", "choices": ["a", "b"], "answer": True, "explanation": "e"},
     "'answer' should be int"),
    ({"id": "q-1", "question": "Q", "choices": ["a", "b"], "answer": 0}, "missing 'explanation'"),
    ({"id": "q-1", "question": "Q", "choices": ["a", "b"], "answer": 0, "explanation": "e", "why_not": [None]},
     "'why_not' needs one entry per choice (2)"),
    ({"id": "q-1", "question": "Q", "choices": ["a", "b"], "answer": 0, "explanation": "e",
      "why_not": ["right", "wrong"]}, "entry 0 is the right choice's, so it is null"),
    ({"id": "q-1", "question": "Q", "choices": ["a", "b"], "answer": 0, "explanation": "e",
      "why_not": [None, " "]}, "entry 1 should say why choice 1 is wrong"),
    ({"id": "q-1", "question": "Q", "choices": ["the sum of the gradients", "the mean of the gradients"], "answer": 1,
      "explanation": "e", "why_not": ["Not summed: it is <b>the mean of the gradients</b>.", None]},
     "entry 0 names the right choice"),
])
def test_malformed_question_names_file_and_entry(tmp_path, question, message):
    path = write(tmp_path, {"questions": [question]})
    with pytest.raises(ContentError) as e:
        load("quiz", path)
    assert str(path) in str(e.value) and "q-1" in str(e.value) and message in str(e.value)


CARDS = [{"id": "t-1", "level": "beginner", "front": "F1", "back": "B1"},
         {"id": "t-2", "level": "expert", "front": "F2", "back": "B2"},
         {"id": "t-3", "level": "beginner", "front": "F3", "back": "B3"}]


def test_flashcards_flip_move_and_wrap():
    deck = Flashcards(CARDS)
    assert "F1" in deck.face.value and deck.counter.value == "card 1 of 3"
    deck.reveal_button.click()
    assert "B1" in deck.face.value and deck.reveal_button.description == "Hide"
    deck.next_button.click()
    assert "F2" in deck.face.value and not deck.revealed
    deck.prev_button.click()
    deck.prev_button.click()
    assert "F3" in deck.face.value


def test_flashcards_keys():
    deck = Flashcards(CARDS)
    deck.press(" ")
    assert deck.revealed
    deck.press("ArrowRight")
    assert deck.index == 1 and not deck.revealed
    deck.press("ArrowLeft")
    deck.press("x")  # unknown keys are ignored
    assert deck.index == 0 and not deck.revealed
    # The browser sends the keys a focused deck takes as messages of its DeckKeys widget.
    deck.keys._handle_custom_msg({"key": " "}, [])
    assert deck.revealed


def test_flashcards_filter_and_shuffle():
    deck = Flashcards(CARDS, seed=3)
    deck.level.value = "expert"
    assert deck.counter.value == "card 1 of 1" and "F2" in deck.face.value
    deck.level.value = "advanced"
    assert deck.card is None and "No cards at this level" in deck.face.value
    deck.move(1)  # nothing to move through, nothing breaks
    deck.level.value = "all levels"
    deck.shuffle()
    assert sorted(c["front"] for c in deck.cards) == ["F1", "F2", "F3"]
    assert show_cards("foundations", level="beginner", progress=None).level.value == "beginner"


def test_quiz_feedback_and_score_counts_first_answers():
    quiz = show_quiz("foundations")
    q0 = quiz.questions[0]
    wrong = (q0["answer"] + 1) % len(q0["choices"])
    assert quiz.answer(0, wrong) is False
    # A wrong answer names neither the right choice nor the explanation that would give it away.
    shown = quiz.feedback[0].value
    assert "Not this one" in shown and "first answer" in shown and q0["explanation"] not in shown
    assert plain(q0["choices"][q0["answer"]]) not in shown and q0["choices"][q0["answer"]] not in shown
    assert q0["why_not"][wrong] in shown  # why that choice is wrong
    assert quiz.answer(0, q0["answer"]) is True
    assert "only the first answer counts" in quiz.feedback[0].value and q0["explanation"] in quiz.feedback[0].value
    assert quiz.score == (0, 1)  # the first answer counts
    assert quiz.answer(1, quiz.questions[1]["answer"]) is True
    assert quiz.score == (1, 2) and "Score: 1 / " in quiz.score_label.value


def test_quiz_check_without_choice_asks_for_one():
    quiz = Quiz(load("quiz", "data_parallel"))
    assert quiz._check(0) is None and "Pick an answer" in quiz.feedback[0].value
    assert quiz.score == (0, 0)


def test_markup_in_a_field_shown_as_plain_text_is_refused_with_the_file_and_entry(tmp_path):
    from grader.content import HERE, ContentError, load

    timed = json.loads((HERE / "timed" / "ddp.json").read_text())
    timed["problems"][0]["title"] = "Why <code>no_sync</code>?"
    (tmp_path / "timed.json").write_text(json.dumps(timed))
    with pytest.raises(ContentError, match=rf"timed.json: entry \[{timed['problems'][0]['id']}\]: 'title'.*<code>"):
        load("timed", tmp_path / "timed.json")
    explain = json.loads((HERE / "explain" / "ddp.json").read_text())
    explain["prompts"][0]["concepts"][0]["name"] = "gradients &amp; buckets"
    (tmp_path / "explain.json").write_text(json.dumps(explain))
    with pytest.raises(ContentError, match=r"explain.json: entry \[ddp-explain-01\].*&amp;"):
        load("explain", tmp_path / "explain.json")
