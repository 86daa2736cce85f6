"""Grading: what a challenge cell checks, and how a class's notebooks are graded.

- ``checks``: assertions for challenge cells, with messages that teach
- ``record``: what a learner's code did (forwards, batches, all-reduces, toolkit calls), not only its result
- ``fairness``: measured grades beside a reference; a busy machine gives "inconclusive", never 0
- ``integrity``: autograde's clean room (the release with the answer cells only, an isolated kernel),
  the scan of answer cells that sends flagged ones to manual grading, proof each test ran
- ``autograde``: nbgrader's autograde for a class in parallel, one worker per student, one gradebook

>>> from grader.grading import checks, fairness, record
"""
