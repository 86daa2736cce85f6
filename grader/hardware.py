"""What this machine has, and which device and backend a lesson should use.

Every measurement in the course prints :func:`describe` next to its numbers, so a
figure is never read without the hardware it came from.
"""

import os
import platform
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class GPU:
    index: int
    name: str
    memory_gib: float


# Set in every CPU rank started by the course's launcher: such a rank uses no GPU (it may be
# a fork of a process that started CUDA, where touching CUDA again would fail).
CPU_RANK = "COURSE_CPU_RANK"
# Set by parallel autograde in each worker (grader.grading.autograde.pin): the cores' worth
# the worker's share holds, which the kernel it starts may use at most.
CPU_SHARE = "COURSE_CPU_SHARE"


def gpus():
    """The visible CUDA GPUs, in index order.

    >>> all(g.memory_gib > 0 for g in gpus())   # e.g. [GPU(0, 'NVIDIA H100 80GB HBM3', 79.1)]
    True
    """
    found = []
    for i in range(gpu_count()):
        props = torch.cuda.get_device_properties(i)
        found.append(GPU(i, props.name, round(props.total_memory / 2**30, 1)))
    return found


def gpu_count():
    """Number of visible CUDA GPUs (0 on a machine without them, and in a CPU rank).

    >>> gpu_count() >= 0
    True
    """
    if os.environ.get(CPU_RANK):
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


# The oldest torch the lessons are true on. Before 2.8, fully_shard ignored an explicit
# reshard_after_forward=True on the root module, so lesson 03's "3Ψ as ZeRO-3" measured 2Ψ.
# pyproject.toml and environment.yml ask for the same (tests/hub/test_packaging.py checks it);
# a hub image keeps its own torch, so hub.smoke and `make gpu-check` check it where it runs.
TORCH_FLOOR = (2, 8)
TORCH_FLOOR_TEXT = "%d.%d" % TORCH_FLOOR


def torch_below_floor(version=None):
    """Why ``version`` (by default the installed torch's) is too old for the lessons, or None.

    >>> torch_below_floor("2.13.0+cpu") is None
    True
    >>> torch_below_floor("2.7.1+cu126")
    'torch 2.7.1+cu126 is older than 2.8, the oldest torch the lessons are true on: install torch>=2.8'
    """
    version = version or torch.__version__
    found = tuple(int(n) for n in re.match(r"(\d+)\.(\d+)", version).groups())
    if found >= TORCH_FLOOR:
        return None
    return (f"torch {version} is older than {TORCH_FLOOR_TEXT}, the oldest torch the lessons are true on: "
            f"install torch>={TORCH_FLOOR_TEXT}")


CGROUP = "/sys/fs/cgroup"  # a container's own cgroup, as the container sees it


def cpu_quota(cgroup=None):
    """CPUs' worth of time the container's quota allows, or None when there is no quota.

    A JupyterHub pod limited to 2 CPUs on a 64-core node may run on all 64 cores, but only
    for 2 cores' worth of time: cgroup v2 ``cpu.max`` ("200000 100000") or cgroup v1
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``.

    >>> cpu_quota() is None or cpu_quota() > 0
    True
    """
    root = Path(cgroup or CGROUP)
    for quota_file, period_file in (("cpu.max", None), ("cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us")):
        try:
            words = (root / quota_file).read_text().split()
            if period_file:
                words.append((root / period_file).read_text().strip())
            quota, period = words[0], float(words[1])
        except (OSError, IndexError, ValueError):
            continue
        return None if quota in ("max", "-1") else float(quota) / period
    return None


def cpu_cores():
    """CPU cores this process can really use at once.

    The affinity mask (cpusets included), capped by the container's CPU quota
    (:func:`cpu_quota`, rounded down, at least 1) and by the share parallel autograde
    gave this process's worker (``COURSE_CPU_SHARE``).

    >>> cpu_cores() >= 1
    True
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity API
        cores = os.cpu_count() or 1
    for cap in (cpu_quota(), os.environ.get(CPU_SHARE)):
        if cap is not None:
            cores = max(1, min(cores, int(float(cap))))
    return cores


def device():
    """The device this process should use: its current GPU, else the CPU.

    In a notebook that is the first GPU; on a rank that selected its own GPU (as
    ``init_distributed`` does with NCCL), that GPU.

    >>> device().type in ("cuda", "cpu")
    True
    """
    if not gpu_count():
        return torch.device("cpu")
    # Asking for the current device would start CUDA; until it is started, it is GPU 0.
    return torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_initialized() else 0)


def backend(ranks=None):
    """The torch.distributed backend for ``ranks`` ranks on this machine (by default
    :func:`parallel_ranks`): the one rule every part of the course picks a backend by.

    NCCL needs a GPU of its own for each rank, so it is chosen only when this machine has
    at least as many GPUs as ranks; otherwise the ranks are CPU processes talking over
    gloo. By default that means NCCL with two GPUs or more (with one GPU the parallel ranks
    are CPU processes, however few cores there are). Pass the rank count wherever it is
    known: ``launch(fn, nprocs=2)`` on a one-GPU machine runs gloo.

    >>> backend() in ("nccl", "gloo")
    True
    >>> backend(gpu_count() + 1)   # more ranks than GPUs
    'gloo'
    """
    if ranks is None:  # parallel_ranks(): one per GPU with two or more, else CPU processes
        return "nccl" if gpu_count() >= 2 else "gloo"
    return "nccl" if 1 <= ranks <= gpu_count() else "gloo"


def parallel_ranks():
    """How many ranks can really run at the same time here.

    One per GPU when there are at least two, else one per CPU core (at least one).

    >>> parallel_ranks() >= 1
    True
    """
    return gpu_count() if gpu_count() >= 2 else max(1, cpu_cores())


def describe():
    """One line saying what a measurement ran on.

    >>> "torch" in describe()   # e.g. 'CPU only (2 cores, x86_64), torch 2.13.0+cpu'
    True
    """
    cores = cpu_cores()
    listed = gpus()
    if not listed:
        return f"CPU only ({cores} cores, {platform.machine()}), torch {torch.__version__}"
    names = Counter((g.name, g.memory_gib) for g in listed)
    parts = ", ".join(f"{n}x {name} ({mem:g} GiB)" for (name, mem), n in names.items())
    return f"{parts}, {cores} CPU cores, torch {torch.__version__}"


def nccl_notes(nprocs, shm="/dev/shm", meminfo="/proc/meminfo"):
    """What on this machine may stop ``nprocs`` NCCL ranks from starting, and what to change.

    NCCL ranks on one machine pass data through shared memory (a container's /dev/shm is
    often 64 MiB), and each CUDA process takes host memory of its own.

    >>> nccl_notes(1, shm="/", meminfo="/nonexistent")
    []
    """
    notes = []
    try:
        free_mib = shutil.disk_usage(shm).free / 2**20
    except OSError:
        free_mib = None
    if free_mib is not None and free_mib < 512:
        notes.append(f"{shm} has {free_mib:.0f} MiB free: NCCL ranks exchange data through it and may fail "
                     f"with 'unhandled system error'. Give the container more: docker run --shm-size=2g, "
                     f"or a memory-backed emptyDir mounted at /dev/shm on Kubernetes.")
    try:
        with open(meminfo) as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        kib = None
    if kib is not None and kib / 2**20 < 2 * nprocs:
        notes.append(f"{kib / 2**20:.1f} GiB of memory is available for {nprocs} ranks, and each CUDA "
                     f"process needs about 2 GiB of host memory: start fewer ranks or free memory.")
    return notes
