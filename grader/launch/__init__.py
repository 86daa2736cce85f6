"""Start ranks: from a notebook cell (:func:`launch`), or as a script under ``torchrun``.

- :mod:`grader.launch.cell`: ``launch(train, nprocs=2)`` runs a notebook function on N ranks
  with torch's own elastic launcher and brings back their results, output and failures;
- :mod:`grader.launch.rank`: what the ranks' code calls (:func:`init_distributed`,
  :func:`rank_backend`, :func:`progress`, :func:`full_float32`), the same under ``torchrun``;
- :mod:`grader.launch.scripts`: :func:`write_script` writes notebook functions out as a
  script, :func:`torchrun` runs one under the ``torchrun`` command line;
- :mod:`grader.launch.processes`: the process utilities that leave nothing running.

Notebooks import everything from here: ``from grader.launch import launch, init_distributed``.
"""

from .cell import EXIT_LIMIT, START_LIMIT, LaunchTimeout, RankError, launch, start_method_for
from .rank import BACKEND, RUN_DIR, full_float32, init_distributed, progress, rank_backend
from .scripts import torchrun, write_script

__all__ = ["launch", "LaunchTimeout", "RankError", "start_method_for", "init_distributed", "rank_backend",
           "progress", "full_float32", "write_script", "torchrun", "START_LIMIT", "EXIT_LIMIT", "RUN_DIR", "BACKEND"]
