"""Small models the lessons train, written out plainly."""

import torch
from torch import nn


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
