"""Memory accounting and pipeline timelines, checked on real ranks against one process."""

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from grader import memory, pipeline
from grader.launch import init_distributed, launch
from grader.models import mlp, synthetic_batch


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
