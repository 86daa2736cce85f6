"""The course toolkit: small, named helpers that every lesson notebook imports.

One module per concern:

- ``grader.hardware``: what this machine has and which device/backend to use
- ``grader.timing``: honest timers, speedup and efficiency
- ``grader.checks``: assertions for challenge cells, with messages that teach
- ``grader.cards``: flashcard widgets fed from ``grader/content/cards``
- ``grader.quiz``: multiple-choice quiz widgets fed from ``grader/content/quiz``
- ``grader.launch``: run a notebook function on N ranks with torch's elastic launcher
- ``grader.models``: the small model and synthetic data the lessons train on
- ``grader.plots``: matplotlib figures for measurements
"""

__version__ = "0.1.0"
