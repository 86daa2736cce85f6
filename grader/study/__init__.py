"""The review side of the course: one module per study mode, over plain, tested logic.

- ``cards``: flashcards with levels, keys and ratings; ``review_due`` draws today's cards
- ``quiz``: multiple choice with feedback and a running score
- ``explain``: write an explanation, see which key concepts it covers
- ``predict``: read a program, pick the line it prints
- ``timed``: five problems against the clock, attempts, hints and a badge
- ``schedule``: when a card is due again (FSRS)
- ``progress``: the learner's saved progress, one JSON file in their home
- ``dashboard``: cards reviewed and due, badges earned
- ``sheets``: cheat sheets generated from the content
- ``calculator``: lesson 03's memory calculator, :func:`grader.memory.estimate` live
- ``anki``: export to Anki

>>> from grader.study import show_cards, show_quiz, show_explain, show_predict, show_timed, show_calculator
"""

from .calculator import show_calculator
from .cards import review_due, show_cards
from .dashboard import dashboard
from .explain import show_explain
from .predict import show_predict
from .quiz import show_quiz
from .timed import show_timed

__all__ = ["dashboard", "review_due", "show_calculator", "show_cards", "show_explain", "show_predict",
           "show_quiz", "show_timed"]
