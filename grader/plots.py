"""Matplotlib figures for the measurements lessons make."""

import matplotlib.pyplot as plt

from .timing import Timing


def bar_timings(timings, title="", unit="ms"):
    """Bars of median time with the spread as error bars, one per :class:`Timing`.

    >>> from grader.timing import measure
    >>> fig = bar_timings([measure(lambda: None, repeats=3, label="noop")])
    """
    scale = {"s": 1, "ms": 1e3, "us": 1e6}[unit]
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.5 * len(timings)))
    labels = [t.label or f"#{i}" for i, t in enumerate(timings)]
    ax.barh(labels, [t.median * scale for t in timings],
            xerr=[t.spread * scale for t in timings], color="#4c72b0")
    ax.invert_yaxis()
    ax.set_xlabel(f"median time per run ({unit})")
    hw = timings[0].hardware if timings and isinstance(timings[0], Timing) else ""
    ax.set_title(f"{title}\n{hw}" if title else hw, fontsize=9)
    fig.tight_layout()
    return fig


def scaling(workers, times, title=""):
    """Measured speedup (relative to the first entry, one worker) next to the ideal line.

    >>> fig = scaling([1, 2], [1.0, 0.6])
    """
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    ax.plot(workers, workers, "--", color="grey", label="ideal")
    ax.plot(workers, [times[0] / t for t in times], "o-", label="measured")
    ax.set_xlabel("workers")
    ax.set_ylabel("speedup")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    return fig
