"""Unit tests for grader.hardware, grader.timing, grader.grading.record, grader.grading.checks and grader.plots."""

import subprocess
import sys
import time
from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from conftest import cpu_hogs
from grader import hardware, plots, scaling, timing
from grader.grading import checks, fairness, record
from grader.pipeline import Work

matplotlib.use("Agg")  # figures drawn to memory, never a window


def test_hardware_describes_this_machine():
    text = hardware.describe()
    assert f"torch {torch.__version__}" in text
    if hardware.gpu_count():
        assert hardware.gpus()[0].name in text
    else:
        assert text.startswith("CPU only") and f"{hardware.cpu_cores()} cores" in text
    assert hardware.device().type == ("cuda" if hardware.gpu_count() else "cpu")
    assert hardware.backend() == ("nccl" if hardware.gpu_count() >= 2 else "gloo")
    assert hardware.parallel_ranks() >= 1


def test_measure_discards_warmup_and_repeats():
    calls = []
    t = timing.measure(lambda: calls.append(1), repeats=7, warmup=3, device="cpu", label="x")
    assert len(calls) == 10 and len(t.times) == 7
    assert str(t).startswith("x: ") and hardware.describe() in str(t)


def test_measure_reports_median_and_spread():
    delays = iter([0.2, 0.005, 0.005, 0.05, 0.005])
    t = timing.measure(lambda: time.sleep(next(delays)), repeats=4, warmup=1, device="cpu")
    assert 0.004 < t.median < 0.03  # the slow warm-up is gone, one outlier does not move it
    assert t.spread == pytest.approx((max(t.times) - min(t.times)) / 2)


def test_measure_rejects_no_repeats():
    with pytest.raises(ValueError, match="repeats"):
        timing.measure(lambda: None, repeats=0)


def test_speedup_and_efficiency():
    assert timing.speedup(100, 30) == pytest.approx(3.333, rel=1e-3)
    assert timing.efficiency(100, 30, 4) == pytest.approx(0.8333, rel=1e-3)
    t1 = timing.Timing([2.0, 2.0, 2.0])
    tn = timing.Timing([1.0, 1.0, 1.0])
    assert timing.speedup(t1, tn) == 2.0
    with pytest.raises(ValueError):
        timing.speedup(0, 1)
    with pytest.raises(ValueError):
        timing.efficiency(1, 1, 0)


def test_check_shape_explains_batch_dimension():
    checks.check_shape(torch.zeros(16, 5), (16, 5))
    with pytest.raises(AssertionError) as e:
        checks.check_shape(torch.zeros(4, 5), (16, 5), "DP output")
    msg = str(e.value)
    assert "expected: (16, 5)" in msg and "got:      (4, 5)" in msg and "batch dimension" in msg
    with pytest.raises(AssertionError, match="should be a shape"):
        checks.check_shape(3, (16, 5))


def test_check_close_numbers_and_tensors():
    checks.check_close(1.0, 1.0 + 1e-9)
    checks.check_close(torch.ones(3), torch.ones(3))
    with pytest.raises(AssertionError, match="largest difference"):
        checks.check_close(torch.ones(3), torch.zeros(3), "grad")
    with pytest.raises(AssertionError, match="wrong shape"):
        checks.check_close(torch.ones(3), torch.ones(4))
    with pytest.raises(AssertionError, match="should be a number"):
        checks.check_close("fast", 2.0)
    with pytest.raises(AssertionError, match="hint: divide"):
        checks.check_close(3.0, 2.0, hint="divide")


def test_check_keys_spots_the_module_prefix_both_ways():
    plain = nn.Linear(2, 2)
    wrapped = nn.DataParallel(nn.Linear(2, 2))
    checks.check_keys(plain.state_dict(), plain)
    with pytest.raises(AssertionError) as e:
        checks.check_keys(wrapped.state_dict(), plain)
    assert "'module.' prefix" in str(e.value) and "'module.weight'" in str(e.value)
    with pytest.raises(AssertionError, match="load into model.module"):
        checks.check_keys(plain.state_dict(), wrapped)
    with pytest.raises(AssertionError, match="missing \\['bias'\\]"):
        checks.check_keys({"weight": 0}, plain)


def test_check_same_parameters():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    with torch.no_grad():
        b.weight.copy_(a.weight)
    with pytest.raises(AssertionError, match="'bias'"):
        checks.check_same_parameters(a, b)
    b.load_state_dict(a.state_dict())
    checks.check_same_parameters(a, b)


def test_checks_write_nothing_to_stderr(capfd):
    with pytest.raises(AssertionError):
        checks.check_equal(1, 2)
    with checks.quiet():
        import warnings
        warnings.warn("hidden")
    assert capfd.readouterr().err == ""


def test_ddp_measurement_follows_the_gpus_at_hand(monkeypatch):
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    assert scaling.ddp_backend(2) == "gloo" and "CPU processes" in scaling.ddp_measured_on(2)
    assert scaling.expected_ddp_speedup(2) == pytest.approx(1.2)  # 0.6 x 2 (thresholds.json)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 4)
    assert scaling.ddp_backend(2) == scaling.ddp_backend(4) == "nccl"
    assert scaling.ddp_measured_on(4) == "4 GPUs (NCCL, one rank per GPU) against 1 GPU"
    assert scaling.expected_ddp_speedup(4) == pytest.approx(2.0)
    assert scaling.ddp_backend(8) == "gloo"  # more ranks than GPUs: CPU processes


def test_one_backend_rule_for_the_launcher_torchrun_ranks_and_measurements(monkeypatch):
    from grader.launch import rank_backend

    monkeypatch.setattr(hardware, "cpu_cores", lambda: 8)
    for gpus, default, at_two, torchrun_two in [(0, "gloo", "gloo", "gloo"), (1, "gloo", "gloo", "gloo"),
                                                 (2, "nccl", "nccl", "nccl"), (4, "nccl", "nccl", "nccl")]:
        monkeypatch.setattr(hardware, "gpu_count", lambda: gpus)
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        assert (hardware.backend(), hardware.backend(2), rank_backend()) == (default, at_two, torchrun_two), gpus
        assert scaling.ddp_backend(2) == hardware.backend(2)
        assert hardware.backend(gpus + 1) == "gloo"  # a rank without a GPU of its own
    # One node of a cluster with one GPU and one rank: NCCL, across the nodes.
    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert rank_backend() == "nccl"
    assert scaling.ddp_backend(1) == "gloo"  # a measurement's one-rank baseline stays a CPU process


def test_record_forwards_sees_wrappers_depth_and_batches():
    device = "cuda" if torch.cuda.is_available() else "cpu"  # one device: one call, no replicas
    net = nn.Sequential(nn.Linear(3, 2)).to(device)
    with record.forwards(inputs=True) as seen:
        nn.DataParallel(net, device_ids=[0] if device == "cuda" else None)(torch.ones(5, 3, device=device))
        net(torch.zeros(2, 3, device=device))
    assert [(f.module, f.depth, f.rows) for f in seen] == [
        ("DataParallel", 0, 5), ("Sequential", 1, 5), ("Linear", 2, 5),
        ("Sequential", 0, 2), ("Linear", 1, 2)]
    assert torch.equal(seen[3].input.cpu(), torch.zeros(2, 3))
    net(torch.ones(1, 3, device=device))
    assert len(seen) == 5  # nothing recorded once the block is left


def test_record_forwards_keeps_depth_right_after_an_error():
    net = nn.Linear(3, 2)
    with record.forwards() as seen:
        with pytest.raises(RuntimeError):
            net(torch.ones(4, 7))
        net(torch.ones(4, 3))
    assert [f.depth for f in seen] == [0, 0]


def test_record_calls_counts_and_delays_then_restores():
    original = torch.save
    with record.calls(torch, "save", delay=0.2) as seen:
        start = time.perf_counter()
        torch.save({"a": 1}, "/dev/null")
        assert time.perf_counter() - start >= 0.2
    assert len(seen) == 1 and seen[0][0][1] == "/dev/null"
    assert torch.save is original


@pytest.mark.parametrize("files, quota", [
    ({"cpu.max": "200000 100000\n"}, 2.0),          # cgroup v2, 2 CPUs
    ({"cpu.max": "150000 100000\n"}, 1.5),
    ({"cpu.max": "max 100000\n"}, None),            # no limit
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4.0),  # cgroup v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({}, None),                                      # no cgroup files at all
])
def test_cpu_quota_reads_the_containers_cgroup(tmp_path, files, quota):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert hardware.cpu_quota(tmp_path) == quota


def test_a_cpu_quota_caps_cores_and_default_ranks(tmp_path, monkeypatch):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    monkeypatch.setattr(hardware, "CGROUP", str(tmp_path))
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    assert hardware.cpu_cores() == 1 and hardware.parallel_ranks() == 1
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    assert hardware.cpu_cores() == 2 and hardware.parallel_ranks() == 2
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert hardware.cpu_cores() == 64


def test_device_is_the_current_gpu_once_cuda_runs(monkeypatch):
    monkeypatch.setattr(hardware, "gpu_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert hardware.device() == torch.device("cuda", 0)  # asking would start CUDA: GPU 0
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)  # a rank that chose GPU 1
    assert hardware.device() == torch.device("cuda", 1)


@pytest.mark.slow
def test_a_graded_speedup_holds_on_a_busy_machine_and_a_poor_choice_still_fails():
    if hardware.cpu_cores() < 2:
        pytest.skip("one core: two ranks cannot run at once")
    with cpu_hogs(1):  # another grading job
        # A good choice other than the reference (2048, the solution), so it is judged against it.
        good = fairness.grade_ddp_speedup(4096, ranks=2)
        poor = fairness.grade_ddp_speedup(16, ranks=2)
    assert good.passed, str(good)
    assert not poor.passed, str(poor)


def test_nccl_notes_say_when_shared_or_host_memory_is_short(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:    3000000 kB\n")
    monkeypatch.setattr(hardware.shutil, "disk_usage", lambda path: SimpleNamespace(free=64 * 2**20))
    notes = hardware.nccl_notes(2, meminfo=meminfo)
    assert len(notes) == 2 and "64 MiB free" in notes[0] and "--shm-size" in notes[0]
    assert "2.9 GiB of memory is available for 2 ranks" in notes[1]
    monkeypatch.setattr(hardware.shutil, "disk_usage", lambda path: SimpleNamespace(free=8 * 2**30))
    assert hardware.nccl_notes(1, meminfo=meminfo) == []



def test_pipeline_gantt_draws_a_bar_per_work_on_its_ranks_row_with_the_bubble_in_the_title():
    # GPipe, 2 stages, 2 micro-batches, 10 ms per step: rank 1 waits 10 ms, rank 0 20 ms.
    steps = [(0, "F", 0, 0), (0, "F", 1, 1), (1, "F", 0, 1), (1, "F", 1, 2), (1, "B", 0, 3),
             (1, "B", 1, 4), (0, "B", 0, 4), (0, "B", 1, 5)]
    works = [Work(rank, kind, micro, 100 + 0.01 * t, 100 + 0.01 * (t + 1)) for rank, kind, micro, t in steps]
    fig = plots.pipeline_gantt(works, title="GPipe")
    ax = fig.axes[0]
    bars = ax.patches
    assert len(bars) == len(works)
    assert [round(b.get_x(), 6) for b in bars] == [10.0 * t for *_, t in steps]  # ms from the first start
    assert all(round(b.get_width(), 6) == 10.0 for b in bars)
    forward, backward = bars[0].get_facecolor(), bars[4].get_facecolor()
    assert forward != backward and [b.get_facecolor() for b in bars] == [forward] * 4 + [backward] * 4
    assert [t.get_text() for t in ax.texts] == [str(micro) for _, _, micro, _ in steps]
    assert ax.yaxis_inverted() and [t.get_text() for t in ax.get_yticklabels()] == ["rank 0", "rank 1"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["forward", "backward"]
    assert ax.get_xlabel() == "time (ms)" and ax.get_title() == "GPipe\nmeasured bubble 33%"
    plt.close(fig)


def test_pipeline_gantt_leaves_numbers_off_bars_too_narrow_for_them():
    works = [Work(0, "F", 0, 0.0, 1.0), Work(1, "F", 0, 1.0, 2.0), Work(1, "B", 7, 2.0, 2.001)]
    fig = plots.pipeline_gantt(works)
    assert len(fig.axes[0].patches) == 3 and [t.get_text() for t in fig.axes[0].texts] == ["0", "0"]
    plt.close(fig)


def test_bubble_sweep_draws_the_formula_as_a_line_and_the_measurements_as_points():
    fig = plots.bubble_sweep([1, 2, 4, 8], [0.52, 0.36, 0.22, 0.13], stages=2, title="2 stages")
    ax = fig.axes[0]
    formula, measured = ax.get_lines()
    assert len(ax.get_lines()) == 2 and ax.get_xscale() == "log"
    assert formula.get_linestyle() == "--" and measured.get_linestyle() == "None"
    assert formula.get_ydata()[0] == pytest.approx(0.5) and formula.get_ydata()[-1] == pytest.approx(1 / 9)
    assert list(measured.get_xdata()) == [1, 2, 4, 8] and list(measured.get_ydata()) == [0.52, 0.36, 0.22, 0.13]
    plt.close(fig)


def test_the_amdahl_plot_labels_rank_counts_in_full_and_warns_on_a_two_point_fit():
    fig = plots.amdahl_fit([1, 2], [1.0, 1.1], serial=0.8)
    ax = fig.axes[0]
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8", "16", "32", "64"]
    assert "1" in [t.get_text() for t in ax.get_yticklabels()]
    assert any("2 points only" in t.get_text() for t in ax.texts)
    plt.close(fig)
    fig = plots.amdahl_fit([1, 2, 4, 8], [1.0, 1.8, 3.1, 4.9], serial=0.1)
    assert not any("points only" in t.get_text() for t in fig.axes[0].texts)
    plt.close(fig)


def test_a_serial_fraction_above_one_is_explained_and_the_legend_covers_no_mark():
    # Two ranks slower than one (as lesson 04 measured on a busy machine): Amdahl's curve falls, its marks sit low.
    serial = scaling.fit_serial_fraction([1, 2, 4], [1.0, 0.7, 0.55])
    assert serial > 1 and "parallel overhead" in scaling.serial_note(serial)
    assert scaling.serial_note(0.3) == "" and "faster than linear" in scaling.serial_note(-0.1)
    fig = plots.amdahl_fit([1, 2, 4], [1.0, 0.7, 0.55], serial)
    fig.canvas.draw()
    ax, renderer = fig.axes[0], fig.canvas.get_renderer()
    note, = [t.get_text().replace("\n", " ") for t in ax.texts if "serial fraction" in t.get_text()]
    assert note.startswith(f"serial fraction {serial:.2f}: above 1, no share of the work") and "overhead" in note
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
    plt.close(fig)


def test_the_loss_curves_legend_sits_beside_the_axes_not_over_the_curves():
    fig = plots.loss_curves({f"batch {b}": [(0.5, 1.0), (1, 0.6)] for b in (32, 64, 128, 256)})
    fig.canvas.draw()
    ax, legend = fig.axes[0], fig.axes[0].get_legend()
    renderer = fig.canvas.get_renderer()
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
    plt.close(fig)


def test_the_lessons_imports_leave_sharding_and_pyplot_until_used():
    # Every graded notebook starts two kernels, and every launch ranks, each importing the toolkit:
    # torch.distributed.tensor (about a second) and pyplot (most of another) come only with their first
    # use. (grader.pipeline, lesson 03's, imports torch's pipelining and with it both.)
    code = ("import sys; from grader import hardware, launch, memory, models, plots, scaling, timing; "
            "from grader.grading import checks, fairness, record; from grader.study import show_cards; "
            "print(sorted(m for m in ('torch.distributed.tensor', 'torch.distributed.fsdp', 'matplotlib.pyplot') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
    assert plots.speedup_curve([1, 2], [1.0, 1.8], "ranks", ideal=2) is not None  # and plotting still imports it
