"""Batch scaling: accumulation on real ranks against one process, scaling sweeps, the task and plots."""

import contextlib

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from grader import plots, scaling
from grader.grading import record
from grader.launch import init_distributed, launch
from grader.models import mlp, synthetic_batch, teacher_task

from conftest import graded_cells, lesson_notebook, read_nb

matplotlib.use("Agg")


def _accumulate(micro, accumulation):
    """One DDP step of ``accumulation`` micro-batches per rank, all but the last under no_sync."""
    rank, world, _ = init_distributed()
    model = DDP(mlp(in_features=16, hidden=32))
    x, y = synthetic_batch(micro * accumulation * world, in_features=16)
    mine = slice(rank * micro * accumulation, (rank + 1) * micro * accumulation)
    with record.forwards() as seen:
        for i, (xb, yb) in enumerate(zip(x[mine].split(micro), y[mine].split(micro))):
            with model.no_sync() if i < accumulation - 1 else contextlib.nullcontext():
                (nn.functional.cross_entropy(model(xb), yb) / accumulation).backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    return grads, [f.grad_sync for f in seen if f.depth == 0]


def test_accumulation_under_no_sync_equals_one_process_and_the_record_sees_which_forwards_sync():
    per_rank = launch(_accumulate, 4, 3, nprocs=2, backend="gloo", show_output=False)
    model = mlp(in_features=16, hidden=32)
    x, y = synthetic_batch(4 * 3 * 2, in_features=16)
    nn.functional.cross_entropy(model(x), y).backward()
    one = torch.cat([p.grad.flatten() for p in model.parameters()])
    for grads, syncs in per_rank:
        assert torch.allclose(grads, one, atol=1e-6)
        assert syncs == [False, False, True]


def test_a_plain_module_records_no_grad_sync():
    with record.forwards() as seen:
        nn.Linear(2, 2)(torch.ones(1, 2))
    assert seen[0].grad_sync is None


@pytest.mark.parametrize("sweep, per_rank", [(scaling.strong_scaling, [512, 256]), (scaling.weak_scaling, [512, 512])])
def test_scaling_rows_start_from_one_process_and_follow_their_definitions(sweep, per_rank):
    rows = sweep(512, ranks=[1, 2], steps=2, warmup=1)
    assert [(r.ranks, r.per_rank_batch) for r in rows] == [(1, per_rank[0]), (2, per_rank[1])]
    one, two = rows
    assert (one.speedup, one.efficiency) == (1.0, 1.0)
    # Two ranks are timed in turn with their own one-process baseline, which is row 1's time.
    ratio = one.seconds / two.seconds
    assert two.speedup == pytest.approx(ratio if sweep is scaling.strong_scaling else 2 * ratio)
    assert two.efficiency == pytest.approx(two.speedup / 2)
    assert "2 rank(s) x batch" in str(two)


def test_a_scaling_sweep_needs_one_rank_first_and_more_after():
    for ranks in ([2, 4], [1]):
        with pytest.raises(ValueError, match="starts at 1 rank"):
            scaling.strong_scaling(64, ranks=ranks)


def test_throughput_counts_every_ranks_samples():
    (per_step,) = scaling.step_times([256], ranks=2, steps=2, warmup=1)
    (rate,) = scaling.throughput([256], ranks=2, steps=2, warmup=1)
    assert 0.2 < rate * per_step / 512 < 5  # samples/s of 2 x 256 rows; two runs, so only roughly


def test_the_teacher_task_is_learnable_and_the_same_for_a_seed():
    x, y = teacher_task(4096)
    assert torch.equal(teacher_task(4096)[1], y) and not torch.equal(teacher_task(4096, seed=1)[1], y)
    # A linear teacher: least squares on one-hot labels already gets most labels right.
    w = torch.linalg.lstsq(x, nn.functional.one_hot(y).float()).solution
    assert ((x @ w).argmax(1) == y).float().mean() > 0.8


def test_loss_curves_draw_one_line_per_run_on_a_log_scale():
    fig = plots.loss_curves({"a": [(0.5, 1.0), (1, 0.5)], "b": [(0.5, 2.0), (1, 1.5)]})
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"] and ax.get_yscale() == "log"
    assert list(ax.get_lines()[1].get_ydata()) == [2.0, 1.5]
    plt.close(fig)


def test_throughput_curves_put_the_batches_on_a_log2_axis():
    fig = plots.throughput_curves([16, 64, 256], {"1 rank": [1, 2, 3], "2 ranks": [1, 3, 5]})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "64", "256"]
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [[1, 2, 3], [1, 3, 5]]
    plt.close(fig)


def test_amdahl_fit_marks_the_predictions_under_the_fitted_curve():
    fig = plots.amdahl_fit([1, 2], [1.0, 1.6], serial=0.25, predict=(8, 64))
    ax = fig.axes[0]
    perfect, curve, measured, *marks = ax.get_lines()
    assert curve.get_ydata()[-1] == pytest.approx(scaling.amdahl(0.25, 64))
    assert list(measured.get_ydata()) == [1.0, 1.6]
    texts = [t.get_text().replace("\n", " ") for t in ax.texts]
    assert texts == [f"{scaling.amdahl(0.25, n):.2f}x at {n}" for n in (8, 64)] + [
        "fitted from 2 points only: a rough guess, not a prediction"]  # two points: said on the plot
    plt.close(fig)


def test_rounds_of_a_scaling_sweep_start_each_rank_count_once(monkeypatch):
    started = []

    def counted(*args, **kwargs):
        started.append(kwargs["nprocs"])
        return launch(*args, **kwargs)
    monkeypatch.setattr(scaling, "launch", counted)
    tables = scaling.strong_scaling_rounds(256, ranks=[1, 2], steps=1, warmup=1, rounds=3)
    assert started == [2]  # not one start per round: NCCL ranks take seconds each to spawn
    assert [[(p.ranks, p.per_rank_batch) for p in table] for table in tables] == [[(1, 256), (2, 128)]] * 3
    assert all(p.seconds > 0 for table in tables for p in table)


def test_lesson_04_re_measures_its_rounds_in_one_start_per_rank_count():
    # On 8 GPUs a start per round (5 x 3 spawned NCCL launches) outlasts nbgrader's cell time-out.
    test = next(c for c in graded_cells(read_nb(lesson_notebook("source", "04_batch_scaling")), "grade")
                if c["metadata"]["nbgrader"]["grade_id"] == "c4_serial_test")
    hidden = "".join(test["source"]).split("### BEGIN HIDDEN TESTS")[1]
    assert "scaling.strong_scaling_rounds(batch, ranks=ranks" in hidden and "scaling.strong_scaling(batch" not in hidden
    assert "batch = scaling.strong_batch(max(ranks))" in hidden  # sized for the ranks: GPU ranks get more work
