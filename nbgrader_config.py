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
# A graded notebook's kernels are killed at the end, with every process they started (their process
# group): a graceful shutdown waits for the interpreter to tear torch down, seconds per kernel.
c.Execute.shutdown_kernel = "immediate"

# Students may delete or edit test cells; grade with the instructor's copies.
c.OverwriteCells.add_missing_cells = True

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Release notebooks are committed cleared, so a diff shows only real changes.
c.ClearOutput.enabled = True

# Grades an instructor can trust (grader/grading/integrity.py; docs/instructor.md, "What grading guarantees").
# nbgrader's own pass is the clean room: before it runs, the submission is rebuilt from the
# release with the student's answer cells only (cells added are left out and listed), each
# answer cell is scanned and each test cell stamped with a token; the kernel starts in an
# empty directory with a fresh HOME and IPython directory. After it, a test cell without its
# token scores 0, and the tests after a flagged answer go to manual grading with the reason.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput,  # noqa: E402
                                    SaveAutoGrades)

from grader.grading.integrity import (CheckStamps, IsolatedExecute, ManualGradeFlagged, RestoreRelease,  # noqa: E402
                              ScanAnswers, StampTests)

c.Autograde.autograde_preprocessors = [RestoreRelease, ScanAnswers, StampTests, IsolatedExecute, CheckStamps,
                                       IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
                                       ManualGradeFlagged, AssignLatePenalties, CheckCellMetadata]
# Cells that only demonstrate (tagged "demo", opening with "# Demonstration") change no grade:
# autograde and validate skip them, so a class is graded without re-running the lesson's
# measurements for every student (tests/grading/test_notebooks.py runs them top to bottom).
c.Execute.skip_cells_with_tag = "demo"
# Autograding as root (a grading pod, a GPU machine)? Run the answers' kernels as another user, so
# that the system's permissions keep a course directory of mode 0700 from them too, where
# Landlock cannot confine files (machines with GPUs). That user must reach the Python environment;
# where it cannot, the kernel stays the grading user and the log says so.
# c.IsolatedExecute.answer_user = "nobody"
