"""Notebook functions written out as scripts, and run under the ``torchrun`` command line."""

import inspect
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from .. import hardware
from .cell import LaunchTimeout, RankError
from .processes import descendants, send, wait_gone


SCRIPT_HEADER = '''"""Written from a notebook by grader.launch.write_script. Runs unchanged under torchrun:

    torchrun --nproc-per-node=2 {name}
    torchrun --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT {name}
"""
'''


def write_script(path, main, *helpers, imports=None):
    """Write ``main`` (and the helpers it uses) as a script that ``torchrun`` can run.

    The sources come from the notebook cells that defined them; ``imports`` is the
    import block the script starts with. The script calls ``main()`` once per rank.

    >>> import tempfile, pathlib
    >>> def main():
    ...     return init_distributed()
    >>> p = write_script(pathlib.Path(tempfile.mkdtemp()) / "train.py", main)
    >>> "torchrun" in p.read_text() and "def main():" in p.read_text()
    True
    """
    path = Path(path)
    imports = imports or ("import os\n\nimport torch\nimport torch.distributed as dist\n"
                          "from torch import nn\n\nfrom grader.launch import init_distributed, progress\n")
    parts = [SCRIPT_HEADER.format(name=path.name), imports.rstrip() + "\n"]
    parts += [textwrap.dedent(inspect.getsource(obj)).rstrip() + "\n" for obj in (*helpers, main)]
    parts.append(f'if __name__ == "__main__":\n    {main.__name__}()\n')
    path.write_text("\n\n".join(parts))
    return path


def torchrun(script, nprocs=2, timeout=60):
    """Run ``script`` under the ``torchrun`` command line on this machine; return its output.

    The command is ``torchrun --standalone --nproc-per-node=NPROCS --tee=3 SCRIPT``
    (``--tee=3`` prefixes each line with the rank that printed it, as ``[default0]:``).
    A hang ends at ``timeout`` with :class:`LaunchTimeout`; then, or on an interrupt, the
    agent and every worker (each in a session of its own) are stopped. A run that fails
    raises :class:`RankError` with everything it printed.

    >>> import tempfile, pathlib
    >>> def main():
    ...     rank, world, _ = init_distributed()
    ...     print(f"rank {rank} of {world}")
    >>> out = torchrun(write_script(pathlib.Path(tempfile.mkdtemp()) / "hi.py", main), nprocs=2)
    >>> sorted(line for line in out.splitlines() if "rank" in line)
    ['[default0]:rank 0 of 2', '[default1]:rank 1 of 2']
    """
    threads = max(1, hardware.cpu_cores() // nprocs)
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nprocs}",
         "--tee=3", str(script)], env=dict(os.environ, OMP_NUM_THREADS=str(threads)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LaunchTimeout(f"torchrun {script} was still running after {timeout} s and was stopped") from None
    finally:
        workers = descendants(proc.pid)  # before the agent goes: then they are orphans
        for pid in [proc.pid, *workers]:
            send(pid, signal.SIGKILL)
        proc.wait()
        for pid in workers:
            wait_gone(pid)
    if proc.returncode:
        raise RankError(f"torchrun {script} failed (exit code {proc.returncode}):\n{out}")
    return out
