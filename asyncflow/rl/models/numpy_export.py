"""The built-in actor-critic MLP as a ``NumpyNet``, for workers that infer without torch.

``numpy_net(model, observation_space, action_space)`` reads an
``ActorCriticNet`` in the driver and returns where each layer's weights lie
in the flat vector (``flat_weights``' order, ``parameters()``), or None when
the network is anything it cannot run exactly: a user's module, an image or
``Dict`` encoder, a layer other than dense, tanh and ReLU, a layer with
hooks, or actions other than ``Discrete`` and ``Box``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from torch import nn

from ..policies.numpy_policy import Activation, Dense, NumpyNet
from .builtin import ActorCriticNet
from .encoders import Flatten
from .nets import MLP

__all__ = ["numpy_net"]

_ACTIVATIONS: dict[type[nn.Module], Activation] = {nn.Tanh: "tanh", nn.ReLU: "relu"}


def numpy_net(model: nn.Module, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> NumpyNet | None:
    """``model`` as a ``NumpyNet``, or None when numpy cannot run it exactly (module docstring)."""
    if type(model) is not ActorCriticNet or type(model.encoder) is not Flatten or model.sde:
        return None  # gSDE's noise comes from features numpy does not keep
    if not isinstance(observation_space, gym.spaces.Box) or not isinstance(
        action_space, gym.spaces.Discrete | gym.spaces.Box
    ):
        return None
    offsets: dict[str, int] = {}
    at = 0
    for name, p in model.named_parameters():
        offsets[name] = at
        at += p.numel()
    parts = []
    for prefix in ("torso", "pi", "vf"):
        layers: list[Dense] = []
        part = getattr(model, prefix, None)
        if part is not None and not _dense(part, prefix, offsets, layers):
            return None
        parts.append(tuple(layers))
    torso, pi, vf = parts
    log_std = offsets.get("log_std") if model.gaussian else None
    return NumpyNet(at, model.encoder.out_dim, torso, pi, vf, log_std)


def _dense(part: nn.Module, prefix: str, offsets: dict[str, int], layers: list[Dense]) -> bool:
    """Append the dense layers of ``part`` (``Linear`` and activations, in ``Sequential`` and
    ``MLP`` containers, nested) to ``layers``; False if it holds anything else."""
    if part._forward_hooks or part._forward_pre_hooks:
        return False
    if type(part) is nn.Identity:
        return True
    if type(part) is nn.Linear and part.bias is not None:
        layers.append(Dense(offsets[f"{prefix}.weight"], offsets[f"{prefix}.bias"],
                            part.in_features, part.out_features, None))  # fmt: skip
        return True
    if type(part) in _ACTIVATIONS and layers and layers[-1].activation is None:
        d = layers[-1]
        layers[-1] = Dense(d.weight, d.bias, d.inputs, d.outputs, _ACTIVATIONS[type(part)])
        return True
    if type(part) in (nn.Sequential, MLP):
        return all(_dense(child, f"{prefix}.{name}", offsets, layers) for name, child in part.named_children())
    return False
