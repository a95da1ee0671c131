"""Small torch helpers shared by the models and learners: MLPs and target updates.

``MLP`` is an ``nn.Sequential`` whose ``forward`` calls each layer's op itself
(``F.linear``, ``torch.tanh``, ``torch.relu``): the same kernels in the same
order, so the same bits, without the per-module call machinery. That machinery
cost ~8 us per module here: the built-in 64x64 actor-critic's forward at batch
32 took 245 us through its 13 modules and takes 157 us this way (2-core VM).
A layer with hooks, or of another kind, is called as usual.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["MLP", "mlp", "one_torch_thread", "orthogonal_", "polyak_update", "seeded"]

_OPS: dict[type[nn.Module], Callable[[torch.Tensor], torch.Tensor]] = {nn.Tanh: torch.tanh, nn.ReLU: torch.relu}


class MLP(nn.Sequential):
    """``nn.Sequential`` of dense layers and activations, called op by op (module docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self:
            if layer._forward_hooks or layer._forward_pre_hooks:
                x = layer(x)
            elif type(layer) is nn.Linear:
                x = F.linear(x, layer.weight, layer.bias)
            else:
                op = _OPS.get(type(layer))
                x = op(x) if op is not None else layer(x)
        return x


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch ops on one thread in this block, then the count as it was. Where it is used no
    learner step runs yet (and the learner thread sets its own count before each step,
    ``flow/train.py``).

    For the small ops a driver runs before training (the model's orthogonal init, the
    config check's forward pass): the first multi-threaded op of a process starts
    torch's thread team, and at start-up the other core is busy with the fork servers'
    imports. A 64x64 orthogonal init then waited 107 ms for its second thread and a
    2-row ``linear`` 15 ms, against 0.4 ms on one thread; the twelve inits of the
    CartPole actor-critic took 86-116 ms against 2.5 ms (2-core VM, 2026-12-04)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Torch's global generator seeded with ``seed`` inside the block, and put back as it was
    after it: a network built here gets the same weights for the same seed, and the process's
    own randomness (an application that embeds asyncflow) is left as it was. Only the CPU
    generator: networks are built on the CPU, then moved."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def orthogonal_(weight: torch.Tensor, gain: float) -> None:
    """``nn.init.orthogonal_`` on one torch thread (``one_torch_thread``)."""
    with one_torch_thread():
        nn.init.orthogonal_(weight, gain)


def mlp(sizes: Sequence[int], activation: type[nn.Module] = nn.ReLU, out_gain: float = 1.0) -> MLP:
    """Linear layers with orthogonal init (gain sqrt(2) inside, ``out_gain`` last), zero biases."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        linear = nn.Linear(a, b)
        last = i == len(sizes) - 2
        orthogonal_(linear.weight, out_gain if last else float(np.sqrt(2)))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(activation())
    return MLP(*layers)


@torch.no_grad()
def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """``target <- tau * source + (1 - tau) * target`` (``tau=1``: a hard copy)."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.lerp_(s, tau)
