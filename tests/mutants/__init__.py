"""Mutants: plausible wrong answers a student might write, one module per lesson.

``MUTANTS[lesson][name] = (solution grade id, answer cell source)``. In the nbgrader round
trip each must lose exactly its challenge's points (tests/grading/roundtrip.py); every challenge
keeps at least one (a test checks it), and a mutant that scores is a bug in the challenge.
Add one to the lesson's module when a wrong answer slips through.
"""

from . import batch_scaling, communication, data_parallel, ddp, foundations, model_parallel

MUTANTS = {"00_foundations": foundations.MUTANTS, "01_data_parallel": data_parallel.MUTANTS,
           "02_ddp": ddp.MUTANTS, "03_model_parallel": model_parallel.MUTANTS,
           "04_batch_scaling": batch_scaling.MUTANTS, "05_communication": communication.MUTANTS}

# Challenges graded on a measurement, answered only by the mutant students who carry one of their
# mutants: the solver's full marks prove the right answer, and measuring it again in every mutant
# student's notebook cost 15-30 s each (lesson 02's speedup).
MEASURED = {"02_ddp": {"c5_speedup"}, "05_communication": {"c5_bucket_mb"}}
