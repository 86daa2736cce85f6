"""grader.comms: the bandwidth rules of nccl-tests, the latency-bandwidth fit, and collectives timed on real ranks."""

import pytest

from grader import comms


def test_bus_factors_follow_nccl_tests_for_every_collective_and_rank_count():
    for n in range(1, 9):
        assert comms.bus_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
        for op in ("all_gather", "reduce_scatter", "all_to_all"):
            assert comms.bus_factor(op, n) == pytest.approx((n - 1) / n)
        assert comms.bus_factor("broadcast", n) == comms.bus_factor("reduce", n) == 1.0
    with pytest.raises(ValueError, match="unknown collective 'allreduce'"):
        comms.bus_factor("allreduce", 2)
    # The same link speed reads the same at any rank count once it is bus bandwidth
    per_link = [comms.bandwidths("all_reduce", 64e6, 2 * (n - 1) / n * 64e6 / 10e9, n)[1] for n in (2, 4, 8)]
    assert per_link == pytest.approx([10e9] * 3)


def test_the_fit_recovers_latency_and_bandwidth_and_refuses_what_it_cannot_fit():
    sizes = [2 ** k for k in range(10, 25)]
    noise = [1 + 0.02 * (-1) ** k for k in range(len(sizes))]
    alpha, beta = comms.fit_alpha_beta(sizes, [(50e-6 + b / 2e9) * e for b, e in zip(sizes, noise)])
    assert 1 / beta == pytest.approx(2e9, rel=0.05)
    assert comms.crossover(50e-6, 1 / 2e9) == pytest.approx(100e3)
    with pytest.raises(ValueError, match="two different sizes"):
        comms.fit_alpha_beta([1024, 1024], [1e-5, 2e-5])
    with pytest.raises(ValueError, match="no bandwidth term"):
        comms.crossover(1e-5, -1e-12)


def test_each_buffer_has_the_size_nccl_tests_reports():
    import torch

    device = torch.device("cpu")
    assert comms._buffers("all_gather", 4096, 4, device)[1].numel() * 4 == 4096  # the gathered output
    assert comms._buffers("reduce_scatter", 4096, 4, device)[0].numel() * 4 == 4096  # the input
    assert comms._buffers("all_reduce", 4096, 4, device)[0].numel() * 4 == 4096


def test_every_collective_times_on_two_real_ranks_and_a_big_message_takes_longer():
    small, big = 4096, 16 << 20
    for op in comms.OPS:
        seconds = comms.collective_times(op, [small, big], ranks=2, iters=3, warmup=1)
        assert len(seconds) == 2 and all(s > 0 for s in seconds), (op, seconds)
        assert seconds[1] > seconds[0], (op, seconds)  # 4096 times the bytes
    with pytest.raises(ValueError):
        comms.collective_times("all_reduce", [0], ranks=2)


def test_buckets_are_the_ones_ddp_computes():
    # DDP hands its parameters, last first, to torch's own bucketing (C++): the same buckets.
    import random

    import torch
    import torch.distributed as dist

    rng = random.Random(0)
    for _ in range(20):
        sizes = [4 * rng.choice([1, 7, 64, 1000, 40_000]) for _ in range(rng.randint(1, 30))]
        cap = rng.choice([1, 500, 4096, 100_000, 10 ** 9])
        last_first = [torch.empty(n // 4) for n in reversed(sizes)]
        theirs, _ = dist._compute_bucket_assignment_by_size(last_first, [cap], [False] * len(sizes))
        assert comms.buckets(sizes, cap) == [[len(sizes) - 1 - i for i in b] for b in theirs], (sizes, cap)
    with pytest.raises(ValueError, match="cap must be positive"):
        comms.buckets([4, 4], 0)


def _p2p_and_collectives(store_path):
    import torch
    import torch.distributed as dist

    from grader.grading import record
    from grader.launch import init_distributed

    rank, world, device = init_distributed()
    right, left = (rank + 1) % world, (rank - 1) % world
    t = torch.ones(5)
    alias = dist.isend
    side = dist.ProcessGroupGloo(dist.FileStore(store_path, world), rank, world)  # a group of its own
    with record.messages() as seen:
        for request in (alias(t, right), dist.irecv(torch.empty(5), left)):
            request.wait()
        for request in dist.batch_isend_irecv([dist.P2POp(dist.isend, t[:2], right),
                                               dist.P2POp(dist.irecv, torch.empty(2), left)]):
            request.wait()
        work = dist.all_reduce(t, async_op=True)
        seen.append(("mine", None))  # a test's own event, in its place
        work.get_future().wait()  # waiting through the future, or polling, is waiting too
        polled = dist.all_reduce(t, async_op=True)
        while not polled.is_completed():
            pass
        dist.all_reduce(t, group=side)
        dist.barrier()
    dist.all_reduce(t)  # after the block: not recorded
    return seen


def test_messages_records_every_send_collective_and_wait_in_order_however_called(tmp_path):
    from grader.launch import launch

    for seen in launch(_p2p_and_collectives, str(tmp_path / "store"), nprocs=3, show_output=False):
        polls = seen[13:-4]
        assert seen[:13] == [("send", 5), ("recv", 5), ("wait", None), ("wait", None), ("send", 2), ("recv", 2),
                             ("wait", None), ("wait", None), ("all_reduce", 5), ("mine", None), ("wait", None),
                             ("all_reduce", 5), ("wait", None)], seen
        assert set(polls) <= {("wait", None)}, seen
        assert seen[-4:] == [("all_reduce", 5), ("wait", None), ("barrier", 0), ("wait", None)], seen


def test_buckets_save_time_over_one_message_per_parameter_on_real_ranks():
    per_parameter, one_bucket = comms.bucket_times([25], [4096] * 30, iters=3, rounds=1)
    assert per_parameter > 0 and one_bucket > 0  # their ratio is measured in the lesson, not asserted here
    with pytest.raises(ValueError, match="bucket sizes must be positive"):
        comms.bucket_times([0], [4096])
    split = comms.compute_and_communication([4, 64], hidden=64, iters=1)
    assert all(backward > 0 for backward, _ in split) and split[0][1] == split[1][1] > 0  # one all-reduce, measured once


def _profiled_steps():
    """On a rank: a small MLP's step profiled twice: all-reduces only after backward, then none at all."""
    import torch
    import torch.distributed as dist

    from grader.launch import init_distributed
    from grader.models import mlp, synthetic_batch

    init_distributed()
    model = mlp(in_features=16, hidden=256)  # 6 parameters
    x, y = synthetic_batch(64, in_features=16)

    def step(communicate):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        for p in model.parameters() if communicate else ():
            dist.all_reduce(p.grad)
    step(True)
    return comms.profile_step(lambda: step(True)), comms.profile_step(lambda: step(False))


def test_a_profiled_step_tells_computation_from_communication_on_real_ranks():
    from grader.launch import launch

    for after, alone in launch(_profiled_steps, nprocs=2, show_output=False):
        # Each parameter's all-reduce (6 of them) runs on gloo's threads after backward, nothing beside it.
        assert 1 <= len(after.communication) <= 6 and after.compute, after
        assert after.communication[0][0] >= after.compute[0][0] and after.hidden() < 0.05, after
        assert all(start < end for start, end in after.compute + after.communication)
        assert alone.communication == [] and alone.hidden() == 0.0 and alone.compute
