"""Memory accounting and pipeline timelines, checked on real ranks against one process."""

import functools

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from grader import memory, models, pipeline
from grader.launch import init_distributed, launch
from grader.models import mlp, synthetic_batch

from conftest import lesson_notebook, read_nb


def _fsdp_state_bytes():
    rank, world, _ = init_distributed()
    model = fully_shard(mlp(), mesh=init_device_mesh("cpu", (world,)))
    opt = torch.optim.Adam(model.parameters())
    x, y = synthetic_batch(8, seed=rank)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    return memory.state_bytes(model, opt)


def test_the_prediction_is_what_one_process_and_each_fsdp_rank_really_hold():
    n = sum(p.numel() for p in mlp().parameters())
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    x, y = synthetic_batch(8)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    assert memory.state_bytes(model, opt) == memory.per_rank(n)
    # FSDP2 shards parameters, gradients and Adam's moments: ZeRO stage 3 on 2 ranks.
    per_rank = launch(_fsdp_state_bytes, nprocs=2, backend="gloo", show_output=False)
    assert per_rank == [memory.per_rank(n, data=2, zero=3)] * 2


def test_saved_activations_count_each_storage_once_and_leave_parameters_out():
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    with memory.saved_activations(net) as saved:
        loss = net(torch.ones(10, 64)).sum()
        held = saved.current
        loss.backward()
    # The input (10 x 64) and the ReLU output (10 x 32), saved by the ReLU and the next Linear alike.
    assert (held, saved.peak, saved.current) == (4 * 10 * 64 + 4 * 10 * 32,) * 2 + (0,)


def _order(works, rank):
    return [(w.kind, w.micro) for w in sorted(works, key=lambda w: w.start) if w.rank == rank]


def test_a_timeline_shows_each_schedules_order_and_stages_waiting_for_each_other():
    for schedule in ("gpipe", "1f1b"):
        works = pipeline.run_schedule(4, schedule, width=64, layers=4, batch=32)
        first = {(w.kind, w.micro): w for w in works if w.rank == 0}
        last = {(w.kind, w.micro): w for w in works if w.rank == 1}
        assert sorted(first) == sorted(last) == sorted((k, m) for k in "FB" for m in range(4))
        for m in range(4):  # a micro-batch's forward reaches stage 1 after stage 0; its backward returns
            assert last[("F", m)].start >= first[("F", m)].end and first[("B", m)].start >= last[("B", m)].end
        if schedule == "gpipe":  # every forward, then every backward
            assert [k for k, _ in _order(works, 0)] == list("FFFFBBBB")
        else:  # the last stage alternates one forward, one backward
            assert _order(works, 1) == [(k, m) for m in range(4) for k in "FB"]
    assert 0 < pipeline.bubble_fraction(works) < 1


SHAPE = dict(hidden=64, heads=4, seq=64)


def _fsdp_step_bytes(global_batch, layers):
    rank, world, _ = init_distributed()
    net = models.transformer(**SHAPE, layers=layers)
    mesh = init_device_mesh("cpu", (world,))
    for block in net:
        fully_shard(block, mesh=mesh)
    fully_shard(net, mesh=mesh)
    x = torch.randn(global_batch // world, SHAPE["seq"], SHAPE["hidden"])
    return memory.training_step_bytes(net, torch.optim.Adam(net.parameters()), x)


def _close(measured, predicted, what):
    for kind in ("parameters", "gradients", "optimizer", "activations", "total"):
        assert abs(measured[kind] - predicted[kind]) <= 0.1 * predicted[kind], (what, kind, measured, predicted)


def test_the_calculator_is_within_ten_percent_of_measured_bytes():
    for batch, layers, checkpointing in [(4, 3, False), (2, 2, False), (4, 3, True), (8, 2, True)]:
        net = models.transformer(**SHAPE, layers=layers, checkpointing=checkpointing)
        x = torch.randn(batch, SHAPE["seq"], SHAPE["hidden"], requires_grad=checkpointing)
        measured = memory.training_step_bytes(net, torch.optim.Adam(net.parameters()), x)
        _close(measured, memory.estimate(**SHAPE, layers=layers, batch=batch, checkpointing=checkpointing),
               f"one process, batch {batch}, {layers} layers, checkpointing {checkpointing}")
    # ZeRO-3 on 2 real ranks: each holds half of every state and the activations of half the batch.
    predicted = memory.estimate(**SHAPE, layers=3, batch=8, data=2, zero=3)
    for rank, measured in enumerate(launch(_fsdp_step_bytes, 8, 3, nprocs=2, backend="gloo", show_output=False)):
        _close(measured, predicted, f"FSDP2 rank {rank}")


def test_the_calculator_predicts_each_schedules_activations_on_the_first_stage():
    make = functools.partial(models.transformer, **SHAPE, layers=4)
    x = torch.randn(8, SHAPE["seq"], SHAPE["hidden"])
    for schedule in ("gpipe", "1f1b"):
        first_stage = pipeline.activation_peaks(make, x, 4, schedule)[0]
        predicted = memory.estimate(**SHAPE, layers=4, batch=8, pipeline=2, micro_batches=4, schedule=schedule)
        assert abs(first_stage - predicted["activations"]) <= 0.1 * predicted["activations"], (schedule, first_stage, predicted)


def test_the_calculator_widget_follows_its_fields():
    box = memory.calculator(layers=4, hidden=64, heads=4, seq=64, batch=8, device_gb=0.01)
    fields = {f.description: f for column in box.children[0].children for f in column.children}
    table = box.children[-1]
    assert "13.73 MB" in table.value and "does not fit" in table.value
    fields["zero"].value, fields["data"].value = 3, 2  # ZeRO-3 over 2 ranks: 6.88 MB per device
    assert "6.88 MB" in table.value and "fits" in table.value and "not" not in table.value
    fields["batch"].value = 7  # 7 samples do not split over 2 ranks: said, not raised
    assert "does not split" in table.value


def observe_cuda(monkeypatch, events, allocated=()):
    """Stand-ins for the CUDA calls the toolkit makes, recording each in ``events``.

    ``memory_allocated`` and ``max_memory_allocated`` answer from ``allocated`` in turn.
    """
    answers = iter(allocated)
    for name in ("synchronize", "reset_peak_memory_stats"):
        monkeypatch.setattr(torch.cuda, name, lambda device=None, name=name: events.append((name, device)))
    for name in ("memory_allocated", "max_memory_allocated"):
        monkeypatch.setattr(torch.cuda, name, lambda device=None, name=name: events.append((name, device)) or next(answers))


def test_a_timeline_on_a_gpu_reads_the_clock_only_once_the_device_has_finished(monkeypatch):
    events, gpu = [], torch.device("cuda", 1)
    observe_cuda(monkeypatch, events)

    class Stage:  # what a schedule calls on a stage whose part lives on a GPU
        device = gpu

        def forward_one_chunk(self, micro, *args):
            events.append(("forward", micro))

        def backward_one_chunk(self, micro, *args):
            events.append(("backward", micro))

    stage = Stage()
    with pipeline.timeline(stage, rank=1) as works:
        stage.forward_one_chunk(0)
        stage.backward_one_chunk(0)
    sync = ("synchronize", gpu)
    assert events == [sync, ("forward", 0), sync, sync, ("backward", 0), sync]
    assert [(w.rank, w.kind, w.micro) for w in works] == [(1, "F", 0), (1, "B", 0)]


def test_the_lessons_timers_wait_for_the_device():
    # Lesson 03's naive split times its own forward and backward: with pipeline.work, never a bare clock.
    nb = read_nb(lesson_notebook("source", "03_model_parallel"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "perf_counter" not in code and "pipeline.work(" in code
    assert "max_memory_allocated" not in code and "memory.cuda_peak(" in code


def test_the_cuda_peak_leaves_out_cublas_workspace_and_what_was_there_before(monkeypatch):
    events, gpu = [], torch.device("cuda", 0)
    monkeypatch.setattr(memory, "_warm_cublas", lambda device: events.append(("matmul", device)))
    observe_cuda(monkeypatch, events, allocated=[40_000_000, 43_500_000])  # before, then the peak
    with memory.cuda_peak(gpu) as held:
        events.append(("step", None))
    assert (held.before, held.peak) == (40_000_000, 3_500_000)
    # The workspace is allocated first, then the peak reset and the baseline read: the step alone counts.
    assert [name for name, _ in events] == ["matmul", "synchronize", "reset_peak_memory_stats", "memory_allocated",
                                            "step", "synchronize", "max_memory_allocated"]
    assert all(device == gpu for name, device in events if name != "step")
