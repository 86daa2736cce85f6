"""What only a machine with CUDA GPUs can prove, each result held against a CPU or one-process reference.

Every test is marked ``gpu`` and skipped, with the reason, where there is no CUDA GPU; the
NCCL ones need two (one GPU per rank). ``make gpu-check`` runs them (``pytest -m gpu
tests/lab/test_gpu.py``) and lists each in its report; on a CPU machine ``make test`` shows
them skipped.

- NCCL set-up: each rank's group bound to its own GPU (``device_id``), an all-reduce right.
- CUDA timing: :func:`grader.timing.measure` waits for the GPU; a bare clock times the launch.
- The memory calculator against CUDA's caching allocator (:func:`grader.memory.cuda_peak`).
- Pipeline timelines read on synchronised GPUs, the bubble near the formula.
- FSDP2 on a CUDA mesh training exactly like one process on the CPU.
- The TF32 guard: float32 matmuls in full float32 where the image forces TF32.
"""

import json
import os
import subprocess
import sys
import time

import cloudpickle
import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from grader import hardware, memory, pipeline, timing
from grader.launch import init_distributed, launch
from grader.models import mlp, synthetic_batch, transformer

from conftest import REPO

# NCCL ranks are spawned: the functions below travel to them by value (a spawned rank could
# not import this test module by name).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

GPUS = hardware.gpu_count()
pytestmark = pytest.mark.gpu
one_gpu = pytest.mark.skipif(GPUS < 1, reason="needs a CUDA GPU; this machine has none")
two_gpus = pytest.mark.skipif(GPUS < 2, reason=f"needs 2 CUDA GPUs, one per NCCL rank; this machine has {GPUS}")
SHAPE = dict(hidden=64, heads=4, seq=64)  # lesson 03's transformer


def _nccl_rank():
    """On each rank: join over NCCL, all-reduce rank + 1, meet at a barrier; where this rank computes."""
    rank, world, device = init_distributed()
    total = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(total)
    dist.barrier()  # a group bound to no GPU guesses one here, and warns
    return rank, str(device), torch.cuda.current_device(), str(dist.group.WORLD.bound_device_id), total.item()


@two_gpus
def test_nccl_ranks_each_bind_their_group_to_their_own_gpu(capsys):
    results = launch(_nccl_rank, nprocs=2, backend="nccl")
    assert results == [(r, f"cuda:{r}", r, f"cuda:{r}", 3.0) for r in range(2)]  # 1 + 2 on every rank
    shown = capsys.readouterr().out  # every line the ranks wrote, stderr included
    assert "currently unknown" not in shown and "Guessing device" not in shown, shown


@one_gpu
def test_measure_waits_for_the_gpu_and_a_bare_clock_times_only_the_launch():
    gpu = torch.device("cuda", 0)
    a = torch.randn(8192, 8192, device=gpu)  # 1.1 TFLOP a product: milliseconds even in TF32, not microseconds
    synced = timing.measure(lambda: a @ a, device=gpu, repeats=5)
    bare = timing.measure(lambda: a @ a, device=gpu, repeats=5, sync=False)
    assert synced.synchronized and not bare.synchronized and "NOT synchronised" in str(bare)
    assert synced.median > 10 * bare.median, f"events {synced}; bare clock {bare}"

    def waited():  # the reference: a wall clock read only once the GPU is done
        t0 = time.perf_counter()
        a @ a
        torch.cuda.synchronize(gpu)
        return time.perf_counter() - t0

    wall = sorted(waited() for _ in range(5))[2]
    assert 0.5 < synced.median / wall < 2, f"events {synced}; synchronised wall clock {wall * 1e3:.2f} ms"


@one_gpu
def test_wait_returns_once_the_queued_work_has_run():
    gpu = torch.device("cuda", 0)
    a = torch.randn(8192, 8192, device=gpu)
    stream = torch.cuda.current_stream(gpu)
    for _ in range(10):  # tens of milliseconds of work at least, queued in well under one
        a @ a
    queued = not stream.query()
    timing.wait(gpu)
    assert queued and stream.query()


def _training_step_on_a_fresh_gpu(batch, layers):
    """In a fresh process, as in a fresh kernel: one training step on the GPU, counted by
    :func:`memory.training_step_bytes` and by CUDA's allocator."""
    gpu = torch.device("cuda", 0)
    net = transformer(**SHAPE, layers=layers).to(gpu)
    x = torch.randn(batch, SHAPE["seq"], SHAPE["hidden"], device=gpu)
    with memory.cuda_peak(gpu) as cuda:
        got = memory.training_step_bytes(net, torch.optim.Adam(net.parameters()), x)
    return got, cuda.before, cuda.peak, torch.cuda.max_memory_allocated(gpu)


@one_gpu
def test_the_memory_calculator_against_cudas_allocator():
    # The first configuration of lesson 03's calculator cell, in a process of its own.
    (got, before, peak, bare), = launch(_training_step_on_a_fresh_gpu, 4, 2, nprocs=1, backend="nccl",
                                        show_output=False)
    want = memory.estimate(**SHAPE, layers=2, batch=4)
    assert got == {kind: want[kind] for kind in got}  # the tensors on the GPU are the CPU's estimate, byte for byte
    allocator = got["parameters"] + peak  # the parameters were allocated before the step
    seen = (f"parameters + peak {allocator:,} B against the estimate's {want['total']:,} B "
            f"({allocator / want['total']:.0%}); before the step {before:,} B; max_memory_allocated {bare:,} B")
    # The allocator holds at least the parameters and every saved activation when backward starts
    # (72% of the estimate here; Adam's state, which the estimate adds, only appears after backward)
    # and adds temporaries (activations' gradients, blocks rounded to 512 B), never the estimate again.
    # A cuBLAS workspace (8-32 MiB) counted in the peak would put it at 3-8 times the estimate.
    assert 0.6 <= allocator / want["total"] <= 2, seen
    assert bare > allocator, seen  # read bare, the allocator's maximum also counts what came before


@two_gpus
def test_a_gpipe_timeline_on_two_gpus_is_synchronised_and_its_bubble_follows_the_formula():
    # Wide layers, so that each forward and backward (milliseconds) outweighs a kernel launch and
    # a send: a timeline read without waiting for the GPU would time the launches, a bubble near 1.
    works = pipeline.run_schedule(4, "gpipe", stages=2, width=4096, layers=8, batch=4096)
    every = [(rank, kind, micro) for rank in (0, 1) for kind in "BF" for micro in range(4)]
    assert sorted((w.rank, w.kind, w.micro) for w in works) == every
    assert all(w.end > w.start for w in works), works
    measured, formula = pipeline.bubble_fraction(works), pipeline.bubble_formula(2, 4)
    assert formula - 0.1 <= measured <= formula + 0.15, f"measured bubble {measured:.0%}, formula {formula:.0%}"


def _fsdp_train(steps, per_rank):
    """On each rank: lesson 03's FSDP2 challenge on a mesh of the ranks' devices; the full parameters, and a shard."""
    rank, world, device = init_distributed()
    model = fully_shard(mlp(in_features=16, hidden=32).to(device), mesh=init_device_mesh(device.type, (world,)))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = synthetic_batch(per_rank * world, in_features=16)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[mine].to(device)), y[mine].to(device)).backward()
        opt.step()
    w = model[0].weight
    shard = (w.device_mesh.device_type, str(w.to_local().device), tuple(w.to_local().shape), tuple(w.shape))
    return torch.cat([p.full_tensor().detach().flatten() for p in model.parameters()]).cpu(), shard


def _one_process(steps, batch):
    """The reference: one CPU process, the whole batch."""
    model = mlp(in_features=16, hidden=32)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = synthetic_batch(batch, in_features=16)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@two_gpus
def test_fsdp2_on_a_cuda_mesh_trains_like_one_process():
    results = launch(_fsdp_train, 4, 8, nprocs=2, backend="nccl", show_output=False)
    expected = _one_process(4, 16)
    for rank, (params, shard) in enumerate(results):
        assert shard == ("cuda", f"cuda:{rank}", (16, 16), (32, 16))  # half of the first weight's rows, on its GPU
        torch.testing.assert_close(params, expected, rtol=1e-5, atol=1e-5)


def _matmul_precision():
    """This process's float32 matmul settings, and how far a GPU matmul lands from float64 on the CPU
    (relative to the largest entry): about 1e-7 in float32, 1e-4 or more in TF32."""
    from torch.backends import cuda, cudnn

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)
    exact = a.double() @ b.double()
    error = ((a.cuda() @ b.cuda()).cpu().double() - exact).abs().max() / exact.abs().max()
    return (os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"), torch.get_float32_matmul_precision(),
            cuda.matmul.allow_tf32, cudnn.allow_tf32, error.item())


def _precision_with_tf32_allowed_after():
    """A rank's precision as it starts, then the error once TF32 is allowed: the measurement can tell them apart."""
    start = _matmul_precision()
    torch.set_float32_matmul_precision("high")
    return start, _matmul_precision()[-1]


@one_gpu
def test_ranks_and_the_toolkit_compute_in_full_float32_where_the_image_forces_tf32(monkeypatch):
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")  # as some images set it for every process
    (start, tf32_error), = launch(_precision_with_tf32_allowed_after, nprocs=1, backend="nccl", show_output=False)
    assert start[:4] == (None, "highest", False, False) and start[4] < 1e-5, start
    if torch.cuda.get_device_capability(0) >= (8, 0):  # TF32 exists from Ampere on
        assert tf32_error > 1e-5, f"TF32 allowed, yet the error is {tf32_error:.1e}: this test cannot see TF32"

    # The calling process (a notebook's kernel) gets the same from grader.launch.full_float32().
    code = ("import json, test_gpu\nfrom grader.launch import full_float32\n"
            "full_float32()\nprint(json.dumps(test_gpu._matmul_precision()))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO / "tests", capture_output=True, text=True,
                          timeout=300)  # this environment, the override included
    assert proc.returncode == 0, proc.stderr[-3000:]
    env, precision, matmul, cudnn, error = json.loads(proc.stdout.splitlines()[-1])
    assert (env, precision, matmul, cudnn) == (None, "highest", False, False) and error < 1e-5, proc.stdout
