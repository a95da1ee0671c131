"""``ModelConfig``: the knobs of the built-in models, and ``ModelSpec``, what ``config.model`` takes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeAlias

import gymnasium as gym
from torch import nn

from ...errors import ConfigError

__all__ = ["ModelConfig", "ModelSpec", "model_spec"]

ENCODERS = ("auto", "mlp", "cnn")
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


@dataclass(frozen=True)
class ModelConfig:
    """The built-in model for a space: an encoder picked from the observation
    space, dense layers, and the heads an algorithm family needs.

    ::

        PPOConfig(env="MyPixels-v0", model=ModelConfig(encoder="cnn", hidden=(512,)))
    """

    encoder: str = "auto"
    """``"auto"``: a CNN for image leaves, flatten / one-hot for the rest; ``"mlp"``: flatten
    images too; ``"cnn"``: like auto, but the observation must hold an image."""
    hidden: tuple[int, ...] | None = None
    """Dense layers after the encoder. None: the algorithm's ``hidden`` for vector observations,
    ``(512,)`` (Nature DQN) when the observation holds an image."""
    activation: str | None = None
    """``"tanh"`` or ``"relu"``. None: tanh for actor-critic MLPs on vectors, relu otherwise."""
    shared: bool | None = None
    """Actor-critic only: one torso for policy and value. None: shared when the observation
    holds an image, two separate MLPs otherwise."""
    cnn_filters: tuple[tuple[int, int, int], ...] | None = None
    """(channels, kernel, stride) per convolution. None: Nature DQN's for frames of at least
    36x36, three 3x3 layers for smaller ones."""

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ConfigError(f"model.encoder: expected one of {ENCODERS}, got {self.encoder!r}")
        if self.activation is not None and self.activation not in ACTIVATIONS:
            raise ConfigError(f"model.activation: expected 'tanh' or 'relu', got {self.activation!r}")
        if self.hidden is not None:
            hidden = tuple(self.hidden)
            if not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden):
                raise ConfigError(f"model.hidden: layer sizes must be ints >= 1, got {self.hidden}")
            object.__setattr__(self, "hidden", hidden)
        if self.cnn_filters is not None:
            filters = tuple(tuple(f) for f in self.cnn_filters)
            if not filters or not all(
                len(f) == 3 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in f)
                for f in filters
            ):
                raise ConfigError(
                    "model.cnn_filters: expected (channels, kernel, stride) triples of ints >= 1, "
                    f"got {self.cnn_filters}"
                )
            object.__setattr__(self, "cnn_filters", filters)


ModelFactory: TypeAlias = Callable[[gym.Space[Any], gym.Space[Any]], nn.Module]
"""A module class or a function ``(observation_space, action_space) -> nn.Module``."""

ModelSpec: TypeAlias = ModelConfig | ModelFactory | None
"""What ``config.model`` takes; None is ``ModelConfig()``."""


def model_spec(value: Any, field: str = "model") -> ModelSpec:
    """Check (and, from a config file, convert) a ``model`` field.

    A mapping becomes a ``ModelConfig``; a ``"module:name"`` string names a
    module class or factory to import.
    """
    if value is None or isinstance(value, ModelConfig):
        return value
    if isinstance(value, Mapping):
        known = {f.name for f in fields(ModelConfig)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(f"{field}: unknown ModelConfig field(s) {unknown}; known: {sorted(known)}")
        return ModelConfig(**value)
    if isinstance(value, str):
        from ..env import import_attribute

        value = import_attribute(value, field)
    if callable(value):
        return value  # type: ignore[no-any-return]
    raise ConfigError(
        f"{field}: expected a ModelConfig, a torch module class or a factory (observation_space, action_space), "
        f"not {type(value).__name__} {value!r}"
    )
