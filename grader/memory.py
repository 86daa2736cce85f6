"""Where the bytes of training go, measured from real tensors and predicted by formula.

Training holds four kinds of bytes on each device: parameters, gradients, optimizer state
(Adam keeps two moments per parameter) and activations (what the forward pass saves for
the backward pass). :func:`state_bytes` and :func:`saved_activations` measure them;
:func:`per_rank` predicts the first three for a device of a sharded, pipelined job.
"""

import contextlib
from dataclasses import dataclass

import torch
from torch.distributed.tensor import DTensor

# Bytes per parameter of each model state, for Adam: fp32 keeps everything in 4-byte floats;
# mixed precision keeps 2-byte parameters and gradients plus an fp32 master copy and moments.
ADAM = {"fp32": {"parameters": 4, "gradients": 4, "optimizer": 8},
        "mixed": {"parameters": 2, "gradients": 2, "optimizer": 12}}


def _local(t):
    return t.to_local() if isinstance(t, DTensor) else t


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
    params = {_local(p).untyped_storage().data_ptr() for p in model.parameters()}
    tally, counts = Saved(), {}

    def pack(t):
        if t.untyped_storage().data_ptr() in params:
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
