"""Capturing and restoring the state of learners and workers, for checkpoints.

``get_state(obj)`` walks an object's attributes and keeps what training
changes: torch modules (their ``state_dict``), our Adam and RMSprop optimizers, loose
tensors (SAC's temperature), torch and numpy random generators, and plain
numbers. ``set_state`` puts them back into an object built the same way.
Configs, loss functions and spaces are not state: the restored object gets
them from its constructor.

This module imports torch only where torch is loaded already: a process that
never imported it holds no tensor, so a rollout worker that runs its policy
in numpy (``numpy_policy.py``) captures its state without loading torch.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import numpy as np

__all__ = ["get_state", "set_state"]

_PLAIN = (int, float, bool, str, type(None))


def get_state(obj: Any) -> dict[str, tuple[str, Any]]:
    """The training state of ``obj``'s attributes (copies, safe to keep)."""
    custom = getattr(obj, "get_state", None)
    if callable(custom):
        return {"__custom__": ("custom", custom())}
    state: dict[str, tuple[str, Any]] = {}
    with_torch = "torch" in sys.modules
    for name, value in vars(obj).items():
        if with_torch and (captured := _torch_state(value)) is not None:
            state[name] = captured
        elif isinstance(value, np.random.Generator):
            state[name] = ("numpy_rng", copy.deepcopy(value.bit_generator.state))
        elif isinstance(value, _PLAIN):
            state[name] = ("value", value)
    return state


def _torch_state(value: Any) -> tuple[str, Any] | None:
    """A torch module's, optimizer's, tensor's or generator's state, or None for anything else."""
    import torch
    from torch import nn

    from ..learners.optim import FlatOptimizer

    if isinstance(value, nn.Module):
        return "module", _to_cpu(value.state_dict())
    if isinstance(value, FlatOptimizer):  # Adam or RMSprop: the same state ("adam" for old checkpoints)
        return "adam", _to_cpu(value.state_dict())
    if isinstance(value, torch.Tensor):
        return "tensor", _to_cpu(value)
    if isinstance(value, torch.Generator):
        return "torch_rng", value.get_state()
    return None


def _to_cpu(value: Any) -> Any:
    """Copies of the tensors in a (nested) state dict, on the CPU: a checkpoint taken on a GPU loads anywhere."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(v) for v in value)
    return copy.deepcopy(value)


def set_state(obj: Any, state: dict[str, tuple[str, Any]]) -> None:
    """Load what ``get_state`` captured into ``obj``."""
    if "__custom__" in state:
        obj.set_state(state["__custom__"][1])
        return
    for name, (kind, value) in state.items():
        current: Any = getattr(obj, name, None)
        if current is None and kind == "adam":  # built on first use (ActorCriticPolicy.optimizer)
            current = getattr(obj, name.lstrip("_"))
        if kind == "module" or kind == "adam":
            current.load_state_dict(value)
        elif kind == "tensor":
            import torch  # loaded: the object holds a tensor

            with torch.no_grad():
                current.copy_(value)
        elif kind == "torch_rng":
            current.set_state(value)
        elif kind == "numpy_rng":
            current.bit_generator.state = value
        else:
            setattr(obj, name, value)
