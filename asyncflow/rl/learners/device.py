"""Devices: where the learner runs, and moving observation trees there.

``learner_device`` takes ``"auto"`` (CUDA, then Apple's MPS, then the CPU),
``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``; a device this machine does
not have is a ``ConfigError`` before any process starts. Workers run their
inference on the CPU. Weights always travel as one flat CPU ``float32``
vector, whatever device they were trained on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...errors import ConfigError
from ..data.tree import Tree, tree_map

__all__ = ["resolve_device", "to_numpy", "to_tensors"]


def resolve_device(name: str, field: str = "learner_device") -> torch.device:
    """The torch device ``name`` means on this machine; ConfigError if it has none such."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"{field}: {name!r} is not a device (use auto, cpu, cuda, cuda:N or mps)") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{field}: {name!r} asked for, but torch sees no CUDA device here "
                              "(use 'cpu' or 'auto')")  # fmt: skip
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"{field}: {name!r}, but this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif device.type == "mps":
        if not _mps_available():
            raise ConfigError(f"{field}: 'mps' asked for, but torch sees no MPS device here")
    elif device.type != "cpu":
        raise ConfigError(f"{field}: {name!r} is not supported (use auto, cpu, cuda, cuda:N or mps)")
    return device


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def to_tensors(tree: Tree, device: torch.device) -> Tree:
    """Numpy leaves as tensors on ``device``, in their own dtype (object arrays stay numpy)."""

    def convert(x: Any) -> Any:
        if isinstance(x, np.ndarray) and x.dtype == object:
            return x
        t = torch.as_tensor(x)  # a view of a strided step of a worker's buffer is made contiguous
        t = t if t.is_contiguous() else t.contiguous()
        return t if device.type == "cpu" else t.to(device, non_blocking=True)

    return tree_map(convert, tree)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A CPU numpy array that owns its data (a copy, from any device)."""
    t = t.detach()
    if t.device.type == "cpu":
        return t.numpy().copy()
    return t.cpu().numpy()
