"""The course toolkit: small, named helpers that every lesson notebook imports.

One module per concern:

- ``grader.hardware``: what this machine has and which device/backend to use
- ``grader.timing``: honest timers, speedup and efficiency
- ``grader.scaling``: DDP speedup measured, Amdahl's and Gustafson's laws, the serial fraction fitted
- ``grader.launch``: run a notebook function on N ranks with torch's elastic launcher
- ``grader.models``: the small model and synthetic data the lessons train on
- ``grader.memory``: bytes of parameters, gradients, optimizer state and activations, measured and predicted
- ``grader.pipeline``: pipeline stages and schedules run on ranks, with a timeline and the bubble measured
- ``grader.plots``: matplotlib figures for measurements
- ``grader.grading``: the challenge cells' checks and records, the fair grading of measurements, autograde's
  clean room and the class graded in parallel
- ``grader.content``: the course's content as data (cards, quizzes, prompts, sets, sheets, thresholds), loaded and checked
- ``grader.study``: the review side (flashcards, quizzes, explain, predict, timed sets,
  spaced repetition, progress, cheat sheets, Anki export), fed from ``grader/content``
"""

__version__ = "0.1.0"
