"""The built-in models, one per family, each an encoder (``encoders.py``) plus MLPs.

- ``ActorCriticNet``: distribution inputs and a value. On vector observations
  it is two separate tanh MLPs (policy and value), as before encoders existed;
  on images one shared torso (Nature DQN: convolutions, then 512 ReLU units).
- ``QNet``: Q values, with a dueling head (Wang et al. 2016) if asked.
- ``ContinuousNet``: an ``actor`` (Gaussian parameters or a deterministic
  pre-tanh action) and a ``critic`` with ``num_q`` Q heads on (features, action).

Each honours its family's protocol in ``protocols.py``; a user's module is a
drop-in replacement for any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ...errors import ConfigError
from ..envs.spaces import is_image, space_leaves
from .config import ACTIVATIONS, ModelConfig
from .distributions import ActionHead
from .encoders import build_encoder
from .nets import MLP, mlp

__all__ = ["ActorCriticNet", "ContinuousNet", "MLPActor", "MLPCritic", "QNet", "has_image"]

SQRT2 = float(np.sqrt(2))
DEFAULT = ModelConfig()
IMAGE_HIDDEN = (512,)


def has_image(space: gym.Space[Any]) -> bool:
    """Whether any leaf of ``space`` is an image."""
    return any(is_image(leaf) for _, leaf in space_leaves(space))


def _hidden(config: ModelConfig, space: gym.Space[Any], default: Sequence[int]) -> tuple[int, ...]:
    if config.hidden is not None:
        return config.hidden
    return IMAGE_HIDDEN if has_image(space) and config.encoder != "mlp" else tuple(default)


def _torso(sizes: Sequence[int], activation: type[nn.Module]) -> nn.Module:
    """Dense layers with an activation after each, including the last."""
    if len(sizes) < 2:
        return nn.Identity()
    return MLP(mlp(sizes, activation, SQRT2), activation())


class ActorCriticNet(nn.Module):
    """``forward(obs) -> (distribution inputs (B, k), values (B,))``.

    For a ``Box`` action space the log-stds are one learned vector, the same
    for every observation (PPO's usual choice), appended to the means; with
    ``sde`` (generalized state-dependent exploration, Raffin et al. 2022) they
    are the state's: the policy's last hidden features ``latent(s)`` (detached)
    and a learned ``(features, d)`` matrix of log-stds give the variance
    ``latent(s)^2 @ exp(log_std)^2`` (+1e-6), as Stable-Baselines3's gSDE for
    PPO and A2C. The workers then draw the noise ``latent(s) @ W`` with a matrix
    ``W ~ N(0, exp(log_std)^2)`` they keep for a number of steps
    (``ActorCriticPolicy``); ``with_latent`` gives them the features.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: ModelConfig = DEFAULT,
        hidden: Sequence[int] = (64, 64),
        sde: bool = False,
        log_std_init: float = 0.0,
    ) -> None:
        super().__init__()
        image = has_image(observation_space) and config.encoder != "mlp"
        sizes = _hidden(config, observation_space, hidden)
        activation = ACTIVATIONS[config.activation or ("relu" if image else "tanh")]
        self.encoder = build_encoder(observation_space, kind=config.encoder, cnn_filters=config.cnn_filters)
        head = ActionHead(action_space)
        self.gaussian = isinstance(action_space, gym.spaces.Box)
        self.sde = sde
        if sde and not self.gaussian:
            raise ConfigError(f"use_sde: gSDE explores in Box action spaces, not {action_space}")
        if sde and not sizes:
            raise ConfigError("use_sde: gSDE needs at least one hidden layer (its features draw the noise)")
        out = head.action_dim if self.gaussian else head.num_inputs
        self.shared = image if config.shared is None else config.shared
        features = self.encoder.out_dim
        if self.gaussian and not sde:
            self.log_std = nn.Parameter(torch.full((out,), float(log_std_init)))
        if self.shared:
            self.torso = _torso([features, *sizes], activation)
            last = sizes[-1] if sizes else features
            self.pi = mlp([last, out], activation, 0.01)
            self.vf = mlp([last, 1], activation, 1.0)
        elif sde:  # the policy's hidden layers apart from its mean layer: their features draw the noise
            self.pi_torso = _torso([features, *sizes], activation)
            self.pi = mlp([sizes[-1], out], activation, 0.01)
            self.vf = mlp([features, *sizes, 1], activation, 1.0)
        else:
            self.pi = mlp([features, *sizes, out], activation, 0.01)
            self.vf = mlp([features, *sizes, 1], activation, 1.0)
        if sde:
            self.log_std = nn.Parameter(torch.full((sizes[-1], out), float(log_std_init)))

    def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if self.sde:
            inputs, values, _ = self.with_latent(obs)
            return inputs, values
        x = self.encoder(obs)
        if self.shared:
            x = self.torso(x)
        out = self.pi(x)
        if self.gaussian:
            out = torch.cat([out, self.log_std.expand_as(out)], -1)
        return out, self.vf(x).squeeze(-1)

    def with_latent(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """gSDE's forward (``sde``): ``(distribution inputs, values, (B, features) detached
        latent features)``, the variance the features' square times ``exp(log_std)^2``."""
        x = self.encoder(obs)
        if self.shared:
            x = latent = self.torso(x)
        else:
            latent = self.pi_torso(x)
        mean = self.pi(latent)
        features = latent.detach()
        variance = features.pow(2) @ self.log_std.exp().pow(2)
        return torch.cat([mean, 0.5 * (variance + 1e-6).log()], -1), self.vf(x).squeeze(-1), features

    def training_layout(self, obs: Any) -> Any:
        """``obs`` (a training batch) in the memory layout its encoder reads fastest (``encoders.py``)."""
        return self.encoder.training_layout(obs)


class QNet(nn.Module):
    """``forward(obs) -> Q values (B, n)``: a ReLU torso, then a plain or dueling head
    (``Q = V + A - mean(A)``)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.spaces.Discrete,
        config: ModelConfig = DEFAULT,
        hidden: Sequence[int] = (64, 64),
        dueling: bool = True,
    ) -> None:
        super().__init__()
        sizes = _hidden(config, observation_space, hidden)
        activation = ACTIVATIONS[config.activation or "relu"]
        self.encoder = build_encoder(observation_space, kind=config.encoder, cnn_filters=config.cnn_filters)
        self.torso = _torso([self.encoder.out_dim, *sizes], activation)
        last = sizes[-1] if sizes else self.encoder.out_dim
        self.advantage = mlp([last, int(action_space.n)], out_gain=0.01)
        self.state_value = mlp([last, 1], out_gain=1.0) if dueling else None

    def forward(self, obs: Any) -> torch.Tensor:
        h = self.torso(self.encoder(obs))
        a = self.advantage(h)
        if self.state_value is None:
            return a  # type: ignore[no-any-return]
        return self.state_value(h) + a - a.mean(-1, keepdim=True)  # type: ignore[no-any-return]


class MLPActor(nn.Module):
    """``forward(obs) -> (B, out)``: the observation's encoder, then dense layers."""

    def __init__(self, space: gym.Space[Any], config: ModelConfig, sizes: Sequence[int], out: int) -> None:
        super().__init__()
        activation = ACTIVATIONS[config.activation or "relu"]
        self.encoder = build_encoder(space, kind=config.encoder, cnn_filters=config.cnn_filters)
        self.net = mlp([self.encoder.out_dim, *sizes, out], activation, 0.01)

    def forward(self, obs: Any) -> torch.Tensor:
        return self.net(self.encoder(obs))  # type: ignore[no-any-return]


class SDEActor(nn.Module):
    """A Gaussian actor for generalized state-dependent exploration (gSDE; Raffin et al. 2022).

    The noise is a function of the state: ``latent(s) @ W``, ``latent`` the last hidden layer's
    features (detached: the noise does not train them) and ``W`` a ``(features, d)`` matrix drawn
    from ``N(0, exp(log_std)^2)``, which the workers keep for a number of steps, so that the
    exploration is smooth in time and in the state. Given the state, the action is Gaussian with
    variance ``latent(s)^2 @ exp(log_std)^2`` (+1e-6). ``forward`` keeps the continuous protocol
    (``(B, 2d)``: the mean, clipped to [-2, 2] as Stable-Baselines3's, and the log of that std);
    ``with_latent`` adds the features that draw the noise."""

    def __init__(
        self, space: gym.Space[Any], config: ModelConfig, sizes: Sequence[int], act_dim: int, log_std_init: float
    ) -> None:
        super().__init__()
        if not sizes:
            raise ValueError("gSDE needs at least one hidden layer (its features draw the noise)")
        activation = ACTIVATIONS[config.activation or "relu"]
        self.encoder = build_encoder(space, kind=config.encoder, cnn_filters=config.cnn_filters)
        self.torso = _torso([self.encoder.out_dim, *sizes], activation)
        self.mean = mlp([sizes[-1], act_dim], out_gain=0.01)
        self.log_std = nn.Parameter(torch.full((sizes[-1], act_dim), float(log_std_init)))

    def with_latent(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``((B, 2d) means and log-stds, (B, features) detached latent features)``."""
        latent = self.torso(self.encoder(obs))
        mean = self.mean(latent).clamp(-2.0, 2.0)
        features = latent.detach()
        variance = features.pow(2) @ self.log_std.exp().pow(2)
        return torch.cat([mean, 0.5 * (variance + 1e-6).log()], -1), features

    def forward(self, obs: Any) -> torch.Tensor:
        return self.with_latent(obs)[0]


class MLPCritic(nn.Module):
    """``forward(obs, actions) -> (B, num_q)``: each Q head reads the encoded observation and
    the flattened actions side by side."""

    def __init__(
        self, space: gym.Space[Any], config: ModelConfig, sizes: Sequence[int], act_dim: int, num_q: int
    ) -> None:
        super().__init__()
        activation = ACTIVATIONS[config.activation or "relu"]
        self.encoder = build_encoder(space, kind=config.encoder, cnn_filters=config.cnn_filters)
        width = self.encoder.out_dim + act_dim
        self.heads = nn.ModuleList(mlp([width, *sizes, 1], activation, 1.0) for _ in range(num_q))

    def forward(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.encoder(obs), actions.reshape(actions.shape[0], -1)], -1)
        return torch.cat([q(x) for q in self.heads], -1)


class ContinuousNet(nn.Module):
    """``actor(obs)``: ``(B, 2d)`` Gaussian means and log-stds (``gaussian=True``, SAC) or
    ``(B, d)`` pre-tanh actions (DDPG, TD3); ``critic(obs, actions) -> (B, num_q)``.

    Actions are in the normalized ``[-1, 1]^d``; the algorithm maps them to the env's bounds.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.spaces.Box,
        config: ModelConfig = DEFAULT,
        hidden: Sequence[int] = (256, 256),
        gaussian: bool = True,
        num_q: int = 2,
        sde: bool = False,
        log_std_init: float = -3.0,
    ) -> None:
        super().__init__()
        sizes = _hidden(config, observation_space, hidden)
        act_dim = int(np.prod(action_space.shape))
        self.actor: nn.Module
        if sde:
            self.actor = SDEActor(observation_space, config, sizes, act_dim, log_std_init)
        else:
            self.actor = MLPActor(observation_space, config, sizes, 2 * act_dim if gaussian else act_dim)
        self.critic = MLPCritic(observation_space, config, sizes, act_dim, num_q)
