"""The course toolkit: small, named helpers that every lesson notebook imports.

One module per concern:

- ``grader.hardware``: what this machine has and which device/backend to use
- ``grader.timing``: honest timers, speedup and efficiency
- ``grader.scaling``: DDP speedup measured (and graded fairly), Amdahl's and Gustafson's laws, the serial fraction fitted
- ``grader.checks``: assertions for challenge cells, with messages that teach
- ``grader.launch``: run a notebook function on N ranks with torch's elastic launcher
- ``grader.models``: the small model and synthetic data the lessons train on
- ``grader.memory``: bytes of parameters, gradients, optimizer state and activations, measured and predicted
- ``grader.pipeline``: pipeline stages and schedules run on ranks, with a timeline and the bubble measured
- ``grader.plots``: matplotlib figures for measurements
- ``grader.integrity``: autograde's clean room (the release with the answer cells only, an isolated
  kernel), the scan of answer cells that sends flagged ones to manual grading, proof each test ran
- ``grader.autograde``: nbgrader's autograde run for a class in parallel, one worker per student, one gradebook
- ``grader.study``: the review side (flashcards, quizzes, explain, predict, timed sets,
  spaced repetition, progress, cheat sheets, Anki export), fed from ``grader/content``
"""

__version__ = "0.1.0"
