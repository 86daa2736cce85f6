"""Matplotlib figures for the measurements lessons make."""

import textwrap

import numpy as np

from .timing import Timing


def _figure(**size):
    """A new figure and its axes; pyplot is imported with the first figure, not with this module,
    so a kernel or rank that plots nothing does not pay for it."""
    import matplotlib.pyplot as plt

    return plt.subplots(**size)


def _finish(fig, ax, title, **legend):
    """Title, legend and layout, the last steps of every figure with a legend of its lines."""
    ax.set_title(title, fontsize=9)
    ax.legend(**legend)
    fig.tight_layout()
    return fig


def _log2_ticks(ax, xs):
    """A log2 x axis with a tick, labelled in full, at each of ``xs`` (batch sizes, micro-batch counts)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])


def bar_timings(timings, title="", unit="ms"):
    """Bars of median time with the spread as error bars, one per :class:`Timing`.

    >>> from grader.timing import measure
    >>> fig = bar_timings([measure(lambda: None, repeats=3, label="noop")])
    """
    scale = {"s": 1, "ms": 1e3, "us": 1e6}[unit]
    fig, ax = _figure(figsize=(6, 1.4 + 0.5 * len(timings)))
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
    fig, ax = _figure(figsize=(5, 3.5))
    ax.plot(xs, ideal, "--", color="grey", label="ideal")
    ax.plot(xs, speedups, "o-", label="measured")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("speedup")
    ax.set_ylim(bottom=0)
    return _finish(fig, ax, title)


COLOURS = {"F": "#4c72b0", "B": "#dd8452", "compute": "#4c72b0", "communication": "#55a868"}  # F, B: forward, backward


def pipeline_gantt(works, title=""):
    """One row per rank (rank 0 on top), a bar per forward or backward; the gaps are the bubble.

    ``works`` is a list of :class:`grader.pipeline.Work`; the title gives the measured bubble.
    Where a rank holds several stages (interleaved schedules), its later stages are drawn
    hatched and each bar names its stage.

    >>> from grader.pipeline import Work
    >>> fig = pipeline_gantt([Work(0, "F", 0, 0.0, 0.01), Work(1, "F", 0, 0.01, 0.02),
    ...                       Work(1, "B", 0, 0.02, 0.04), Work(0, "B", 0, 0.04, 0.06)])
    """
    from .pipeline import bubble_fraction  # pipeline imports torch's pipelining: only when drawn

    t0 = min(w.start for w in works)
    span = (max(w.end for w in works) - t0) * 1e3
    ranks = sorted({w.rank for w in works})
    staged = any(w.stage is not None for w in works)
    fig, ax = _figure(figsize=(8, 0.9 + 0.6 * len(ranks)))
    for w in works:
        left, width = (w.start - t0) * 1e3, (w.end - w.start) * 1e3
        later = staged and w.stage >= len(ranks)  # the rank's second (third, ...) stage
        ax.barh(w.rank, width, left=left, height=0.6, color=COLOURS[w.kind], edgecolor="white",
                hatch="///" if later else None)
        label = f"{w.micro}" if not staged else f"{w.micro}\ns{w.stage}"
        if width > span / (40 if not staged else 25):  # room for the label
            ax.text(left + width / 2, w.rank, label, ha="center", va="center", color="white", fontsize=7)
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    from matplotlib.patches import Patch

    handles = [Patch(color=COLOURS["F"], label="forward"), Patch(color=COLOURS["B"], label="backward")]
    if staged:
        handles.append(Patch(facecolor="grey", hatch="///", edgecolor="white", label="a later stage"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1, 1), fontsize=8)
    bubble = f"measured bubble {bubble_fraction(works):.0%}"
    ax.set_title(f"{title}\n{bubble}" if title else bubble, fontsize=9)
    fig.tight_layout()
    return fig


def bubble_sweep(micro_batches, measured, stages, title=""):
    """Measured bubble fractions against the micro-batch count, under the formula (p-1)/(m+p-1).

    >>> fig = bubble_sweep([1, 2, 4, 8], [0.52, 0.36, 0.22, 0.13], stages=2)
    """
    from .pipeline import bubble_formula  # lazily, as in pipeline_gantt

    ms = np.geomspace(min(micro_batches), max(micro_batches), 50)
    fig, ax = _figure(figsize=(5, 3.5))
    ax.plot(ms, [bubble_formula(stages, m) for m in ms], "--", color="grey",
            label=f"formula (p-1)/(m+p-1), p={stages}")
    ax.plot(micro_batches, measured, "o", label="measured")
    _log2_ticks(ax, micro_batches)
    ax.set_xlabel("micro-batches m")
    ax.set_ylabel("bubble fraction")
    ax.set_ylim(0, 1)
    return _finish(fig, ax, title)


def loss_curves(curves, title="", xlabel="epochs"):
    """One line per run: ``curves`` maps a label to a list of (x, loss) points.

    >>> fig = loss_curves({"batch 32": [(0.5, 1.0), (1, 0.6)], "batch 256": [(0.5, 1.2), (1, 0.9)]})
    """
    fig, ax = _figure(figsize=(7.5, 3.5))
    for label, points in curves.items():
        ax.plot(*zip(*points), label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    # Beside the axes, where it can never cover a curve.
    return _finish(fig, ax, title, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))


def throughput_curves(batches, samples_per_second, title=""):
    """Samples per second against the per-rank batch, one line per label (e.g. "1 rank", "2 ranks").

    >>> fig = throughput_curves([16, 64, 256], {"1 rank": [2e3, 5e3, 7e3], "2 ranks": [1.6e3, 4.5e3, 1e4]})
    """
    fig, ax = _figure(figsize=(5, 3.5))
    for label, values in samples_per_second.items():
        ax.plot(batches, values, "o-", label=label)
    _log2_ticks(ax, batches)
    ax.set_xlabel("batch per rank")
    ax.set_ylabel("samples per second")
    ax.set_ylim(bottom=0)
    return _finish(fig, ax, title)


def amdahl_fit(ns, speedups, serial, predict=(8, 64), title=""):
    """Measured speedups against Amdahl's curve for the fitted ``serial`` fraction, up to the
    largest rank count in ``predict``, where the curve's predictions are marked.

    >>> fig = amdahl_fit([1, 2], [1.0, 1.6], serial=0.25)
    """
    from .scaling import amdahl, serial_note

    top = max([*ns, *predict])
    xs = np.geomspace(1, top, 60)
    fig, ax = _figure(figsize=(6.5, 3.5))
    ax.plot(xs, xs, "--", color="grey", label="perfect (N)")
    ax.plot(xs, [amdahl(serial, n) for n in xs], label=f"Amdahl, serial fraction {serial:.2f}")
    ax.plot(ns, speedups, "o", color="black", label="measured")
    for n in predict:
        ax.annotate(f"{amdahl(serial, n):.2f}x at {n}", (n, amdahl(serial, n)), textcoords="offset points",
                    xytext=(-10, 8), ha="right", fontsize=8)
        ax.plot([n], [amdahl(serial, n)], "x", color="C1")
    ticks = [2 ** k for k in range(int(np.log2(top)) + 1)]
    _log2_ticks(ax, ticks)  # 1, 2, 4 ... on both axes, not 2⁰, 2¹, 2²
    ax.set_yscale("log", base=2)
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("ranks")
    ax.set_ylabel("speedup")
    warnings = [f"fitted from {len(ns)} points only: a rough guess, not a prediction"] if len(ns) < 3 else []
    warnings += [f"serial fraction {serial:.2f}: " + serial_note(serial)] if serial_note(serial) else []
    if warnings:  # two points leave one degree of freedom: the noise decides the fraction
        ax.text(0.02, 0.97, "\n".join(textwrap.fill(w, 42) for w in warnings), transform=ax.transAxes, va="top",
                fontsize=8, color="#c62828")
    # Beside the axes: inside, it covered the curve's marks where the curve falls (a fraction above 1).
    return _finish(fig, ax, title, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))


def bandwidth_curve(sizes, seconds, busbw, alpha_beta=None, limit=None, title=""):
    """A collective measured against message size: time (log-log, with the fitted t = α + β·bytes
    when ``alpha_beta`` is given) on the left, bus bandwidth on the right, with the link's
    ``limit`` (bytes per second) as a line.

    >>> fig = bandwidth_curve([1e3, 1e6], [1e-4, 1e-3], [1e7, 1e9], alpha_beta=(1e-4, 1e-12), limit=2e9)
    """
    fig, (left, right) = _figure(ncols=2, figsize=(10, 3.6))
    sizes = np.asarray(sizes, dtype=float)
    left.loglog(sizes, np.asarray(seconds) * 1e6, "o-", label="measured")
    if alpha_beta:
        alpha, beta = alpha_beta
        left.loglog(sizes, (alpha + beta * sizes) * 1e6, "--",
                    label=f"α + β·bytes (α {alpha * 1e6:.0f} µs, 1/β {1 / beta / 1e9:.2f} GB/s)")
    left.set_xlabel("message size (bytes)")
    left.set_ylabel("time per call (µs)")
    left.legend(fontsize=8)
    right.semilogx(sizes, np.asarray(busbw) / 1e9, "o-", label="bus bandwidth")
    if limit:
        right.axhline(limit / 1e9, color="gray", linestyle=":", label=f"link limit {limit / 1e9:.1f} GB/s")
    right.set_xlabel("message size (bytes)")
    right.set_ylabel("GB/s")
    return _finish(fig, right, title, fontsize=8)


def compute_communication(per_rank_batches, split, title=""):
    """Backward and communication time of one training step against the per-rank batch, from
    :func:`grader.comms.compute_and_communication`; where the communication line lies above,
    the step is communication-bound.

    >>> fig = compute_communication([2, 8], [(0.01, 0.02), (0.04, 0.02)])
    """
    fig, ax = _figure(figsize=(6, 3.4))
    ax.plot(per_rank_batches, [c * 1e3 for c, _ in split], "o-", label="backward")
    ax.plot(per_rank_batches, [m * 1e3 for _, m in split], "s--", label="all-reduce of the gradients")
    _log2_ticks(ax, per_rank_batches)
    ax.set_xlabel("per-rank batch")
    ax.set_ylabel("ms per step")
    return _finish(fig, ax, title, fontsize=8)


def overlap_timeline(timelines, title=""):
    """One training step per way, as ``torch.profiler`` saw it on one rank: a row of computation and,
    under it, a row of communication (:class:`grader.comms.Timeline`). Where the two rows overlap,
    the communication was hidden behind the computation; each way's label gives the share hidden.

    >>> from grader.comms import Timeline
    >>> fig = overlap_timeline({"after backward": Timeline([(0, 5)], [(5, 8)]),
    ...                         "overlapped": Timeline([(0, 5)], [(2, 6)])})
    """
    fig, ax = _figure(figsize=(8, 0.8 + 0.9 * len(timelines)))
    labels = []
    for i, (way, line) in enumerate(timelines.items()):
        y = 2 * i
        ax.broken_barh([(s, e - s) for s, e in line.compute], (y - 0.35, 0.7), color=COLOURS["compute"])
        ax.broken_barh([(s, e - s) for s, e in line.communication], (y + 1 - 0.35, 0.7), color=COLOURS["communication"])
        labels += [f"{way}: compute", f"communication ({line.hidden():.0%} hidden)"]
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time in the step (ms)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
