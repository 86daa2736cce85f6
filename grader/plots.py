"""Matplotlib figures for the measurements lessons make."""

import matplotlib.pyplot as plt

from .timing import Timing


def bar_timings(timings, title="", unit="ms"):
    """Bars of median time with the spread as error bars, one per :class:`Timing`.

    >>> from grader.timing import measure
    >>> fig = bar_timings([measure(lambda: None, repeats=3, label="noop")])
    """
    scale = {"s": 1, "ms": 1e3, "us": 1e6}[unit]
    fig, ax = plt.subplots(figsize=(6, 1.4 + 0.5 * len(timings)))
    labels = [t.label or f"#{i}" for i, t in enumerate(timings)]
    ax.barh(labels, [t.median * scale for t in timings],
            xerr=[t.spread * scale for t in timings], color="#4c72b0")
    ax.invert_yaxis()
    ax.set_xlabel(f"median time per run ({unit})")
    hw = timings[0].hardware if timings and isinstance(timings[0], Timing) else ""
    ax.set_title(f"{title}\n{hw}" if title else hw, fontsize=9)
    fig.tight_layout()
    return fig


def speedup_curve(xs, speedups, xlabel, ideal, title="", logx=False):
    """Measured speedups against ``xs`` (ranks, batch sizes...) under the ``ideal`` line.

    ``ideal`` is a number (the rank count: perfect scaling) or a list, one per x.

    >>> fig = speedup_curve([64, 512, 2048], [0.8, 1.5, 1.8], "per-rank batch", ideal=2)
    """
    ideal = [ideal] * len(xs) if isinstance(ideal, (int, float)) else ideal
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(xs, ideal, "--", color="grey", label="ideal")
    ax.plot(xs, speedups, "o-", label="measured")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("speedup")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    return fig
