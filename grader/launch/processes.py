"""Processes on this machine: is one alive, signal it, wait for it to go, find its descendants.

Used by the launcher, by ``torchrun`` runs and by the autograder to leave no process behind.

>>> import signal, subprocess, sys
>>> child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
>>> alive(child.pid), child.pid in descendants(os.getpid())
(True, True)
>>> send(child.pid, signal.SIGKILL); _ = child.wait(); alive(child.pid)
False
"""

import contextlib
import os
import time


def alive(pid):
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(OSError):  # a zombie is already gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def send(pid, sig):
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def wait_gone(pid, seconds=5):
    end = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.01)


def descendants(pid):
    """Every process below ``pid``, children first (found through /proc; none elsewhere)."""
    parents = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
    found, level = [], [pid]
    while level:
        level = [p for p, parent in parents.items() if parent in level]
        found += level
    return found
