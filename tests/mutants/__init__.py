"""Mutants: plausible wrong answers a student might write, one module per lesson.

``MUTANTS[lesson][name] = (solution grade id, answer cell source)``. In the nbgrader round
trip each must lose exactly its challenge's points (tests/grading/roundtrip.py); every challenge
keeps at least one (a test checks it), and a mutant that scores is a bug in the challenge.
Add one to the lesson's module when a wrong answer slips through.
"""

from . import batch_scaling, data_parallel, ddp, foundations, model_parallel

MUTANTS = {"00_foundations": foundations.MUTANTS, "01_data_parallel": data_parallel.MUTANTS,
           "02_ddp": ddp.MUTANTS, "03_model_parallel": model_parallel.MUTANTS,
           "04_batch_scaling": batch_scaling.MUTANTS}
