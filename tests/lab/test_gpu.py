"""What only a machine with CUDA GPUs can prove, each result held against a CPU or one-process reference.

Every test is marked ``gpu`` and skipped, with the reason, where there is no CUDA GPU; the
NCCL ones need two (one GPU per rank). ``make gpu-check`` runs them (``pytest -m gpu
tests/lab/test_gpu.py``) and lists each in its report.

The CPU form (``GPU_TESTS_ON_CPU=1``, set by ``make gpu-check``'s quick form, which ``make
test`` runs): where the GPUs are missing, each test runs anyway with the CPU standing in for
every GPU and gloo for NCCL (:class:`Target`), so its scaffolding (imports, launches,
subprocesses, paths, the toolkit calls) runs on every CPU machine and cannot rot; only the
assertions about what a GPU does (timings, the allocator, TF32) wait for real GPUs.

- NCCL set-up: each rank's group bound to its own GPU (``device_id``), an all-reduce right.
- CUDA timing: :func:`grader.timing.measure` waits for the GPU; a bare clock times the launch.
- The memory calculator against CUDA's caching allocator (:func:`grader.memory.cuda_peak`).
- Pipeline timelines read on synchronised GPUs (GPipe, 1F1B, interleaved 1F1B), the bubble near the formula.
- FSDP2 on a CUDA mesh training exactly like one process on the CPU.
- A DDP step profiled: NCCL's kernels as the communication beside the computation's.
- The TF32 guard: float32 matmuls in full float32 where the image forces TF32.
- CPU ranks launched after the kernel trained on a GPU; the grading sandbox leaving the GPUs reachable.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle
import pytest
import torch
import torch.distributed as dist

from grader import hardware, memory, pipeline, timing
from grader.launch import init_distributed, launch
from grader.models import transformer

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # hub/ runs from a checkout: its smoke test's FSDP step is lesson 03's
import hub.smoke  # noqa: E402
from hub.smoke import fsdp_steps, one_process_steps  # noqa: E402

# NCCL ranks are spawned: the functions below travel to them by value (a spawned rank could
# not import this test module, or hub/, by name).
cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(hub.smoke)

GPUS = hardware.gpu_count()
CPU_FORM = os.environ.get("GPU_TESTS_ON_CPU") == "1"
pytestmark = pytest.mark.gpu
one_gpu = pytest.mark.skipif(GPUS < 1 and not CPU_FORM, reason="needs a CUDA GPU; this machine has none")
two_gpus = pytest.mark.skipif(GPUS < 2 and not CPU_FORM,
                              reason=f"needs 2 CUDA GPUs, one per NCCL rank; this machine has {GPUS}")
SHAPE = dict(hidden=64, heads=4, seq=64)  # lesson 03's transformer


class Target:
    """What a test that needs ``gpus`` GPUs runs on: real CUDA GPUs and NCCL where this machine has
    them, else (the CPU form) the CPU standing in for each GPU and gloo for NCCL."""

    def __init__(self, gpus):
        self.cuda = GPUS >= gpus
        self.backend = "nccl" if self.cuda else "gloo"

    def device(self, index=0):
        """GPU ``index``, or the CPU standing in for it."""
        return torch.device("cuda", index) if self.cuda else torch.device("cpu")

    def size(self, on_gpu, on_cpu):
        """A problem size: the one that shows the GPU's behaviour, or a small one for the CPU form."""
        return on_gpu if self.cuda else on_cpu


def _nccl_rank():
    """On each rank: join over NCCL, all-reduce rank + 1, meet at a barrier; where this rank computes."""
    rank, world, device = init_distributed()
    total = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(total)
    dist.barrier()  # a group bound to no GPU guesses one here, and warns
    current = torch.cuda.current_device() if device.type == "cuda" else None
    return rank, str(device), current, str(dist.group.WORLD.bound_device_id), total.item()


@two_gpus
def test_nccl_ranks_each_bind_their_group_to_their_own_gpu(capsys):
    on = Target(2)
    results = launch(_nccl_rank, nprocs=2, backend=on.backend)
    bound = [f"cuda:{r}" if on.cuda else "None" for r in range(2)]  # a gloo group is bound to no device
    assert results == [(r, str(on.device(r)), r if on.cuda else None, bound[r], 3.0) for r in range(2)]  # 1 + 2
    shown = capsys.readouterr().out  # every line the ranks wrote, stderr included
    assert "currently unknown" not in shown and "Guessing device" not in shown, shown


@one_gpu
def test_measure_waits_for_the_gpu_and_a_bare_clock_times_only_the_launch():
    on = Target(1)
    gpu = on.device()
    n = on.size(8192, 256)  # 1.1 TFLOP a product on a GPU: milliseconds even in TF32, not microseconds
    a = torch.randn(n, n, device=gpu)
    synced = timing.measure(lambda: a @ a, device=gpu, repeats=5)
    bare = timing.measure(lambda: a @ a, device=gpu, repeats=5, sync=False)
    assert synced.synchronized and len(synced.times) == len(bare.times) == 5

    def waited():  # the reference: a wall clock read only once the GPU is done
        t0 = time.perf_counter()
        a @ a
        timing.wait(gpu)
        return time.perf_counter() - t0

    wall = sorted(waited() for _ in range(5))[2]
    if on.cuda:  # a CPU has nothing queued: both clocks are right there
        assert not bare.synchronized and "NOT synchronised" in str(bare)
        assert synced.median > 10 * bare.median, f"events {synced}; bare clock {bare}"
        assert 0.5 < synced.median / wall < 2, f"events {synced}; synchronised wall clock {wall * 1e3:.2f} ms"


@one_gpu
def test_wait_returns_once_the_queued_work_has_run():
    on = Target(1)
    gpu = on.device()
    n = on.size(8192, 256)
    a = torch.randn(n, n, device=gpu)
    for _ in range(10):  # tens of milliseconds of work at least, queued in well under one
        a @ a
    queued = on.cuda and not torch.cuda.current_stream(gpu).query()
    timing.wait(gpu)  # a CPU has nothing queued: it returns at once
    if on.cuda:
        assert queued and torch.cuda.current_stream(gpu).query()


def _training_step_on_a_fresh_gpu(batch, layers):
    """In a fresh process, as in a fresh kernel: one training step on this rank's device (GPU 0, or
    the CPU in the CPU form), counted by :func:`memory.training_step_bytes` and by CUDA's allocator."""
    gpu = hardware.device()
    net = transformer(**SHAPE, layers=layers).to(gpu)
    x = torch.randn(batch, SHAPE["seq"], SHAPE["hidden"], device=gpu)
    with memory.cuda_peak(gpu) as cuda:
        got = memory.training_step_bytes(net, torch.optim.Adam(net.parameters()), x)
    return got, cuda.before, cuda.peak, torch.cuda.max_memory_allocated(gpu) if gpu.type == "cuda" else 0


@one_gpu
def test_the_memory_calculator_against_cudas_allocator():
    on = Target(1)
    # The first configuration of lesson 03's calculator cell, in a process of its own.
    (got, before, peak, bare), = launch(_training_step_on_a_fresh_gpu, 4, 2, nprocs=1, backend=on.backend,
                                        show_output=False)
    want = memory.estimate(**SHAPE, layers=2, batch=4)
    assert got == {kind: want[kind] for kind in got}  # the tensors on the GPU are the CPU's estimate, byte for byte
    if not on.cuda:  # no allocator to read: cuda_peak counts nothing on a CPU
        assert (before, peak, bare) == (0, 0, 0)
        return
    allocator = got["parameters"] + peak  # the parameters were allocated before the step
    seen = (f"parameters + peak {allocator:,} B against the estimate's {want['total']:,} B "
            f"({allocator / want['total']:.0%}); before the step {before:,} B; max_memory_allocated {bare:,} B")
    # The allocator holds at least the parameters and every saved activation when backward starts
    # (72% of the estimate here; Adam's state, which the estimate adds, only appears after backward)
    # and adds temporaries (activations' gradients, blocks rounded to 512 B), never the estimate again.
    # A cuBLAS workspace (8-32 MiB) counted in the peak would put it at 3-8 times the estimate.
    assert 0.6 <= allocator / want["total"] <= 2, seen
    assert bare > allocator, seen  # read bare, the allocator's maximum also counts what came before


def _every_pass(works, micro, stages=(0, 1)):
    """Whether a timeline holds one forward and one backward of every micro-batch on every stage, each taking time."""
    seen = sorted((w.rank if w.stage is None else w.stage, w.kind, w.micro) for w in works)
    return (seen == [(s, kind, m) for s in stages for kind in "BF" for m in range(micro)]
            and all(w.end > w.start for w in works))


# Wide layers, so that each forward and backward (milliseconds) outweighs a kernel launch and a
# send: a timeline read without waiting for the GPU would time the launches, a bubble near 1.
WIDE = dict(width=4096, layers=8, batch=4096)
SMALL = dict(width=64, layers=4, batch=64)  # the CPU form: the calls, not the times


@two_gpus
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_a_pipeline_timeline_on_two_gpus_is_synchronised_and_its_bubble_follows_the_formula(schedule):
    on = Target(2)
    works = pipeline.run_schedule(4, schedule, stages=2, **on.size(WIDE, SMALL))
    assert _every_pass(works, 4), works
    measured, formula = pipeline.bubble_fraction(works), pipeline.bubble_formula(2, 4)
    if on.cuda:
        assert formula - 0.1 <= measured <= formula + 0.15, f"measured bubble {measured:.0%}, formula {formula:.0%}"


@two_gpus
def test_interleaved_1f1b_on_two_gpus_holds_two_stages_each_and_shrinks_the_bubble():
    on = Target(2)
    works = pipeline.run_interleaved(4, stages_per_rank=2, ranks=2, **on.size(WIDE, SMALL))
    assert _every_pass(works, 4, stages=(0, 1, 2, 3)), works
    assert {(w.rank, w.stage) for w in works} == {(0, 0), (1, 1), (0, 2), (1, 3)}
    measured, formula = pipeline.bubble_fraction(works), pipeline.bubble_formula(2, 4, stages_per_rank=2)
    if on.cuda:  # more sends than one stage per rank: a looser upper bound
        assert formula - 0.1 <= measured <= formula + 0.2, f"measured bubble {measured:.0%}, formula {formula:.0%}"


@two_gpus
def test_fsdp2_on_a_cuda_mesh_trains_like_one_process():
    on = Target(2)
    # Lesson 03's FSDP2 challenge, as the hub's smoke test runs it on a pod.
    results = launch(fsdp_steps, 4, 8, nprocs=2, backend=on.backend, show_output=False)
    expected = one_process_steps(4, 16)
    for rank, (params, shard) in enumerate(results):
        device = on.device(rank)  # half of the first weight's rows, on its GPU
        assert shard == (device.type, str(device), (16, 16), (32, 16))
        torch.testing.assert_close(params, expected, rtol=1e-5, atol=1e-5)


def _matmul_precision():
    """This process's float32 matmul settings, and how far a matmul on its device (GPU 0, else the CPU)
    lands from float64 on the CPU (relative to the largest entry): about 1e-7 in float32, 1e-4 or
    more in TF32."""
    from torch.backends import cuda, cudnn

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)
    exact = a.double() @ b.double()
    device = hardware.device()
    error = ((a.to(device) @ b.to(device)).cpu().double() - exact).abs().max() / exact.abs().max()
    return (os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"), torch.get_float32_matmul_precision(),
            cuda.matmul.allow_tf32, cudnn.allow_tf32, error.item())


def _precision_with_tf32_allowed_after():
    """A rank's precision as it starts, then the error once TF32 is allowed: the measurement can tell them apart."""
    start = _matmul_precision()
    torch.set_float32_matmul_precision("high")
    return start, _matmul_precision()[-1]


HERE = Path(__file__).parent


def _profiled_ddp_step():
    """On each rank: one DDP step of a small transformer, after two to warm up, as torch.profiler saw it."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from grader import comms

    _, _, device = init_distributed()
    model = DDP(transformer(layers=4).to(device))
    x = torch.randn(4, 8, 64, device=device)

    def step():
        model.zero_grad()
        model(x).square().mean().backward()
    for _ in range(2):
        step()
    return comms.profile_step(step)


@two_gpus
def test_a_profiled_ddp_step_shows_its_all_reduces_beside_the_computation():
    # Lesson 05's overlap timeline: on GPUs the intervals are CUDA kernels, NCCL's the communication.
    on = Target(2)
    for line in launch(_profiled_ddp_step, nprocs=2, backend=on.backend, show_output=False):
        assert line.compute and line.communication, line
        assert all(0 <= start < end for start, end in line.compute + line.communication), line
        assert 0 <= line.hidden() <= 1


@one_gpu
def test_ranks_and_the_toolkit_compute_in_full_float32_where_the_image_forces_tf32(monkeypatch):
    on = Target(1)
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")  # as some images set it for every process
    (start, tf32_error), = launch(_precision_with_tf32_allowed_after, nprocs=1, backend=on.backend,
                                  show_output=False)
    assert start[:4] == (None, "highest", False, False) and start[4] < 1e-5, start
    if on.cuda and torch.cuda.get_device_capability(0) >= (8, 0):  # TF32 exists from Ampere on
        assert tf32_error > 1e-5, f"TF32 allowed, yet the error is {tf32_error:.1e}: this test cannot see TF32"

    # The calling process (a notebook's kernel) gets the same from grader.launch.full_float32():
    # this module imported by name from its own folder, the suite's conftest beside it.
    code = (f"import json, {Path(__file__).stem} as here\nfrom grader.launch import full_float32\n"
            "full_float32()\nprint(json.dumps(here._matmul_precision()))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], cwd=HERE, env=env, capture_output=True, text=True,
                          timeout=300)  # this environment, the override included
    assert proc.returncode == 0, proc.stderr[-3000:]
    env, precision, matmul, cudnn, error = json.loads(proc.stdout.splitlines()[-1])
    assert (env, precision, matmul, cudnn) == (None, "highest", False, False) and error < 1e-5, proc.stdout


def _backward_on_the_cpu():
    model = torch.nn.Linear(4, 1)
    model(torch.ones(2, 4)).sum().backward()
    return model.weight.grad.sum().item()


@one_gpu
def test_cpu_ranks_run_backward_passes_after_this_process_trained_on_the_gpu():
    """A lesson's kernel trains on the GPU, then launches CPU ranks (gloo, where there are fewer GPUs
    than ranks): autograd started a thread per GPU, and a rank forked from here could not run backward."""
    on = Target(1)
    model = torch.nn.Linear(4, 1).to(on.device())
    model(torch.ones(2, 4, device=on.device())).sum().backward()
    assert launch(_backward_on_the_cpu, nprocs=2, backend="gloo", show_output=False) == [8.0, 8.0]


@one_gpu
def test_the_grading_sandbox_leaves_the_answers_kernel_its_gpus(tmp_path):
    """Autograde runs answers in a sandboxed kernel (grader.grading.sandbox): it must still reach the GPUs,
    quietly (a graded cell that writes to stderr scores 0)."""
    on = Target(1)
    code = ("from grader.grading import sandbox\nprint(sandbox.lock())\nimport torch\n"
            f"print(torch.cuda.device_count(), torch.ones(3, device={str(on.device())!r}).sum().item())")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == f"{GPUS} 3.0", proc.stdout
