"""Built-in encoders: observation tree in, one flat float feature vector per row out.

Picked from the observation space (``build_encoder``):

- ``Box`` vectors (and any non-image ``Box``, ``MultiBinary``): flattened, cast to float;
- images (``Box`` of rank 3, channels first or last, or rank-2 ``uint8``): a CNN.
  Frames of at least 36x36 get the Nature-DQN stack (Mnih et al. 2015: 32 8x8
  filters stride 4, 64 4x4 stride 2, 64 3x3 stride 1); smaller ones a stack
  of two 3x3 layers (16 filters, then 32 with stride 2). ``uint8`` frames are scaled to [0, 1] here,
  inside the model, on the learner's device: they travel as bytes until then;
- ``Discrete``: one-hot; ``MultiDiscrete``: one one-hot per component;
- ``Dict`` / ``Tuple``, nested: one encoder per leaf, features concatenated.

An encoder holds only convolutions; the dense layers that follow it (the
``hidden`` sizes) belong to the model, so an MLP policy on vectors is exactly
the MLP it was before encoders existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional

from ...errors import ConfigError
from ..envs.spaces import is_image
from .nets import orthogonal_

__all__ = ["CNNEncoder", "Encoder", "NATURE_FILTERS", "SMALL_FILTERS", "build_encoder", "channels_last_rows"]

NATURE_FILTERS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""(channels, kernel, stride) of the Nature-DQN convolutions; they need frames of at least 36x36."""
SMALL_FILTERS = ((16, 3, 1), (32, 3, 2))
"""For frames from 5x5 up to 35x35. A third stride-2 layer (16x16 -> 2x2) lost the positions
that a small game is about: PPO on the tests' 16x16 Catch was stuck at a return of 0.4 after
300k steps with it, and solved the game in 18k steps without it."""


CHANNELS_LAST_ROWS = 32
"""Batches of at least this many rows with gradients go through the CNN channels-last."""


class Encoder(nn.Module):
    """Maps a batch of observations to ``(B, out_dim)`` float features."""

    out_dim: int

    def training_layout(self, obs: Any) -> Any:
        """``obs`` (a whole training batch) laid out in memory as this encoder's training passes
        read it fastest; the same values. A learner calls it once per batch, before the minibatches."""
        return obs


def channels_last_rows(frames: torch.Tensor) -> torch.Tensor:
    """``(N, C, H, W)`` frames, the same values, stored channels-last (each row ``H, W, C``)."""
    return frames.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)


class Flatten(Encoder):
    def __init__(self, space: gym.Space[Any]) -> None:
        super().__init__()
        self.out_dim = int(np.prod(space.shape or (1,)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1).float()


class OneHot(Encoder):
    def __init__(self, space: gym.spaces.Discrete) -> None:
        super().__init__()
        self.n, self.start = int(space.n), int(space.start)
        self.out_dim = self.n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.one_hot(x.long().reshape(-1) - self.start, self.n).float()


class MultiOneHot(Encoder):
    def __init__(self, space: gym.spaces.MultiDiscrete) -> None:
        super().__init__()
        self.nvec = [int(n) for n in space.nvec.ravel()]
        self.start = [int(s) for s in np.asarray(space.start).ravel()]
        self.out_dim = sum(self.nvec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.long().reshape(x.shape[0], -1)
        parts = [
            functional.one_hot(flat[:, i] - s, n) for i, (n, s) in enumerate(zip(self.nvec, self.start, strict=True))
        ]
        return torch.cat(parts, -1).float()


def _image_layout(shape: Sequence[int]) -> tuple[bool, int, int, int]:
    """``(channels_last, C, H, W)``; a channel axis is the smaller end (first on a tie)."""
    if len(shape) == 2:
        return False, 1, int(shape[0]), int(shape[1])
    first, last = int(shape[0]), int(shape[-1])
    if last < first:
        return True, last, int(shape[0]), int(shape[1])
    return False, first, int(shape[1]), int(shape[2])


def _compute_dtype(device: torch.device) -> torch.dtype:
    """float32, or the autocast dtype where autocast is on for ``device``'s type."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return torch.float32


class CNNEncoder(Encoder):
    """Convolutions with ReLU, flattened; ``uint8`` input is scaled to [0, 1] first."""

    def __init__(self, space: gym.spaces.Box, filters: Sequence[Sequence[int]] | None = None) -> None:
        super().__init__()
        self.channels_last, in_channels, height, width = _image_layout(space.shape)
        self.rank = len(space.shape)
        self.scale = 1 / 255 if space.dtype == np.uint8 else 1.0
        if filters is None:
            filters = NATURE_FILTERS if min(height, width) >= 36 else SMALL_FILTERS
        layers: list[nn.Module] = []
        channels = in_channels
        for out_channels, kernel, stride in filters:
            conv = nn.Conv2d(channels, int(out_channels), int(kernel), int(stride))
            orthogonal_(conv.weight, float(np.sqrt(2)))
            nn.init.zeros_(conv.bias)  # type: ignore[arg-type]
            layers += [conv, nn.ReLU()]
            channels = int(out_channels)
        self.convs = nn.Sequential(*layers, nn.Flatten())
        try:
            with torch.no_grad():
                self.out_dim = int(self.convs(torch.zeros(1, in_channels, height, width)).shape[1])
        except RuntimeError as exc:
            sizes = tuple(tuple(int(v) for v in f) for f in filters)
            raise ConfigError(
                f"model: the CNN filters {sizes} do not fit {height}x{width} frames ({exc}); "
                "give ModelConfig(cnn_filters=...) that do"
            ) from None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.rank == 2:
            x = x.unsqueeze(1)
        elif self.channels_last:
            x = x.permute(0, 3, 1, 2)
        # Straight to the dtype the first convolution computes in (bfloat16 under the learner's
        # autocast): converting to float32 first, then autocast's cast, cost one more pass over the
        # frames, about 10 ms of a 90 ms bfloat16 step of 256 Atari frames on the dev CPU.
        dtype = _compute_dtype(x.device)
        x = x.to(dtype).mul_(self.scale) if x.dtype == torch.uint8 else x.to(dtype) * self.scale  # new: in place
        if torch.is_grad_enabled() and x.shape[0] >= CHANNELS_LAST_ROWS:
            # Training: channels-last convolutions (oneDNN's layout) took a Nature CNN step of 256 Atari
            # frames from 135 to 93 ms on the 2-core VM; a worker's few rows of inference run faster without.
            x = x.contiguous(memory_format=torch.channels_last)
        return self.convs(x)  # type: ignore[no-any-return]

    def training_layout(self, obs: Any) -> Any:
        """Channels-first frames go channels-last once per batch, so that ``forward``'s own
        ``contiguous`` finds them so. Per minibatch, that conversion of 256 bfloat16 Atari frames
        took 6-12 ms of a 90 ms step on the dev CPU; the bytes of a 1,024-frame batch take 25 ms once."""
        chw = self.rank == 3 and not self.channels_last
        if chw and isinstance(obs, torch.Tensor) and obs.dim() == 4 and obs.shape[0] >= CHANNELS_LAST_ROWS:
            return channels_last_rows(obs)
        return obs


class Concat(Encoder):
    """One encoder per entry of a ``Dict`` or ``Tuple`` observation, features side by side."""

    def __init__(self, parts: dict[str, Encoder] | list[Encoder]) -> None:
        super().__init__()
        items = list(parts.items()) if isinstance(parts, dict) else list(enumerate(parts))
        self.keys: list[str | int] = [k for k, _ in items]
        self.parts = nn.ModuleList(enc for _, enc in items)
        self.out_dim = sum(enc.out_dim for _, enc in items)

    def forward(self, obs: Any) -> torch.Tensor:
        return torch.cat([enc(obs[k]) for k, enc in zip(self.keys, self.parts, strict=True)], -1)

    def training_layout(self, obs: Any) -> Any:
        encoders = cast(list[Encoder], list(self.parts))
        laid = {k: enc.training_layout(obs[k]) for k, enc in zip(self.keys, encoders, strict=True)}
        if isinstance(obs, dict):
            return {**obs, **laid}
        return type(obs)(laid[i] for i in range(len(obs)))


def build_encoder(
    space: gym.Space[Any], *, kind: str = "auto", cnn_filters: Sequence[Sequence[int]] | None = None
) -> Encoder:
    """The encoder for ``space``: ``kind`` is ``"auto"`` (a CNN for images), ``"mlp"`` (flatten
    everything) or ``"cnn"`` (like auto, but the observation must hold an image)."""
    if kind == "cnn" and not any(is_image(s) for s in _leaves(space)):
        raise ConfigError(f"model: encoder='cnn' needs an image observation, not {space}")
    return _build(space, kind, cnn_filters)


def _leaves(space: gym.Space[Any]) -> list[gym.Space[Any]]:
    from ..envs.spaces import space_leaves

    return [leaf for _, leaf in space_leaves(space)]


def _build(space: gym.Space[Any], kind: str, cnn_filters: Sequence[Sequence[int]] | None) -> Encoder:
    if isinstance(space, gym.spaces.Dict):
        return Concat({k: _build(s, kind, cnn_filters) for k, s in space.spaces.items()})
    if isinstance(space, gym.spaces.Tuple):
        return Concat([_build(s, kind, cnn_filters) for s in space.spaces])
    if isinstance(space, gym.spaces.Discrete):
        return OneHot(space)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return MultiOneHot(space)
    if isinstance(space, gym.spaces.Box) and is_image(space) and kind != "mlp":
        return CNNEncoder(space, cnn_filters)
    if isinstance(space, gym.spaces.Box | gym.spaces.MultiBinary):
        return Flatten(space)
    raise ConfigError(f"model: no built-in encoder for {space}; pass model= a torch module that takes it")
