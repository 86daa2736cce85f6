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
