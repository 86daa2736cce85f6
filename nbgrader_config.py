"""nbgrader settings for the course. Run nbgrader from the repository root."""

import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "multi-gpu-training"
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
