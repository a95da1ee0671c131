"""Learner precision: float32, or bfloat16 mixed precision where the hardware has it.

``learner_precision`` takes ``"float32"`` (the default), ``"bfloat16"`` or
``"auto"``. With bfloat16 the learner's forward passes run under
``torch.autocast``: convolutions and matrix products compute in bfloat16,
while the weights, the gradients, the optimizer's moments and the loss
arithmetic (the model's outputs are cast back to float32 before any
distribution or TD target sees them) stay float32. This is the
"bf16-mixed" of other trainers, not a bfloat16 model.

It pays where the chip computes bfloat16 natively: a CUDA GPU of compute
capability 8.0 or later, or a CPU with AMX or AVX512-BF16 (Intel Sapphire
Rapids and later, AMD Zen 4 and later), where oneDNN ran PPO's Atari batch
of Nature CNN steps 1.36-2.06x as fast as float32 on the dev VM over three
runs (``benchmarks/learner_precision.py``). ``"auto"``
picks bfloat16 there and float32 elsewhere; ``"bfloat16"`` on a CPU without
it still runs, emulated and slower.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ...errors import ConfigError
from ..data.tree import Tree, tree_map

__all__ = ["PRECISIONS", "autocast", "check_precision", "native_bfloat16", "resolve_precision", "to_float32"]

PRECISIONS = ("float32", "bfloat16", "auto")


def check_precision(name: str, field: str = "learner_precision") -> None:
    """ConfigError unless ``name`` is one of ``PRECISIONS``."""
    if name not in PRECISIONS:
        raise ConfigError(f"{field}: must be one of {', '.join(map(repr, PRECISIONS))}, got {name!r}")


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 matrix products in hardware."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    if device.type == "cpu":
        return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    return False


def resolve_precision(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype ``name`` means on ``device``: ``torch.bfloat16``, or None for float32."""
    check_precision(name)
    if name == "auto":
        return torch.bfloat16 if native_bfloat16(device) else None
    if name == "bfloat16" and device.type == "mps":
        raise ConfigError("learner_precision: 'bfloat16' is not supported on mps (use 'float32' or 'auto')")
    return torch.bfloat16 if name == "bfloat16" else None


@contextlib.contextmanager
def autocast(device: torch.device, dtype: torch.dtype | None) -> Iterator[None]:
    """Forward passes under ``torch.autocast`` in ``dtype``; nothing changes for None."""
    if dtype is None:
        yield
        return
    with torch.autocast(device.type, dtype=dtype):
        yield


_HALF = (torch.bfloat16, torch.float16)


def to_float32(outputs: Tree) -> Tree:
    """A model's half-precision outputs (under autocast) as float32; anything else as it is."""

    def cast(x: Any) -> Any:
        return x.float() if isinstance(x, torch.Tensor) and x.dtype in _HALF else x

    return tree_map(cast, outputs)
