"""Record what code really did, so a check can judge the route and not only the result.

A wrong answer can reach the right number: a plain model trained on the whole batch on
every rank ends with the same weights as DDP, and a timer of nothing still returns a
time. These recorders let a test see the route taken:

- :func:`forwards`: every module forward call made while it is open: which module, how
  deep in the call (0 = called by your code, 1 = called inside another module's forward),
  the batch it was given, and for DDP whether its backward will all-reduce;
- :func:`steps`: when every optimizer step ran, whatever the optimizer;
- :func:`calls`: every call of one function (``torch.save``, say), optionally slowed
  down so that a rank that does not wait for it is caught;
- :func:`runs`: every run of a Python function's code, however it was imported or renamed
  (``from grader.pipeline import split as cut`` included);
- :func:`slow_saves`: every ``torch.save``, slowed down as a large checkpoint is, with the
  time each one finished;
- :func:`moves`: the devices modules were moved to (``.to``, ``.cuda``), which CPU ranks cannot tell apart;
- :func:`waits`: when a rank entered a collective (a barrier, an all-reduce), so sleeping is not waiting;
- :func:`messages`: every message a rank's process group sent (point-to-point or collective, however
  it was called) and every wait for one, in order, so a test sees how many messages a ring sent and
  whether all-reduces were started before backward ended;
- :func:`cuda_queue`: on a machine without a GPU, a stand-in CUDA queue, so a timer that
  never waits for queued work is caught there too;
- :func:`beside_answer`: run a test's own function where the answer runs, so that what it
  records is what the answer's code did; what comes back is data.
"""

import contextlib
import inspect
import os
import sys
import threading
import time
from dataclasses import dataclass

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_post_hook

from ..models import is_dtensor

TORCH = os.path.dirname(torch.__file__) + os.sep  # where torch's own classes are written


@dataclass
class Forward:
    """One module forward call."""

    module: str  # the module's class name, e.g. "DistributedDataParallel" (see :func:`class_name`)
    depth: int  # 0: called by your code; 1: inside another module's forward; ...
    rows: int | None  # dim 0 of the first tensor argument (the batch), None without one
    input: torch.Tensor | None = None  # a CPU copy of that tensor, when recorded
    sharded: bool = False  # its parameters are DTensors when called (FSDP2, tensor parallel)
    grad_sync: bool | None = None  # DDP only: will the coming backward all-reduce? (False inside no_sync)
    time: float = 0.0  # time.perf_counter() when it was called


def class_name(obj):
    """The name of an object's class: torch's by their short name, any other with the module that
    defined it, so that a class of the learner's own never passes for torch's (a class whose methods
    were written outside torch's files is not torch's, whatever its ``__module__`` says).

    >>> class DataParallel(torch.nn.Module):
    ...     pass
    >>> class_name(torch.nn.Linear(2, 2)), class_name(DataParallel())
    ('Linear', 'grader.grading.record.DataParallel')
    """
    cls = type(obj)
    code = [inspect.unwrap(f).__code__.co_filename for f in vars(cls).values() if inspect.isfunction(f)]
    torchs = cls.__module__.split(".")[0] == "torch" and all(name.startswith(TORCH) for name in code)
    return cls.__name__ if torchs else f"{cls.__module__}.{cls.__qualname__}"


@contextlib.contextmanager
def forwards(inputs=False):
    """Record every ``nn.Module`` forward call made on this thread while the block runs.

    With ``inputs=True`` each record keeps a CPU copy of the call's first tensor argument.
    Calls made on other threads (DataParallel's replicas on several GPUs) are left out.

    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 2))
    >>> with forwards() as seen:
    ...     _ = net(torch.ones(5, 3))
    >>> [(f.module, f.depth, f.rows) for f in seen]
    [('Sequential', 0, 5), ('Linear', 1, 5)]
    """
    seen, depth, owner = [], [0], threading.get_ident()

    def before(module, args):
        if threading.get_ident() != owner:
            return
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        rows = first.shape[0] if first is not None and first.dim() else None
        copy = first.detach().cpu().clone() if inputs and first is not None else None
        sharded = any(is_dtensor(p) for p in module.parameters())
        sync = getattr(module, "require_backward_grad_sync", None)  # DDP's flag, which no_sync clears
        seen.append(Forward(class_name(module), depth[0], rows, copy, sharded, sync, time.perf_counter()))
        depth[0] += 1

    def after(module, args, output):
        if threading.get_ident() == owner:
            depth[0] -= 1

    handles = [register_module_forward_pre_hook(before),
               register_module_forward_hook(after, always_call=True)]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def steps():
    """Record the ``time.perf_counter()`` at which each optimizer step (any optimizer) ended while the block runs.

    >>> net = torch.nn.Linear(2, 1)
    >>> opt = torch.optim.SGD(net.parameters(), lr=0.1)
    >>> with steps() as stepped:
    ...     net(torch.ones(1, 2)).sum().backward()
    ...     opt.step()
    >>> len(stepped)
    1
    """
    stepped = []
    handle = register_optimizer_step_post_hook(lambda optimizer, args, kwargs: stepped.append(time.perf_counter()))
    try:
        yield stepped
    finally:
        handle.remove()


def watched(fn, *args):
    """``fn(*args)`` with its forward calls recorded: ``(its result, the calls it made itself)``.

    Launch it on ranks (``launch(record.watched, train, 3, 8, nprocs=2)``) to see, on each rank,
    which modules the learner's loop called and the batch each call saw (inputs kept).

    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 2))
    >>> _, seen = watched(net, torch.ones(5, 3))
    >>> [(f.module, f.rows) for f in seen]
    [('Sequential', 5)]
    """
    with forwards(inputs=True) as seen:
        result = fn(*args)
    return result, [f for f in seen if f.depth == 0]


@contextlib.contextmanager
def calls(owner, name, delay=0.0):
    """Record every call of ``owner.name`` while the block runs, as ``(args, kwargs)``.

    Each call first waits ``delay`` seconds: a slow ``torch.save`` on rank 0 shows
    whether the other ranks wait for the file or run ahead.

    >>> import math
    >>> with calls(math, "sqrt") as seen:
    ...     math.sqrt(16.0)
    4.0
    >>> seen
    [((16.0,), {})]
    """
    original = getattr(owner, name)
    seen = []

    def recorded(*args, **kwargs):
        seen.append((args, kwargs))
        time.sleep(delay)
        return original(*args, **kwargs)

    setattr(owner, name, recorded)
    try:
        yield seen
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def runs(*functions):
    """Count the runs of each Python function's code while the block runs, in this thread.

    A call is recognised by the code object itself, so an alias or a ``from ... import``
    made before the block is counted too (which :func:`calls` cannot see).

    >>> import json
    >>> dumps = json.dumps
    >>> with runs(json.dumps) as counted:
    ...     _ = dumps([1]), dumps([2])
    >>> counted
    {'dumps': 2}
    """
    codes = {f.__code__: f.__name__ for f in functions}
    counted = {name: 0 for name in codes.values()}

    def count(code):
        counted[codes[code]] += 1

    with _on_calls(codes, count):
        yield counted


@contextlib.contextmanager
def _on_calls(codes, action):
    """Call ``action(code)`` on every call, in this thread, of a function whose code is in ``codes``
    (a profile hook, so aliases and ``from ... import`` count), keeping any profile hook already set."""
    previous = sys.getprofile()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            action(frame.f_code)
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


@contextlib.contextmanager
def moves():
    """Record where modules were moved while the block runs (``module.to(...)``, ``module.cuda()``), as
    device strings: on CPU ranks, where every device is the CPU, whether a loop moved its model at all.

    >>> with moves() as moved:
    ...     _ = torch.nn.Linear(2, 2).to("cpu").to(torch.float64)
    >>> moved
    ['cpu']
    """
    moved, to, cuda = [], torch.nn.Module.to, torch.nn.Module.cuda

    def recorded_to(module, *args, **kwargs):
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is not None:
            moved.append(str(device))
        return to(module, *args, **kwargs)

    def recorded_cuda(module, device=None):
        moved.append(str(torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")))
        return cuda(module, device)

    torch.nn.Module.to, torch.nn.Module.cuda = recorded_to, recorded_cuda
    try:
        yield moved
    finally:
        torch.nn.Module.to, torch.nn.Module.cuda = to, cuda


# The collectives a rank may wait at: a barrier, or any collective every rank must join.
COLLECTIVES = ("barrier", "monitored_barrier", "all_reduce", "broadcast", "all_gather", "gather", "reduce", "scatter",
               "broadcast_object_list", "all_gather_object", "gather_object")


@contextlib.contextmanager
def waits():
    """Record the ``time.time()`` at which this rank entered a collective of ``torch.distributed``
    (``COLLECTIVES``: a barrier, an all-reduce, ...) while the block runs, in this thread, however it
    was imported or renamed.

    >>> with waits() as entered:
    ...     pass
    >>> entered
    []
    """
    import torch.distributed as dist

    codes = {inspect.unwrap(getattr(dist, name)).__code__ for name in COLLECTIVES if hasattr(dist, name)}
    entered = []
    with _on_calls(codes, lambda code: entered.append(time.time())):
        yield entered


# The process group's own methods (below torch.distributed's functions, so every way of calling
# them is seen), and a bare backend's (a group made from a store): point-to-point sends and the
# collectives, by the name a record gives them.
SENDS = {"send": "send", "recv": "recv", "recv_anysource": "recv"}
GROUP_COLLECTIVES = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather", "_allgather_base": "all_gather", "all_gather_single": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall": "all_to_all", "alltoall_base": "all_to_all", "all_to_all_single": "all_to_all",
    "broadcast": "broadcast", "reduce": "reduce", "gather": "gather", "scatter": "scatter",
    "barrier": "barrier", "monitored_barrier": "barrier"}
# Every way to wait for a started message, or to ask whether it is done (polling is waiting):
# a handle's methods, and its future's.
WORK_WAITS = ("wait", "synchronize", "is_completed", "is_success", "result", "exception", "get_future_result")
FUTURE_WAITS = ("wait", "value", "done")


@contextlib.contextmanager
def messages():
    """Record, in order, what this process's process groups did while the block runs: ``("send",
    elements)`` and ``("recv", elements)`` for each point-to-point message, ``(collective, elements)``
    for each collective started (``"all_reduce"``, ``"all_gather"``, ``"barrier"``, ...), and
    ``("wait", None)`` each time code waited for one to finish or asked whether it had (a handle's
    ``wait``, ``is_completed``, its future's ``wait`` or ``done``...). The recording sits in the process
    group's own methods (and a bare backend's), so ``dist.send``, ``isend``, ``batch_isend_irecv`` and
    any alias of them are all seen. A test may append its own events to the list (a gradient ready,
    backward returning) to see the order.

    >>> with messages() as seen:
    ...     pass
    >>> seen
    []
    """
    from torch._C import _distributed_c10d as c10d

    events = []
    patched = []

    def wrap(owner, method, name):
        # The method as the class holds it (a descriptor, bound anew at each call), to restore as it was.
        original = next(k.__dict__[method] for k in owner.__mro__ if method in k.__dict__)

        def recorded(self, *args, **kwargs):
            if name != "wait":
                first = args[0] if args else None
                tensors = first if isinstance(first, (list, tuple)) else [first]
                events.append((name, sum(t.numel() for t in tensors if isinstance(t, torch.Tensor))))
            else:
                events.append(("wait", None))
            return original.__get__(self, owner)(*args, **kwargs)

        patched.append((owner, method, original if method in owner.__dict__ else None))
        setattr(owner, method, recorded)

    for owner in (c10d.ProcessGroup, c10d.Backend):
        for table in (SENDS, GROUP_COLLECTIVES):
            for method, name in table.items():
                if hasattr(owner, method):
                    wrap(owner, method, name)
    for owner, methods in ((c10d.Work, WORK_WAITS), (torch._C.Future, FUTURE_WAITS)):
        for method in methods:
            if hasattr(owner, method):
                wrap(owner, method, "wait")
    try:
        yield events
    finally:
        for owner, method, original in reversed(patched):
            if original is None:
                delattr(owner, method)  # inherited: the base class's own shows through again
            else:
                setattr(owner, method, original)


@contextlib.contextmanager
def slow_saves(delay):
    """Record every ``torch.save`` to a path while the block runs, slowed down as a large checkpoint is:
    the file appears at once, incomplete, and is complete ``delay`` seconds later. Yields the
    ``time.time()`` at which each save finished, so a test on several ranks can tell a rank that
    waited for the checkpoint from one that only waited for the file to appear, or slept.

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "w.pt")
    >>> with slow_saves(0.1) as finished:
    ...     torch.save({"w": torch.ones(2)}, path)
    >>> len(finished), torch.load(path)["w"].tolist()
    (1, [1.0, 1.0])
    """
    original = torch.save
    finished = []

    def save(obj, f, *args, **kwargs):
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as partial:
                partial.write(b"not a checkpoint yet")
        time.sleep(delay)
        result = original(obj, f, *args, **kwargs)
        finished.append(time.time())
        return result

    torch.save = save
    try:
        yield finished
    finally:
        torch.save = original


class _Queue:
    """Work queued on the stand-in GPU of :func:`cuda_queue`: done at ``until`` (time.perf_counter())."""

    def __init__(self):
        self.until = 0.0

    def work(self, seconds):
        """A function that queues ``seconds`` of work and returns at once, as a kernel launch does."""
        def launch():
            self.until = max(self.until, time.perf_counter()) + seconds
        return launch

    def synchronize(self, device=None):
        time.sleep(max(0.0, self.until - time.perf_counter()))


@contextlib.contextmanager
def cuda_queue():
    """A stand-in CUDA queue on a machine without a GPU, to check that a timer waits for queued work.

    Inside the block ``torch.cuda.is_available()`` says True, ``queue.work(s)`` gives a function
    that returns at once and leaves ``s`` seconds of work queued (as a kernel launch does), and
    ``torch.cuda.synchronize()`` waits until the queued work is done. A timer that reads its clock
    without synchronising measures the launch, not the work. On a real GPU, time real kernels instead.

    >>> with cuda_queue() as queue:
    ...     start = time.perf_counter()
    ...     queue.work(0.05)()
    ...     launched = time.perf_counter() - start
    ...     torch.cuda.synchronize()
    ...     done = time.perf_counter() - start
    >>> launched < 0.05 <= done   # the launch returns before its work is done; synchronize waits for it
    True
    """
    queue = _Queue()
    # The functions themselves take the stand-in's code, so a timer that holds them under other
    # names (``from torch.cuda import synchronize``, a default argument) uses the stand-in too.
    # Their code runs in torch.cuda's namespace, where the queue waits for them meanwhile.
    functions = {torch.cuda.is_available: _available.__code__, torch.cuda.synchronize: _synchronize.__code__}
    saved = {f: f.__code__ for f in functions}
    torch.cuda._course_queue = queue
    try:
        for f, code in functions.items():
            f.__code__ = code
        yield queue
    finally:
        for f, code in saved.items():
            f.__code__ = code
        del torch.cuda._course_queue


def _available():
    return True


def _synchronize(device=None):
    _course_queue.synchronize()  # noqa: F821 (a name of torch.cuda's while the stand-in is up)


def beside_answer(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` run where the student's answers run, its result back as data.

    While a student works there is one kernel, and this is a plain call. In autograde the tests
    run in the grader's kernel, out of the answer's reach, and this runs ``fn`` in the answer's
    kernel instead (:func:`grader.grading.remote.run`): a recorder opened there sees the answer's
    code, and a file made there is one the answer's ranks may write. (A ``launch`` whose function
    calls the student's does this by itself.)

    >>> beside_answer(sorted, [3, 1, 2])
    [1, 2, 3]
    """
    from .remote import run

    return run(fn, *args, **kwargs)
