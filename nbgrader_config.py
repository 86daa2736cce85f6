"""nbgrader settings for the course. Run nbgrader from the repository root."""

import os

c = get_config()  # noqa: F821 (provided by nbgrader)

# The exchange (where release_assignment puts lessons, submit puts submissions and
# release_feedback puts feedback) and the course id come from the environment, so a hub
# sets them once for instructors and students alike: in every single-user server's
# environment (JupyterHub's `c.Spawner.environment = {"COURSE_EXCHANGE": ..., "COURSE_ID":
# ...}`, or the image's ENV), with this file installed where students' nbgrader finds it too
# (/etc/jupyter/nbgrader_config.py or ~/.jupyter/). Unset or empty, the defaults apply:
# nbgrader's own exchange path and the course's id. The exchange root must exist and be
# writable by everyone (mode 0o777; release_assignment creates it so when it may).
c.CourseDirectory.course_id = os.environ.get("COURSE_ID") or "multi-gpu-training"
c.Exchange.root = os.environ.get("COURSE_EXCHANGE") or "/usr/local/share/nbgrader/exchange"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# The toolkit ships in the `grader` package; lesson folders hold only notebooks.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.pt"]

# A lesson cell runs in a few seconds on a 2-core CPU (the slowest, a timing cell, takes
# under 10 s); 120 s leaves room for a busy grading machine yet stops an endless loop.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# Students may delete or edit test cells; grade with the instructor's copies.
c.OverwriteCells.add_missing_cells = True

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Release notebooks are committed cleared, so a diff shows only real changes.
c.ClearOutput.enabled = True

# Grading that generic tampering cannot fool (grader/integrity.py): before the run, every
# student cell is scanned for ways into the grading and each test cell gets a line printing
# a fresh random token; after it, a test cell without its token, or after a suspicious cell,
# scores 0 with the reason in its output (the feedback) and in the autograde log.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, Execute, IgnorePattern,  # noqa: E402
                                    LimitOutput, SaveAutoGrades)

from grader.integrity import CheckStamps, StampTests  # noqa: E402

c.Autograde.autograde_preprocessors = [StampTests, Execute, CheckStamps, IgnorePattern, ClearMetadataPreprocessor,
                                       LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
