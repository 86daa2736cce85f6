"""Where the bytes of training go, measured from real tensors and predicted by formula.

Training holds four kinds of bytes on each device: parameters, gradients, optimizer state
(Adam keeps two moments per parameter) and activations (what the forward pass saves for
the backward pass). :func:`state_bytes` and :func:`saved_activations` measure them;
:func:`per_rank` predicts the first three for a device of a sharded, pipelined job.
:func:`watch` and :func:`sharding_profile` measure what sharding does during a step: the
most parameter bytes a rank holds (its shards plus whatever FSDP has gathered) and the
collectives it calls.
"""

import contextlib
import math
import warnings
import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from . import hardware
from .models import is_dtensor, loaded_type

# Bytes per parameter of each model state, for Adam: fp32 keeps everything in 4-byte floats.
# "mixed" is the accounting of the ZeRO and Megatron papers: 2-byte parameters and gradients,
# plus an fp32 master copy and the two fp32 moments (2 + 2 + 12, K = 12 in ZeRO's 2 + 2 + K).
# torch.autocast keeps fp32 parameters and gradients instead (4 + 4 + 8), and FSDP2's
# MixedPrecisionPolicy keeps fp32 shards: the same 16 bytes, split differently. Autocast's 2-byte
# weight copies come on top: cached for the autocast region, and kept until backward where backward
# needs them (about 1.3 bytes per parameter on mlp(), 2 at most), so a step that holds its
# gradients through the forward pass peaks near 18 bytes per parameter before activations.
ADAM = {"fp32": {"parameters": 4, "gradients": 4, "optimizer": 8},
        "mixed": {"parameters": 2, "gradients": 2, "optimizer": 12}}


def _is_fsdp(module):
    """Whether ``module`` is wrapped by FSDP2's ``fully_shard`` (without importing FSDP, as :func:`is_dtensor`)."""
    fsdp = loaded_type("torch.distributed.fsdp", "FSDPModule")
    return fsdp is not None and isinstance(module, fsdp)


def _local(t):
    return t.to_local() if is_dtensor(t) else t


def tensor_bytes(tensors):
    """Bytes held by ``tensors``, each storage counted once, a DTensor by its local shard.

    >>> w = torch.zeros(10, 4)
    >>> tensor_bytes([w, w, w[:2]]), tensor_bytes([torch.zeros(3, dtype=torch.bfloat16)])
    (160, 6)
    """
    storages = {}
    for t in tensors:
        if t is None:
            continue
        t = _local(t)
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def state_bytes(model, optimizer=None):
    """Measured bytes of the model states on this process: parameters, gradients, optimizer state.

    >>> net = torch.nn.Linear(1000, 10)           # 10,010 parameters
    >>> opt = torch.optim.Adam(net.parameters())
    >>> net(torch.ones(1, 1000)).sum().backward(); opt.step()
    >>> state_bytes(net, opt)
    {'parameters': 40040, 'gradients': 40040, 'optimizer': 80080}
    """
    params = list(model.parameters())
    states = [] if optimizer is None else [
        v for state in optimizer.state.values() for v in state.values()
        if isinstance(v, torch.Tensor) and v.dim() > 0]  # Adam's step counter is a scalar
    return {"parameters": tensor_bytes(params), "gradients": tensor_bytes(p.grad for p in params),
            "optimizer": tensor_bytes(states)}


@dataclass
class Saved:
    """Bytes the forward pass has saved for backward: now, and the most at any moment."""

    current: int = 0
    peak: int = 0


class _Held:
    """What autograd keeps for one saved tensor; counts its storage while it is alive."""

    def __init__(self, tensor, tally, counts):
        storage = tensor.untyped_storage()
        self.tensor, self.key, self.nbytes = tensor, storage.data_ptr(), storage.nbytes()
        self.tally, self.counts = tally, counts
        if counts.get(self.key, 0) == 0:
            tally.current += self.nbytes
            tally.peak = max(tally.peak, tally.current)
        counts[self.key] = counts.get(self.key, 0) + 1

    def __del__(self):
        self.counts[self.key] -= 1
        if self.counts[self.key] == 0:
            self.tally.current -= self.nbytes


@contextlib.contextmanager
def saved_activations(model):
    """Count the activation bytes autograd holds while the block runs: live now and at peak.

    Every tensor the forward pass saves for backward is counted once per storage while
    autograd holds it; ``model``'s parameters (saved by layers too) are left out.

    >>> net = torch.nn.Sequential(torch.nn.Linear(100, 100), torch.nn.ReLU())
    >>> with saved_activations(net) as saved:
    ...     net(torch.ones(8, 100)).sum().backward()
    >>> saved.peak, saved.current     # the input (8 x 100 floats) and the ReLU output
    (6400, 0)
    """
    tally, counts = Saved(), {}

    def pack(t):
        # Parameters are looked up at each save: FSDP swaps in whole (unsharded) ones for compute.
        if t.untyped_storage().data_ptr() in {_local(p).untyped_storage().data_ptr() for p in model.parameters()}:
            return t
        return _Held(t, tally, counts)

    def unpack(held):
        return held.tensor if isinstance(held, _Held) else held

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield tally


def per_rank(params, *, data=1, zero=0, pipeline=1, tensor=1, precision="fp32"):
    """Predicted bytes of parameters, gradients and Adam's state on one device.

    Pipeline and tensor parallelism each give a device ``1/pipeline`` and ``1/tensor`` of
    the parameters. ZeRO then shards across the ``data`` parallel ranks: stage 1 the
    optimizer state, stage 2 the gradients as well, stage 3 (FSDP) the parameters too.
    ``precision`` is ``"fp32"`` (4 + 4 + 8 bytes per parameter) or ``"mixed"`` (2 + 2 + 12).

    >>> per_rank(1_000_000)
    {'parameters': 4000000, 'gradients': 4000000, 'optimizer': 8000000}
    >>> per_rank(1_000_000, data=4, zero=3)
    {'parameters': 1000000, 'gradients': 1000000, 'optimizer': 2000000}
    """
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {zero}")
    held = params / (pipeline * tensor)
    sharded_from = {"optimizer": 1, "gradients": 2, "parameters": 3}  # the stage that shards each
    return {kind: round(held * size / (data if zero >= sharded_from[kind] else 1))
            for kind, size in ADAM[precision].items()}


def block_params(hidden):
    """Parameters of one transformer block: attention 4h² + 4h, MLP 8h² + 5h, two LayerNorms 4h.

    >>> block_params(64)
    49984
    """
    return 12 * hidden * hidden + 13 * hidden


def block_activations(batch, seq, hidden, heads, *, tensor=1, precision="fp32"):
    """Bytes one :class:`~grader.models.Block` saves for backward on a batch, counted tensor by tensor.

    In values of ``batch x seq x hidden``: the LayerNorm inputs and outputs (4, kept whole
    on every tensor-parallel rank), then q, k, v (3), the attention output (1) and the MLP's
    two 4h tensors (8), split across ``tensor`` ranks; plus the ``heads x seq x seq``
    attention matrix, split by heads. LayerNorm statistics stay fp32; the causal mask is one
    byte per entry. Exact for fp32 on the course's block (a test measures it); ``"mixed"``
    counts 2 bytes per value.

    The 16 b·s·h + a·b·s² values are Korthikanti et al. (2022)'s s·b·h·(34 + 5·a·s/h) bytes
    per layer (16-bit values, 1-byte dropout masks) with the dropouts taken out, as this
    block has none: less the masks (2 s·b·h + a·s²·b bytes) and the attention dropout's output
    (2 a·s²·b bytes), 32 s·b·h + 2 a·s²·b bytes remain, that is 16 s·b·h + a·s²·b values.

    >>> block_activations(4, 64, 64, 4)    # 16 values of b*s*h + the attention matrix, in fp32
    1318912
    """
    size = ADAM[precision]["parameters"]  # bytes per value: 4 in fp32, 2 in mixed precision
    bsh = batch * seq * hidden
    values = 4 * bsh + (12 * bsh + heads * batch * seq * seq) / tensor
    return round(size * values + 4 * 4 * batch * seq + seq * seq)


def estimate(*, layers, hidden, heads, seq, batch, precision="fp32", data=1, zero=0, pipeline=1, tensor=1,
             micro_batches=1, schedule="1f1b", checkpointing=False):
    """Predicted bytes per device of training a stack of transformer blocks with Adam, by category.

    ``batch`` is the global batch: each data-parallel rank gets ``batch / data`` samples,
    fed through the pipeline as ``micro_batches`` micro-batches. A pipeline stage holds
    ``layers / pipeline`` layers (the first stage any extra one) and the activations of the
    micro-batches in flight: every one of them with GPipe, at most ``pipeline`` with 1F1B.
    With ``checkpointing`` each layer keeps only its input, and backward recomputes one
    layer at a time.

    >>> e = estimate(layers=4, hidden=64, heads=4, seq=64, batch=8)
    >>> e["params"], e["activations"], e["total"]
    (199936, 10534912, 13733888)
    >>> estimate(layers=4, hidden=64, heads=4, seq=64, batch=8, data=2, zero=3)["total"]
    6875136
    """
    if schedule not in ("gpipe", "1f1b"):
        raise ValueError(f"schedule must be 'gpipe' or '1f1b', got {schedule!r}")
    if batch % (data * micro_batches):
        raise ValueError(f"a global batch of {batch} does not split into {data} ranks x {micro_batches} micro-batches")
    if hidden % heads:
        raise ValueError(f"a hidden size of {hidden} does not split into {heads} heads "
                         f"(each head gets hidden / heads dimensions)")
    if heads % tensor:
        raise ValueError(f"{heads} heads do not split over {tensor} tensor-parallel ranks")
    if layers < pipeline:
        raise ValueError(f"{layers} layers cannot fill {pipeline} pipeline stages")
    params = layers * block_params(hidden)
    result = {"params": params, **per_rank(params, data=data, zero=zero, pipeline=pipeline, tensor=tensor,
                                           precision=precision)}
    micro = batch // (data * micro_batches)
    stage_layers = -(-layers // pipeline)
    in_flight = micro_batches if schedule == "gpipe" else min(pipeline, micro_batches)
    layer = block_activations(micro, seq, hidden, heads, tensor=tensor, precision=precision)
    if checkpointing:  # every layer's input for each micro-batch in flight, plus one layer recomputed
        layer_input = ADAM[precision]["parameters"] * micro * seq * hidden
        result["activations"] = stage_layers * in_flight * layer_input + layer
    else:
        result["activations"] = stage_layers * in_flight * layer
    result["total"] = sum(result[k] for k in ("parameters", "gradients", "optimizer", "activations"))
    return result


def training_step_bytes(model, optimizer, x):
    """Measured bytes per category after one training step of ``model`` on ``x``.

    The step is forward, the mean of the output as the loss (it saves nothing itself), backward and ``optimizer.step()``; activations
    are the most bytes autograd held at once (:func:`saved_activations`), the model states
    are measured afterwards (:func:`state_bytes`). Compare with :func:`estimate`.

    >>> net = torch.nn.Sequential(torch.nn.Linear(100, 100), torch.nn.ReLU())
    >>> training_step_bytes(net, torch.optim.Adam(net.parameters()), torch.ones(8, 100))
    {'parameters': 40400, 'gradients': 40400, 'optimizer': 80800, 'activations': 6400, 'total': 168000}
    """
    with saved_activations(model) as saved:
        model(x).mean().backward()
    optimizer.step()
    result = {**state_bytes(model, optimizer), "activations": saved.peak}
    result["total"] = sum(result.values())
    return result


# --- Sharding, measured during a step: the parameters a rank holds, the collectives it calls ---

# The kinds of collective, by how their ops' names start once the "_" are taken out: c10d's
# "_allgather_base_", "allreduce_", ..., and the functional collectives' "all_gather_into_tensor", ...
_COLLECTIVES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
                "broadcast": "broadcast"}
_COMMUNICATION = ("c10d", "_c10d_functional", "c10d_functional")  # namespaces of ops that only communicate
# The torch releases whose FSDP2 :func:`watch` is written for: the course's floor to the newest tried.
_TORCH_KNOWN = f"{hardware.TORCH_FLOOR_TEXT} to 2.13"


@dataclass
class Collective:
    """One collective a process called: its kind and the bytes of the whole tensor it works on
    (an all-gather's output, a reduce-scatter's input, an all-reduce's or a broadcast's
    tensor), each rank's share included."""

    name: str  # "all_reduce", "all_gather", "reduce_scatter", "broadcast"; others keep their op's name
    nbytes: int


def _collective(func, args, out):
    op = str(func).split(".")[1]
    name = next((kind for prefix, kind in _COLLECTIVES.items() if op.replace("_", "").startswith(prefix)),
                op.strip("_"))
    # c10d's ops take their output first, the functional ones return it.
    sizes = [sum(_nbytes(t) for t in tree_leaves(a) if isinstance(t, torch.Tensor)) for a in (*args[:2], out)]
    return Collective(name, max(sizes))


def _nbytes(t):
    t = _local(t)
    return t.numel() * t.element_size()


def traffic(collectives):
    """Bytes a step moves, in ZeRO's accounting: an all-reduce moves its tensor twice (it is a
    reduce-scatter followed by an all-gather), every other collective once.

    For a model of Ψ parameters, counted in values (Ψ values are its gradients, 4Ψ bytes in
    fp32): DDP moves 2Ψ (one all-reduce); the ZeRO paper's stages 1 and 2 also 2Ψ (a
    reduce-scatter, then an all-gather of the updated parameters); ``ZeroRedundancyOptimizer``
    3Ψ (DDP's all-reduce, then a broadcast of each rank's updated parameters); ZeRO-3 3Ψ (an
    all-gather in forward and another in backward, a reduce-scatter).

    >>> traffic([Collective("all_reduce", 100), Collective("broadcast", 60), Collective("broadcast", 40)])
    300
    """
    return sum(c.nbytes * (2 if c.name == "all_reduce" else 1) for c in collectives)


class UnreadableTorch(RuntimeError):
    """:func:`watch` cannot count this torch's FSDP2 right, so it gives no numbers rather than wrong
    ones; course autograde leaves a test that raises it to the instructor, with this message."""


@dataclass
class Watched:
    """What :func:`watch` saw on this process: parameter bytes and every collective call."""

    shards: int  # parameter bytes held between steps: this rank's shards (the whole model if not sharded)
    peak: int = 0  # the most parameter bytes held at once: the shards plus everything gathered
    collectives: list = field(default_factory=list)  # a Collective per call, in order

    def count(self, name):
        """How many collectives of kind ``name`` (``"all_gather"``, ...) were called."""
        return sum(c.name == name for c in self.collectives)


class _Watch(TorchDispatchMode):
    """Runs above torch's ``CommDebugMode`` (``comm``), which tells collectives from other operations
    and counts them: records a :class:`Collective` for each call it counts and samples the gathered
    bytes after every operation."""

    def __init__(self, model, watched, comm):
        super().__init__()
        self.watched, self.comm = watched, comm
        # Where each sharded (DTensor) parameter is registered: FSDP registers the whole one there while gathered.
        self.slots = [(module, name) for module in model.modules()
                      for name, p in module.named_parameters(recurse=False) if is_dtensor(p)]
        # The most ranks a parameter is sharded over (an HSDP mesh also replicates it over others).
        self.ranks = max((math.prod(p.device_mesh.size(dim) for dim, placement in enumerate(p.placements)
                                    if placement.is_shard()) for p in (getattr(m, name) for m, name in self.slots)),
                         default=1)
        self.fsdp = any(_is_fsdp(m) for m in model.modules())
        self.sharded = [getattr(module, name) for module, name in self.slots]  # the DTensors registered now
        with torch.no_grad():  # a DTensor's local tensor, without a view for autograd
            self.shards = {_local(p).untyped_storage().data_ptr() for p in self.sharded}
        self.in_flight = []  # weak references to the outputs of all-gathers not yet copied out
        self.unsharded = False  # whether a parameter was seen registered in place of its shard

    def gathered(self):
        """Bytes of the parameters registered in place of the shards, and of the all-gathers in flight."""
        # Sampled after every operation: a slot still holding the DTensor it held at the start holds the
        # shard, so only the others are read (to_local() passes through both dispatch modes, every time).
        now = (getattr(module, name) for module, name in self.slots)
        with torch.no_grad():
            storages = {s.data_ptr(): s.nbytes() for s in (_local(p).untyped_storage()
                                                             for p, shard in zip(now, self.sharded) if p is not shard)
                        if s.data_ptr() not in self.shards}
        self.unsharded = self.unsharded or bool(storages)
        for t in (ref() for ref in self.in_flight):
            if t is not None:
                storage = t.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        dtensor = loaded_type("torch.distributed.tensor", "DTensor")
        if dtensor is not None and any(issubclass(t, dtensor) for t in types):
            return NotImplemented  # as CommDebugMode does: the DTensor's own operations come back here
        counted = self.comm.get_total_counts()
        out = func(*args, **(kwargs or {}))
        if self.comm.get_total_counts() > counted:
            call = _collective(func, args, out)
            self.watched.collectives.append(call)
            if call.name == "all_gather" and self.slots:
                self.in_flight += [weakref.ref(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        elif self.in_flight and not getattr(func, "is_view", True) and func.namespace not in _COMMUNICATION:
            # Read by an operation that is neither a view nor communication: copied into the parameters.
            read = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
            self.in_flight = [ref for ref in self.in_flight
                              if ref() is not None and ref().untyped_storage().data_ptr() not in read]
        if self.slots:
            self.watched.peak = max(self.watched.peak, self.watched.shards + self.gathered())
        return out

    def check(self):
        """Fail, naming this torch, if FSDP gathered parameters and no all-gather was counted, or the reverse."""
        if not self.fsdp or self.ranks == 1:
            return  # no FSDP, or nothing sharded over more than one rank: nothing it gathers
        gathers = self.watched.count("all_gather")
        if self.unsharded == bool(gathers):
            return
        seen = ("the model's parameters gathered whole, but CommDebugMode counted no all-gather" if self.unsharded
                else f"{gathers} all-gathers, but none of the model's sharded parameters replaced by a whole one")
        raise UnreadableTorch(
            f"memory.watch saw {seen}. A training step of an FSDP model shows both on torch {_TORCH_KNOWN}; "
            f"this is torch {torch.__version__}. Where FSDP2 or CommDebugMode work differently, the all-gathers and "
            f"peak bytes measured would be wrong, so none are given: watch a whole step, on torch {_TORCH_KNOWN}.")


@contextlib.contextmanager
def watch(model):
    """Record, while the block runs, the most parameter bytes this process holds for ``model``
    and every collective it calls, as a :class:`Watched`.

    Collectives are what torch's ``CommDebugMode`` counts (torch's c10d and functional
    collectives, whatever calls them: DDP, FSDP2, ``ZeroRedundancyOptimizer``, your own
    ``dist.all_reduce``). The parameter bytes are sampled after every operation (backward's
    included): the shards (``model``'s parameters as they are when the block starts, each
    storage once) plus what FSDP has gathered. That is, as ``fully_shard``'s documentation
    says, the whole parameters it registers on the modules in place of the sharded ones
    (freed when it reshards), and the output of each all-gather until it is copied into them
    (FSDP gathers the next block while the current one computes its backward, so that block's
    bytes are held before the module shows them): each group counted once. A model without
    sharded (DTensor) parameters holds its parameters, no more. If FSDP gathers parameters
    that ``CommDebugMode`` does not count, or the other way round, as another torch release
    could do, the block raises an error naming the torch version instead of a wrong number.
    ``CommDebugMode`` hooks every module's backward: in the block, changing a module's output
    in place (``out += y``, ``nn.ReLU(inplace=True)`` after a layer) raises an error.
    :func:`sharding_profile` runs it on ranks.

    >>> net = torch.nn.Linear(100, 10)
    >>> with watch(net) as seen:
    ...     net(torch.ones(2, 100)).sum().backward()
    >>> seen.shards, seen.peak, seen.collectives
    (4040, 4040, [])
    """
    from torch.distributed.tensor.debug import CommDebugMode  # it imports torch._dynamo: only when watching

    watched, comm = Watched(shards=tensor_bytes(model.parameters())), CommDebugMode()
    watching = _Watch(model, watched, comm)
    watched.peak = watched.shards + watching.gathered()
    with warnings.catch_warnings():
        # CommDebugMode hooks every module's backward, which hands each module's output on as a view: torch
        # warns of the hook where no input needs a gradient, and FSDP of the view.
        warnings.filterwarnings("ignore", "Full backward hook is firing")
        warnings.filterwarnings("ignore", "FSDP2-wrapped module .* returned a view tensor")
        with comm, watching:
            yield watched
    watching.check()


@dataclass
class ShardingProfile:
    """One rank's training step under a sharding, measured by :func:`sharding_profile`."""

    full: int  # bytes of the whole model's parameters, unsharded
    shards: int  # parameter bytes this rank holds between steps
    peak: int  # the most parameter bytes it held during the step
    all_gathers: int  # per step
    reduce_scatters: int  # per step
    traffic: int  # bytes the step's collectives moved, by :func:`traffic`
    fsdp_modules: list  # qualified names of the modules ``fully_shard`` made FSDP modules ("" is the root)
    difference: float = 0.0  # largest difference of the trained parameters from one process


def _data_slice(x, rank, world):
    per_rank = len(x) // world
    return x[rank * per_rank:(rank + 1) * per_rank]


def _train(model, x, steps, lr, watched=True):
    """``steps`` SGD steps on ``x`` (loss: the mean square of the output), the last one watched."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        with watch(model) if watched and step == steps - 1 else contextlib.nullcontext() as seen:
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
    return seen


def _sharded_rank(make_model, shard, x, steps, lr):
    from torch.distributed.device_mesh import init_device_mesh

    from .launch import init_distributed

    rank, world, device = init_distributed()
    model = make_model().to(device)
    full = tensor_bytes(model.parameters())
    model = shard(model, init_device_mesh(device.type, (world,))) or model
    seen = _train(model, _data_slice(x, rank, world).to(device), steps, lr)
    params = [p.full_tensor() if is_dtensor(p) else p for p in model.parameters()]
    return (ShardingProfile(full, seen.shards, seen.peak, seen.count("all_gather"), seen.count("reduce_scatter"),
                            traffic(seen.collectives),
                            [name for name, m in model.named_modules() if _is_fsdp(m)]),
            torch.cat([p.detach().flatten() for p in params]).cpu())


def sharding_profile(make_model, shard, x, *, ranks=2, steps=2, lr=0.1):
    """Train ``make_model()`` on ``ranks`` fresh ranks, sharded by ``shard(model, mesh)``, and
    measure its last step on each rank: a :class:`ShardingProfile` per rank.

    Each rank takes its equal slice of the batch ``x`` and takes ``steps`` SGD steps (the loss
    is the mean square of the output); ``shard`` returns the sharded model (or shards it in place and
    returns None). The parameters trained are compared with one process training the same
    model on the whole of ``x``: ``difference`` is the largest gap. ``make_model`` must build
    the same model at every call (seed it, as :mod:`grader.models` does), and it and ``shard``
    must reach the ranks: module-level functions, closures or ``functools.partial``.

    >>> import functools
    >>> from torch.distributed.fsdp import fully_shard
    >>> from grader.models import mlp
    >>> make = functools.partial(mlp, 8, 8, 8)    # 3 layers of 72 parameters, the same every time
    >>> root = lambda model, mesh: fully_shard(model, mesh=mesh)
    >>> p = sharding_profile(make, root, torch.randn(4, 8))[0]
    >>> p.full, p.shards, p.peak, p.all_gathers, p.reduce_scatters, p.fsdp_modules, p.difference < 1e-6
    (864, 432, 1296, 1, 1, [''], True)
    """
    from .launch import RankError, launch

    if len(x) % ranks:
        raise ValueError(f"a batch of {len(x)} does not split evenly over {ranks} ranks")
    model = make_model()
    _train(model, x, steps, lr, watched=False)
    alone = torch.cat([p.detach().flatten() for p in model.parameters()])
    try:
        profiles = launch(_sharded_rank, make_model, shard, x, steps, lr, nprocs=ranks, timeout=120, show_output=False)
    except RankError as e:
        if UnreadableTorch.__name__ not in str(e):
            raise
        raise UnreadableTorch(str(e).strip().splitlines()[-1].split(": ", 1)[-1]) from None
    results = []
    for profile, params in profiles:
        profile.difference = (params - alone).abs().max().item()
        results.append(profile)
    return results


@dataclass
class CudaPeak:
    """What CUDA's caching allocator held: ``before`` a block, and at most ``peak`` more during it."""

    before: int = 0
    peak: int = 0


def _warm_cublas(device):
    # Forward runs on this thread and backward on autograd's own: each gets a cuBLAS workspace.
    a = torch.ones(8, 8, device=device, requires_grad=True)
    (a @ a).sum().backward()


@contextlib.contextmanager
def cuda_peak(device):
    """The most bytes the CUDA allocator held during the block beyond what it held before, as a :class:`CudaPeak`.

    ``torch.cuda.max_memory_allocated`` also counts what was allocated before the block and
    cuBLAS's workspaces (several MiB per stream and thread, allocated by the first matmul on a
    device and kept for good), which for a small model is several times the model itself. A
    small matmul and its backward first put them in ``before``, so ``peak`` is what the block itself allocated at
    its peak: the tensors :func:`estimate` counts plus the allocator's temporaries.
    On a CPU there is no allocator to read: nothing is counted (``before`` and ``peak`` stay 0).

    >>> with cuda_peak(torch.device("cpu")) as held:
    ...     _ = torch.ones(1000)
    >>> held
    CudaPeak(before=0, peak=0)
    """
    if torch.device(device).type != "cuda":
        yield CudaPeak()
        return
    _warm_cublas(device)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    held = CudaPeak(before=torch.cuda.memory_allocated(device))
    yield held
    torch.cuda.synchronize(device)
    held.peak = torch.cuda.max_memory_allocated(device) - held.before
