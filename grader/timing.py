"""Honest timers: warm-up, device synchronisation, repeats, median and spread.

CUDA kernels run asynchronously: a Python call returns as soon as the work is
queued, so a stopwatch around it measures the queueing, not the work. On a GPU,
:func:`measure` brackets every run with CUDA events and waits for them; on a CPU
there is nothing to wait for and a plain clock is already right.
"""

import contextlib
import statistics
import time
from dataclasses import dataclass, field

import torch

from . import hardware


@dataclass
class Timing:
    """Seconds per run of one measured function."""

    times: list
    label: str = ""
    synchronized: bool = True
    hardware: str = field(default_factory=hardware.describe)

    @property
    def median(self):
        return statistics.median(self.times)

    @property
    def spread(self):
        """Half the distance between the fastest and slowest run, in seconds."""
        return (max(self.times) - min(self.times)) / 2

    def __str__(self):
        name = f"{self.label}: " if self.label else ""
        note = "" if self.synchronized else " (NOT synchronised)"
        return (f"{name}{_fmt(self.median)} ± {_fmt(self.spread)} "
                f"(median of {len(self.times)}){note} on {self.hardware}")

    __repr__ = __str__


def _fmt(seconds):
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def measure(fn, *, repeats=10, warmup=2, device=None, sync=True, label=""):
    """Time ``fn()`` honestly and return a :class:`Timing`.

    ``warmup`` runs are thrown away (first calls pay for allocation and kernel
    selection). On a CUDA ``device`` each run is timed with CUDA events and waited
    for; ``sync=False`` uses a bare wall clock with no waiting, which is the common
    mistake the course shows next to the right way.

    >>> t = measure(lambda: sum(range(1000)), repeats=5)
    >>> len(t.times), t.median > 0
    (5, True)
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    device = torch.device(device) if device is not None else hardware.device()
    on_gpu = device.type == "cuda"
    started = time.perf_counter()
    # Events are recorded on the current stream of the current device: make it the measured one.
    with torch.cuda.device(device) if on_gpu else contextlib.nullcontext():
        for _ in range(warmup):
            fn()
        if on_gpu:
            torch.cuda.synchronize(device)
        times = []
        for _ in range(repeats):
            if on_gpu and sync:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        if on_gpu and not sync:
            torch.cuda.synchronize(device)  # leave no queued work behind for the next cell
    result = Timing(times, label=label, synchronized=sync or not on_gpu)
    _MEASURED.append((result, tuple(times), started, time.perf_counter()))
    return result


# What measure() returned here, with the times it measured and when it ran: a value graded as a
# measurement must be one of these, unchanged, not a Timing typed in (a learner's cell cannot
# reach this private list: the grading scan refuses it).
_MEASURED = []


def measured_when(timing):
    """``(start, end)`` in ``time.perf_counter()`` seconds of the :func:`measure` call in this process
    that returned this very :class:`Timing`, its times as measured; None for a Timing made any
    other way or changed since.

    >>> t = measure(lambda: None, repeats=1)
    >>> start, end = measured_when(t)
    >>> start < end, measured_when(Timing([0.5]))
    (True, None)
    >>> t.times[:] = [0.5]
    >>> measured_when(t) is None
    True
    """
    return next(((start, end) for t, times, start, end in _MEASURED
                 if t is timing and tuple(timing.times) == times), None)


@contextlib.contextmanager
def one_thread():
    """Run the block with torch on one CPU thread. On a busy machine, an operation split over
    several threads waits for whichever thread another process has pushed off its core, so a
    small model's step can take a time slice (milliseconds) instead of microseconds, at random;
    on one thread other work slows every step alike.

    >>> with one_thread():
    ...     torch.get_num_threads()
    1
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def wait(device):
    """Block until the work queued on ``device`` has run (a GPU's kernels and copies, NCCL's
    transfers); a CPU has nothing queued. Read a clock only after it.

    >>> wait(torch.device("cpu"))   # returns at once
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def speedup(t1, tn):
    """How many times faster N workers are than one: T1 / TN.

    >>> round(speedup(100, 30), 2)
    3.33
    """
    t1, tn = _seconds(t1), _seconds(tn)
    if t1 <= 0 or tn <= 0:
        raise ValueError(f"times must be positive, got T1={t1}, TN={tn}")
    return t1 / tn


def efficiency(t1, tn, n):
    """Speedup per worker: (T1 / TN) / N, 1.0 being perfect scaling.

    >>> round(efficiency(100, 30, 4), 3)
    0.833
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return speedup(t1, tn) / n


def _seconds(t):
    return t.median if isinstance(t, Timing) else float(t)
