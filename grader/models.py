"""Small models the lessons train, written out plainly, and the one-process reference they are compared with."""

import functools
import math
import sys

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def loaded_type(module, name):
    """The class ``name`` of ``module`` if something has imported that module, else None.

    For an ``isinstance`` on torch's sharding classes without importing them (a second's import
    for every kernel and rank): until their module is imported, no object can be one.

    >>> loaded_type("math", "pi") is not None, loaded_type("no_such_module_here", "X")
    (True, None)
    """
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def is_dtensor(t):
    """Whether ``t`` is a DTensor (a sharded tensor), without importing torch.distributed.tensor.

    >>> is_dtensor(torch.ones(2))
    False
    """
    dtensor = loaded_type("torch.distributed.tensor", "DTensor")
    return dtensor is not None and isinstance(t, dtensor)


def mlp(in_features=512, hidden=1024, classes=10, seed=0):
    """A three-layer MLP (about 1.6 M parameters at the defaults), the same on every rank.

    >>> sum(p.numel() for p in mlp().parameters())
    1585162
    """
    torch.manual_seed(seed)  # identical start everywhere, like DDP's initial broadcast
    return nn.Sequential(
        nn.Linear(in_features, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, classes),
    )


def synthetic_batch(batch, in_features=512, classes=10, seed=0):
    """Random inputs and labels, made in code so nothing is downloaded.

    >>> x, y = synthetic_batch(4)
    >>> tuple(x.shape), tuple(y.shape)
    ((4, 512), (4,))
    """
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, in_features, generator=g), torch.randint(0, classes, (batch,), generator=g)


def teacher_task(samples, in_features=16, classes=4, seed=0):
    """Inputs and the labels a fixed random linear "teacher" gives them: a task with something
    to learn (unlike :func:`synthetic_batch`'s random labels), which a small MLP learns in seconds.
    Every call with the same ``seed`` has the same teacher; split one call into training and
    validation rows.

    >>> x, y = teacher_task(1000)
    >>> tuple(x.shape), sorted(set(y.tolist()))
    ((1000, 16), [0, 1, 2, 3])
    """
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(in_features, classes, generator=g)
    x = torch.randn(samples, in_features, generator=g)
    return x, (x @ teacher).argmax(dim=1)


def one_vector(tensors):
    """A model's parameters (or any tensors) in one detached CPU vector; FSDP's shards are gathered whole.

    What the distributed challenges return from each rank, to compare with one process.

    >>> one_vector(mlp(in_features=4, hidden=8, classes=2)).shape
    torch.Size([130])
    >>> one_vector([torch.ones(2, 2), torch.zeros(1)])
    tensor([1., 1., 1., 1., 0.])
    """
    if isinstance(tensors, nn.Module):
        tensors = tensors.parameters()
    return torch.cat([(t.full_tensor() if is_dtensor(t) else t).detach().flatten().cpu() for t in tensors])


def train_one_process(steps, batch, optimizer, fresh_batches=False):
    """The reference for the distributed training challenges: ``mlp(in_features=16, hidden=32)``
    trained ``steps`` steps in one process on the whole ``synthetic_batch(batch, in_features=16)``
    (a new one each step, seeded by the step, with ``fresh_batches``); returns :func:`one_vector` parameters.

    ``optimizer`` makes the optimizer from the parameters.

    >>> sgd = functools.partial(torch.optim.SGD, lr=0.1)
    >>> train_one_process(2, 8, sgd).shape
    torch.Size([1930])
    """
    model = mlp(in_features=16, hidden=32)
    opt = optimizer(model.parameters())
    for step in range(steps):
        x, y = synthetic_batch(batch, in_features=16, seed=step if fresh_batches else 0)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return one_vector(model)


class Block(nn.Module):
    """One transformer block in nanoGPT's shape: causal self-attention, then a 4x MLP, each
    after a LayerNorm and added back to the residual stream. Attention is written out, so the
    ``heads x seq x seq`` attention matrix is a real tensor (what fused kernels avoid storing).
    """

    def __init__(self, hidden, heads, seq):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} does not split into {heads} heads")
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc, self.out = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.register_buffer("future", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)

    def attention(self, x):
        b, s, h = x.shape
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in self.qkv(x).split(h, dim=2))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.heads)
        att = scores.masked_fill(self.future[:s, :s], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, s, h))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


class Blocks(nn.Sequential):
    """A stack of :class:`Block`; with ``checkpointing`` on, each block keeps only its input
    and recomputes the rest during backward (activation checkpointing)."""

    checkpointing = False

    def forward(self, x):
        for block in self:
            # The re-entrant form saves the block's input through autograd, where it can be counted.
            x = checkpoint(block, x, use_reentrant=True) if self.checkpointing else block(x)
        return x


def transformer(hidden=64, heads=4, seq=64, layers=2, checkpointing=False, seed=0):
    """``layers`` transformer blocks (12 h² + 13 h parameters each), the same on every rank.

    >>> net = transformer(hidden=64, layers=2)
    >>> sum(p.numel() for p in net.parameters()), tuple(net(torch.ones(3, 10, 64)).shape)
    (99968, (3, 10, 64))
    """
    torch.manual_seed(seed)
    net = Blocks(*[Block(hidden, heads, seq) for _ in range(layers)])
    net.checkpointing = checkpointing
    return net
