"""Smoke test of a JupyterHub pod for the course: does this pod give the lessons what they need?

For the hub's admin, in a terminal of a freshly spawned server (once per profile)::

    cd /opt/course && python -m hub.smoke          # the course image keeps the course there
    python -m hub.smoke --expected-gpus 2          # when the profile sets no COURSE_EXPECTED_GPUS

Every check prints one line, ``PASS``, ``FAIL`` or ``SKIPPED``, with its reason; the
exit status is 1 when any check failed, else 0:

- ``course``: the toolkit (``grader``) and nbgrader import; which torch and hardware.
- ``torch``: the installed torch (a hub image keeps its own) is no older than the oldest the
  lessons are true on (:data:`grader.hardware.TORCH_FLOOR`).
- ``gpus``: the GPUs this pod sees match the count expected (``--expected-gpus``, else the
  environment's ``COURSE_EXPECTED_GPUS``, which the profiles in ``hub/config.yaml`` set).
  A pod that sees more than it was given usually sees every GPU of its node.
- ``/dev/shm``: memory (tmpfs, read from ``/proc/self/mountinfo``: a disk-backed mount there
  fails, however large) with enough free space for data-loader workers and NCCL (the
  threshold of :func:`grader.hardware.nccl_notes`).
- ``gloo all-reduce``: two CPU ranks started by :func:`grader.launch.launch`.
- ``nccl all-reduce``: one rank per GPU over NCCL (skipped, saying why, below 2 GPUs).
- ``nccl from a kernel``: the lessons' path on a GPU pod: a real Jupyter kernel starts CUDA,
  then launches one NCCL rank per GPU that all-reduce (skipped, saying why, below 2 GPUs).
- ``fsdp step``: two ranks, as the lessons start them (one per GPU over NCCL with 2 GPUs or
  more, else CPU processes over gloo), train one ``fully_shard`` step that equals one process's.
- ``pipeline``: a two-stage 1F1B pipeline on the same ranks runs every forward and backward.
- ``overlap``: on the same ranks, lesson 05's overlapped DDP: each gradient all-reduced
  asynchronously from its hook while backward runs, equal to one process's training.
- ``lesson``: the first code cells of lesson 00's release notebook, run in a real kernel.
- ``exchange`` and ``nbgitpuller``: what a class on the hub needs (skipped off a hub).

Importable too: :func:`run_checks` yields :class:`Result` objects.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

COURSE = Path(__file__).resolve().parents[1]
LESSON = COURSE / "release" / "00_foundations" / "00_foundations.ipynb"
EXPECTED_GPUS = "COURSE_EXPECTED_GPUS"
# grader.hardware.nccl_notes warns below this many MiB free in /dev/shm (tests check they agree).
SHM_MIN_FREE_MIB = 512
MEMORY_FS = {"tmpfs", "ramfs"}  # filesystems held in memory, as /dev/shm must be
PASS, FAIL, SKIPPED = "PASS", "FAIL", "SKIPPED"


@dataclass(frozen=True)
class Result:
    """One check's verdict and why."""
    check: str
    status: str  # PASS, FAIL or SKIPPED
    reason: str

    def __str__(self):
        return f"{self.status:<8}{self.check}: {self.reason}"


def on_hub():
    """Whether this process runs in a JupyterHub single-user server (or one of its terminals)."""
    return bool(os.environ.get("JUPYTERHUB_API_URL") or os.environ.get("JUPYTERHUB_USER"))


def check_course():
    """The toolkit and nbgrader import; say which torch, and what this pod runs on."""
    import nbgrader
    import torch

    import grader.launch  # noqa: F401 (the launcher and its torch.distributed imports)
    import grader.study  # noqa: F401 (the widgets: ipywidgets, anywidget)
    from grader import hardware

    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU build"
    where = Path(grader.__file__).resolve().parent
    if where.is_relative_to(COURSE):  # students' kernels, in their homes, never see this folder
        return Result("course", FAIL, f"grader is imported from the course folder {where}, not from an installed "
                                      f"package: install it (pip install {COURSE}) and run the smoke test again")
    return Result("course", PASS, f"grader from {where}, nbgrader {nbgrader.__version__}, "
                                  f"torch {torch.__version__} ({build}); {hardware.describe()}")


def check_torch():
    """The installed torch against the oldest the lessons are true on."""
    import torch

    from grader import hardware

    why = hardware.torch_below_floor()
    if why:
        return Result("torch", FAIL, f"{why} (a hub image keeps its own torch: build it from a newer base image)")
    return Result("torch", PASS, f"torch {torch.__version__}, the lessons need {hardware.TORCH_FLOOR_TEXT} or newer")


def check_gpus(expected=None):
    """The GPUs visible here against the count the pod was given."""
    import torch

    from grader import hardware

    visible = hardware.gpu_count()
    names = ", ".join(sorted({g.name for g in hardware.gpus()})) if visible else "none"
    if expected is None:
        return Result("gpus", SKIPPED, f"{visible} visible ({names}), but no count to compare with: set "
                                       f"{EXPECTED_GPUS} (the profile's nvidia.com/gpu limit) or pass --expected-gpus")
    if visible == expected:
        return Result("gpus", PASS, f"{visible} visible ({names}), {expected} expected")
    seen = f"{visible} visible ({names}), {expected} expected"
    if visible > expected:
        return Result("gpus", FAIL, (
            f"{seen}: this pod sees more GPUs than it was given, usually every GPU of its node. A known "
            f"misconfiguration: CUDA images set NVIDIA_VISIBLE_DEVICES=all (here: "
            f"{os.environ.get('NVIDIA_VISIBLE_DEVICES', 'unset')}), and where the node's container runtime "
            f"honours it any pod gets all GPUs, whatever its limit. Give every profile an nvidia.com/gpu "
            f"limit, and run the NVIDIA device plugin with deviceListStrategy=volume-mounts and the container "
            f"toolkit with accept-nvidia-visible-devices-envvar-when-unprivileged=false and "
            f"accept-nvidia-visible-devices-as-volume-mounts=true, so the variable cannot widen a pod's share."))
    if not torch.version.cuda:
        why = f"torch {torch.__version__} is a CPU build: the image's CUDA torch was replaced"
    elif not visible:
        why = ("no GPU visible: no nvidia.com/gpu limit reached this pod, or its node has no NVIDIA driver "
               "or device plugin (does nvidia-smi work here?)")
    else:
        why = "fewer than the limit: is CUDA_VISIBLE_DEVICES set (here: " \
              f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})?"
    return Result("gpus", FAIL, f"{seen}: {why}")


def check_shm(path="/dev/shm", mountinfo="/proc/self/mountinfo"):
    """/dev/shm exists, is memory (tmpfs), and is large enough (the threshold of ``nccl_notes``)."""
    from grader import hardware

    if not os.path.isdir(path):
        return Result("/dev/shm", FAIL, f"{path} does not exist: data-loader workers and NCCL need it "
                                        f"(mount a memory-backed emptyDir there)")
    usage = shutil.disk_usage(path)
    point, kind = mount_of(path, mountinfo) or (path, "unknown")
    sizes = (f"{path} ({kind}) has {usage.total / 2**30:.1f} GiB, {usage.free / 2**20:.0f} MiB free; "
             f"needed: memory, at least {SHM_MIN_FREE_MIB} MiB free")
    notes = hardware.nccl_notes(1, shm=path, meminfo=os.devnull)  # the /dev/shm note only
    if kind not in MEMORY_FS | {"unknown"}:
        notes.insert(0, f"It lies on the {kind} filesystem mounted at {point}, not in memory (tmpfs): shared "
                        f"memory there goes to disk, and data-loader workers and NCCL slow down or fail. "
                        f"Mount memory there: on Kubernetes an emptyDir with medium: Memory mounted at "
                        f"/dev/shm; under Docker, docker run --shm-size=2g.")
    if notes:
        return Result("/dev/shm", FAIL, f"{sizes}. {' '.join(notes)}")
    return Result("/dev/shm", PASS, sizes)


def mount_of(path, mountinfo="/proc/self/mountinfo"):
    """(mount point, filesystem type) of the mount holding ``path``, or None when unknown.

    The longest mount point that holds the resolved path wins; of mounts stacked on one
    point, the last (the one on top).

    >>> mount_of("/proc/self", "/proc/self/mountinfo")
    ('/proc', 'proc')
    """
    path = os.path.realpath(path)
    found = None
    try:
        with open(mountinfo) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:  # "36 35 98:0 /root /mnt rw,noatime master:1 - ext4 /dev/sda1 rw"
        fields, _, after = line.partition(" - ")
        if not after or len(fields.split()) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields.split()[4])  # \040 is a space
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (found is None or len(point) >= len(found[0])):
            found = (point, after.split()[0])
    return found


def _all_reduce(numel, repeats):
    """On each rank: all-reduce a tensor of rank + 1, check the sum, time ``repeats`` more."""
    import torch
    import torch.distributed as dist

    from grader.launch import init_distributed

    rank, world, device = init_distributed()
    t = torch.full((numel,), float(rank + 1), device=device)
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    ok = t.min().item() == want == t.max().item()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        dist.all_reduce(t)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return ok, (time.perf_counter() - start) / repeats, str(device)


def _collective(name, backend, nprocs, numel, repeats, timeout):
    from grader.launch import launch

    start = time.perf_counter()
    results = launch(_all_reduce, numel, repeats, nprocs=nprocs, backend=backend, timeout=timeout,
                     show_output=False)
    took = time.perf_counter() - start
    if not all(ok for ok, _, _ in results):
        return Result(name, FAIL, f"{nprocs} ranks all-reduced, but not every rank holds the right sum")
    seconds = max(s for _, s, _ in results)
    size = numel * 4
    bus = size * 2 * (nprocs - 1) / nprocs / seconds / 1e9  # bus bandwidth, as nccl-tests reports it
    devices = ", ".join(d for _, _, d in results)
    return Result(name, PASS, f"{nprocs} ranks ({devices}) agree; {size / 2**20:.0f} MiB all-reduced in "
                              f"{seconds * 1e3:.1f} ms (bus bandwidth {bus:.1f} GB/s); the launch took {took:.1f} s")


def check_gloo():
    """Two CPU ranks, started as the lessons start them, all-reduce over gloo."""
    return _collective("gloo all-reduce", "gloo", 2, numel=2**20, repeats=3, timeout=60)


def _gpus_or_skip(name):
    """(GPUs visible, None), or (them, a SKIPPED result) below the 2 that NCCL checks need."""
    from grader import hardware

    gpus = hardware.gpu_count()
    if gpus < 2:
        return gpus, Result(name, SKIPPED, f"needs 2 GPUs or more, this pod sees {gpus} (the lessons "
                                           f"then run their ranks on CPU processes over gloo)")
    return gpus, None


def fsdp_steps(steps, per_rank):
    """On each rank: ``steps`` Adam steps of lesson 03's MLP under ``fully_shard``, on a mesh of the
    ranks' devices, each rank on its slice of the batch. The full parameters after, and where the
    first weight's shard lies: (mesh device type, shard device, shard shape, full shape)."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from grader.launch import init_distributed
    from grader.models import mlp, synthetic_batch

    rank, world, device = init_distributed()
    model = fully_shard(mlp(in_features=16, hidden=32).to(device), mesh=init_device_mesh(device.type, (world,)))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = synthetic_batch(per_rank * world, in_features=16)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[mine].to(device)), y[mine].to(device)).backward()
        opt.step()
    w = model[0].weight
    shard = (w.device_mesh.device_type, str(w.to_local().device), tuple(w.to_local().shape), tuple(w.shape))
    return torch.cat([p.full_tensor().detach().flatten() for p in model.parameters()]).cpu(), shard


def one_process_steps(steps, batch):
    """The reference for :func:`fsdp_steps`: one CPU process, the whole batch; its parameters after."""
    import torch

    from grader.models import mlp, synthetic_batch

    model = mlp(in_features=16, hidden=32)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = synthetic_batch(batch, in_features=16)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def check_fsdp(steps=2, per_rank=8):
    """Two ranks train ``fully_shard`` steps, as lesson 03 does, and end where one process ends."""
    from grader import hardware
    from grader.launch import launch

    backend = hardware.backend(2)
    results = launch(fsdp_steps, steps, per_rank, nprocs=2, backend=backend, timeout=120, show_output=False)
    want = one_process_steps(steps, 2 * per_rank)
    devices = ", ".join(shard[1] for _, shard in results)
    off = max((got - want).abs().max().item() for got, _ in results)
    if off > 1e-5:
        return Result("fsdp step", FAIL, f"2 ranks ({devices}, {backend}) trained {steps} fully_shard steps, but their "
                                         f"parameters differ from one process's by up to {off:.2e}")
    return Result("fsdp step", PASS, f"2 ranks ({devices}, {backend}) trained {steps} fully_shard steps equal to "
                                     f"one process's (largest difference {off:.1e})")


def check_pipeline(micro_batches=4):
    """A two-stage 1F1B pipeline, as lesson 03 runs it: every forward and backward on its stage."""
    from grader import hardware, pipeline

    works = pipeline.run_schedule(micro_batches, "1f1b", stages=2, width=256, layers=4, batch=256)
    done = sorted((w.rank, w.kind, w.micro) for w in works)
    want = [(r, kind, m) for r in range(2) for kind in "BF" for m in range(micro_batches)]
    on = f"2 stages ({hardware.backend(2)})"
    if done != want:
        return Result("pipeline", FAIL, f"{on}, 1F1B over {micro_batches} micro-batches ran {len(done)} of "
                                        f"{len(want)} forwards and backwards")
    return Result("pipeline", PASS, f"{on}, 1F1B over {micro_batches} micro-batches: every forward and backward "
                                    f"ran; bubble {pipeline.bubble_fraction(works):.0%} measured, "
                                    f"{pipeline.bubble_formula(2, micro_batches):.0%} by the formula")


def overlapped_steps(steps, per_rank):
    """On each rank: ``steps`` SGD steps of the MLP, each gradient's all-reduce started asynchronously
    from its post-accumulate hook while backward runs and waited for before the step (lesson 05).
    Its parameters after, and the fewest all-reduces any step had started when backward returned."""
    import torch
    import torch.distributed as dist

    from grader.launch import init_distributed
    from grader.models import mlp, one_vector, synthetic_batch

    rank, world, device = init_distributed()
    model = mlp(in_features=16, hidden=32).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = synthetic_batch(per_rank * world, in_features=16)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    works, started = [], []
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda p: works.append(dist.all_reduce(p.grad, async_op=True)))
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[mine].to(device)), y[mine].to(device)).backward()
        started.append(len(works))
        for work in works:
            work.wait()
        works.clear()
        for p in model.parameters():
            p.grad /= world
        opt.step()
    return one_vector(model), min(started)


def check_overlap(steps=2, per_rank=8):
    """Two ranks train with all-reduces started from gradient hooks, as lesson 05 does, and end where one process ends."""
    import functools

    import torch

    from grader import hardware
    from grader.launch import launch
    from grader.models import train_one_process

    backend = hardware.backend(2)
    results = launch(overlapped_steps, steps, per_rank, nprocs=2, backend=backend, timeout=120, show_output=False)
    want = train_one_process(steps, 2 * per_rank, functools.partial(torch.optim.SGD, lr=0.1))
    off = max((got - want).abs().max().item() for got, _ in results)
    started = min(n for _, n in results)
    if off > 1e-5 or started < 6:
        return Result("overlap", FAIL, f"2 ranks ({backend}): parameters differ from one process's by up to {off:.2e}, "
                                       f"{started} of 6 all-reduces started during backward")
    return Result("overlap", PASS, f"2 ranks ({backend}) started all 6 gradients' all-reduces from hooks during "
                                   f"backward, {steps} steps equal to one process's (largest difference {off:.1e})")


def check_nccl():
    """One rank per GPU all-reduces over NCCL (needs 2 GPUs or more)."""
    gpus, skipped = _gpus_or_skip("nccl all-reduce")
    return skipped or _collective("nccl all-reduce", "nccl", gpus, numel=2**24, repeats=5, timeout=120)


def check_nccl_kernel():
    """A Jupyter kernel that has started CUDA launches one NCCL rank per GPU (needs 2 GPUs or more)."""
    gpus, skipped = _gpus_or_skip("nccl from a kernel")
    return skipped or kernel_launch_check("nccl", gpus)


def kernel_code(backend, nprocs, timeout=120):
    """The cells :func:`kernel_launch_check` runs: start CUDA (where there is a GPU), as a lesson
    does before it launches, then all-reduce on ``nprocs`` ranks started by ``launch``.

    >>> 'launch(all_reduce, nprocs=2, backend="nccl"' in kernel_code("nccl", 2)[1]
    True
    """
    touch = """import torch
gpus = torch.cuda.device_count()  # what a lesson asks first; then it puts a tensor on a GPU
touched = torch.ones(1, device="cuda") + 1 if gpus else None
"""
    run = f"""import time
import torch.distributed as dist
from grader.launch import init_distributed, launch

def all_reduce():
    rank, world, device = init_distributed()
    t = torch.full((2**20,), float(rank + 1), device=device)
    dist.all_reduce(t)
    return t.min().item() == world * (world + 1) / 2 == t.max().item(), str(device)

start = time.perf_counter()
results = launch(all_reduce, nprocs={nprocs}, backend="{backend}", timeout={timeout}, show_output=False)
assert all(ok for ok, _ in results), f"not every rank holds the right sum: {{results}}"
print(f"{{len(results)}} ranks ({{', '.join(d for _, d in results)}}) agree, launched in "
      f"{{time.perf_counter() - start:.1f}} s from a kernel that sees {{gpus}} GPUs"
      f"{{' and had started CUDA' if touched is not None else ''}}")
"""
    return [touch, run]


def kernel_launch_check(backend, nprocs, timeout=300):
    """In a real Jupyter kernel, run :func:`kernel_code`: ranks launched from a notebook, as every lesson does."""
    import nbformat

    name = f"{backend} from a kernel"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in kernel_code(backend, nprocs)])
    try:
        _execute(nb, timeout)
    except Exception as e:
        return Result(name, FAIL, _short(e))
    printed = [o.text.strip() for o in nb.cells[-1].outputs if o.output_type == "stream" and o.name == "stdout"]
    return Result(name, PASS, printed[-1].splitlines()[-1] if printed else f"{nprocs} ranks agree")


def _execute(nb, timeout):
    """Run a notebook's cells in a real kernel, in a scratch directory (nothing written to the course)."""
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="course-smoke-") as workdir:
        NotebookClient(nb, timeout=timeout, kernel_name=nb.metadata.get("kernelspec", {}).get("name", "python3"),
                       resources={"metadata": {"path": workdir}}).execute(stderr=subprocess.DEVNULL)


def check_lesson(notebook=LESSON, cells=5, timeout=120):
    """Run the first ``cells`` code cells of a lesson's notebook in a real kernel."""
    import nbformat

    notebook = Path(notebook)
    if not notebook.exists():
        return Result("lesson", FAIL, f"{notebook} is missing")
    nb = nbformat.read(notebook, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"][:cells]
    nb.cells = code
    start = time.perf_counter()
    try:
        _execute(nb, timeout)
    except Exception as e:  # CellExecutionError and kernel failures name the cell and the error
        return Result("lesson", FAIL, f"{notebook.name}: {_short(e)}")
    took = time.perf_counter() - start
    out = [o for c in nb.cells for o in c.outputs if o.output_type == "stream"]
    printed = next((o.text.strip().splitlines()[0] for o in out if o.name == "stdout" and o.text.strip()), "")
    stderr = [o.text.strip() for o in out if o.name == "stderr" and o.text.strip()]
    note = f"; it wrote to stderr: {_short(stderr[0])}" if stderr else ""
    return Result("lesson", PASS, f"the first {len(code)} code cells of {notebook.name} ran in {took:.1f} s "
                                  f"and printed {printed!r}{note}")


def check_exchange():
    """nbgrader's exchange (COURSE_EXCHANGE) exists and this user can write to it."""
    root = os.environ.get("COURSE_EXCHANGE")
    if not root:
        if on_hub():
            return Result("exchange", FAIL, "COURSE_EXCHANGE is not set: set it (and COURSE_ID) in "
                                            "singleuser.extraEnv, where the exchange volume is mounted")
        return Result("exchange", SKIPPED, "not on a JupyterHub and COURSE_EXCHANGE is not set")
    if not os.path.isdir(root):
        return Result("exchange", FAIL, f"COURSE_EXCHANGE={root} is not a directory: is the exchange volume mounted?")
    mode = oct(os.stat(root).st_mode & 0o777)
    if not os.access(root, os.W_OK | os.X_OK):
        return Result("exchange", FAIL, f"{root} (mode {mode}) is not writable here: nbgrader needs it "
                                        f"writable by everyone (chmod 0777)")
    return Result("exchange", PASS, f"{root} (mode {mode}) is writable; course id "
                                    f"{os.environ.get('COURSE_ID') or 'unset (nbgrader_config.py default)'}")


def check_nbgitpuller():
    """nbgitpuller, which the course's links need, is installed."""
    try:
        import nbgitpuller
    except ImportError:
        if on_hub():
            return Result("nbgitpuller", FAIL, "not installed: the course's links (python -m hub.links) need it")
        return Result("nbgitpuller", SKIPPED, "not installed, and not needed off a JupyterHub "
                                              "(the course image installs it)")
    return Result("nbgitpuller", PASS, f"nbgitpuller {nbgitpuller.__version__}")


def _short(error, lines=12):
    """The end of an error's text (a rank's traceback ends with what went wrong)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()  # no terminal colours from tracebacks
    kept = text.splitlines()[-lines:]
    return " | ".join(line.strip() for line in kept if line.strip()) or type(error).__name__


def run_checks(expected_gpus=None, notebook=LESSON, cells=5, shm="/dev/shm"):
    """Run every check in turn and yield its :class:`Result`; a check that raises FAILs.

    >>> next(run_checks()).check
    'course'
    """
    if expected_gpus is None and os.environ.get(EXPECTED_GPUS, "").strip():
        expected_gpus = int(os.environ[EXPECTED_GPUS])
    checks = [("course", check_course), ("torch", check_torch), ("gpus", lambda: check_gpus(expected_gpus)),
              ("/dev/shm", lambda: check_shm(shm)), ("gloo all-reduce", check_gloo),
              ("nccl all-reduce", check_nccl), ("nccl from a kernel", check_nccl_kernel),
              ("fsdp step", check_fsdp), ("pipeline", check_pipeline), ("overlap", check_overlap),
              ("lesson", lambda: check_lesson(notebook, cells)),
              ("exchange", check_exchange), ("nbgitpuller", check_nbgitpuller)]
    for name, check in checks:
        try:
            yield check()
        except Exception as e:
            yield Result(name, FAIL, f"{type(e).__name__}: {_short(e)}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m hub.smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument("--expected-gpus", type=int, default=None,
                        help=f"GPUs this pod should see (default: ${EXPECTED_GPUS}, else not checked)")
    parser.add_argument("--notebook", default=str(LESSON), help="the lesson whose first cells run")
    parser.add_argument("--cells", type=int, default=5, help="how many of its code cells (default 5)")
    parser.add_argument("--shm", default="/dev/shm", help="the shared-memory mount to check")
    args = parser.parse_args(argv)
    # Import the toolkit as students' kernels do, from the installed package, never from this folder.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != COURSE]
    results = []
    for result in run_checks(args.expected_gpus, args.notebook, args.cells, args.shm):
        print(result, flush=True)
        results.append(result)
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, SKIPPED)}
    print(f"smoke test: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIPPED]} skipped")
    return 1 if counts[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
