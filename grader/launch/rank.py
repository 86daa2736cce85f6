"""What code running on a rank calls, under :func:`grader.launch.launch` and under ``torchrun``
alike: join the group, pick the backend, report progress, compute in full float32."""

import os
from pathlib import Path

import torch
import torch.distributed as dist

from .. import hardware

RUN_DIR = "COURSE_LAUNCH_DIR"  # set on ranks started by launch(); unset under torchrun
BACKEND = "COURSE_LAUNCH_BACKEND"


def full_float32():
    """Make this process compute float32 matmuls and convolutions in full float32.

    GPUs can run them in TF32 (10 bits of mantissa), and some images force that for every
    matmul with ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``; results then differ from a CPU
    reference by about 1e-3, more than the course's equivalence checks allow. Every rank
    started by :func:`launch` calls this first.

    >>> full_float32(); torch.get_float32_matmul_precision()
    'highest'
    """
    os.environ.pop("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", None)  # read once, at the first matmul
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False


def init_distributed(backend=None):
    """Join the process group described by the environment; return (rank, world_size, device).

    Works the same on ranks started by :func:`launch` and by ``torchrun``: both set
    RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. The backend is the one
    ``launch`` chose, else :func:`rank_backend`. With NCCL the rank's GPU is selected
    before the group is joined. Calling it twice is harmless.

    >>> from grader.launch import launch
    >>> def rank_and_size():
    ...     rank, world, device = init_distributed()
    ...     return rank, world, device.type
    >>> launch(rank_and_size, nprocs=2, backend="gloo", show_output=False)
    [(0, 2, 'cpu'), (1, 2, 'cpu')]
    """
    backend = backend or os.environ.get(BACKEND) or rank_backend()
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        # device_id binds the group to this rank's GPU (NCCL then needs no guess, and says nothing)
        dist.init_process_group(backend, **({"device_id": device} if backend == "nccl" else {}))
    return dist.get_rank(), dist.get_world_size(), device


def rank_backend():
    """The backend for a rank started by ``torchrun``: :func:`hardware.backend` of the ranks
    on this machine (LOCAL_WORLD_SIZE), so NCCL when each has a GPU of its own.

    >>> rank_backend() in ("nccl", "gloo")   # 'nccl' under torchrun --nproc-per-node=2 with 2 GPUs
    True
    """
    return hardware.backend(int(os.environ.get("LOCAL_WORLD_SIZE", 1)))


def progress(iterable, total=None):
    """Iterate, and let rank 0 drive a progress bar in the launching cell.

    Under ``torchrun`` (or outside a launch) it simply yields the items.

    >>> list(progress(range(3)))
    [0, 1, 2]
    """
    run_dir = os.environ.get(RUN_DIR)
    if total is None:
        total = len(iterable) if hasattr(iterable, "__len__") else 0
    report = bool(run_dir) and os.environ.get("RANK") == "0" and total
    for i, item in enumerate(iterable):
        yield item
        if report:  # write then rename, so the launching side never reads half a line
            tmp = Path(run_dir, "progress.tmp")
            tmp.write_text(f"{i + 1} {total}")
            tmp.rename(tmp.with_suffix(""))
