"""``ModelConfig``: the knobs of the built-in models, and ``ModelSpec``, what ``config.model`` takes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeAlias

import gymnasium as gym
from torch import nn

from ..._fields import Fields, config_class, field
from ...errors import ConfigError

__all__ = ["ModelConfig", "ModelFactory", "ModelSpec", "custom_model", "model_spec"]

ENCODERS = ("auto", "mlp", "cnn")
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


@config_class
class ModelConfig(Fields):
    """The model: the built-in one for a space (an encoder picked from the observation space,
    dense layers, and the heads an algorithm family needs), shaped by the fields below, or
    a model of your own (``custom``); an LSTM core behind the encoder (``use_lstm``).

    ::

        PPOConfig(env="MyPixels-v0", model=ModelConfig(encoder="cnn", hidden=(512,)))
        PPOConfig(model=MyNet)  # the same as model=ModelConfig(custom=MyNet)
    """

    field_prefix = "model."

    custom: Any = None
    """A torch module class, or a factory ``(observation_space, action_space) -> nn.Module``,
    that honours the algorithm's protocol (``asyncflow.rl.models``); None: the built-in model.
    In a config file ``"module:name"``, which names code to import and call."""
    encoder: str = "auto"
    """``"auto"``: a CNN for image leaves, flatten / one-hot for the rest; ``"mlp"``: flatten
    images too; ``"cnn"``: like auto, but the observation must hold an image."""
    hidden: tuple[int, ...] | None = None
    """Dense layers after the encoder. None: the algorithm's own for vector observations
    (``vector_hidden``: 64x64 for the actor-critic algorithms, 128x128 for DQN, SAC and TD3),
    ``(512,)`` (Nature DQN) when the observation holds an image."""
    activation: str | None = None
    """``"tanh"`` or ``"relu"``. None: tanh for actor-critic MLPs on vectors, relu otherwise."""
    shared: bool | None = None
    """Actor-critic only: one torso for policy and value. None: shared when the observation
    holds an image, two separate MLPs otherwise."""
    cnn_filters: tuple[tuple[int, int, int], ...] | None = None
    """(channels, kernel, stride) per convolution. None: Nature DQN's for frames of at least
    36x36, three 3x3 layers for smaller ones."""
    use_lstm: bool = False
    """An LSTM core behind the observation encoder (PG, A2C, A3C, PPO, IMPALA, APPO): workers carry
    each env's state, batches carry sequences of ``max_seq_len`` steps, the learner replays them."""
    lstm_size: int = field(default=64, min=1)
    """Units of the LSTM core."""
    max_seq_len: int = field(default=16, min=1)
    """Steps per training sequence; the rollout fragment length must be a multiple of it."""

    def __post_init__(self) -> None:
        if self.custom is not None:
            object.__setattr__(self, "custom", _factory(self.custom, "model.custom"))
        super().__post_init__()
        if self.encoder not in ENCODERS:
            raise ConfigError(f"model.encoder: expected one of {ENCODERS}, got {self.encoder!r}")
        if self.activation is not None and self.activation not in ACTIVATIONS:
            raise ConfigError(f"model.activation: expected 'tanh' or 'relu', got {self.activation!r}")
        if self.cnn_filters is not None:
            filters = self.cnn_filters
            if not filters or not all(len(f) == 3 and all(v >= 1 for v in f) for f in filters):
                raise ConfigError(
                    f"model.cnn_filters: expected (channels, kernel, stride) triples of ints >= 1, got {filters}"
                )
        if self.use_lstm and self.custom is not None:
            raise ConfigError("model.use_lstm: the LSTM core is built in; it does not take a model of your own")

    @classmethod
    def coerce(cls, value: Any) -> ModelConfig:
        """What a ``model`` field takes: None, a mapping of these fields, a model class or
        factory, or (from a config file) ``"module:name"``."""
        spec = model_spec(value)
        if spec is None:
            return cls()
        return spec if isinstance(spec, ModelConfig) else cls(custom=spec)


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
    return _factory(value, field)


def _factory(value: Any, field: str) -> ModelFactory:
    """A model class or factory, imported from ``"module:name"``, or a ConfigError."""
    if isinstance(value, str):
        from ..envs.make import import_attribute

        value = import_attribute(value, field)
    if callable(value) and not isinstance(value, ModelConfig):
        return value  # type: ignore[no-any-return]
    raise ConfigError(
        f"{field}: expected a ModelConfig, a torch module class or a factory (observation_space, action_space), "
        f"not {type(value).__name__} {value!r}"
    )


def custom_model(spec: ModelSpec) -> ModelFactory | None:
    """The user's model class or factory in ``spec`` (None: the built-in model)."""
    if spec is None:
        return None
    return spec.custom if isinstance(spec, ModelConfig) else spec
