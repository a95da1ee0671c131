"""Inference of the built-in actor-critic MLP in numpy: rollout workers without torch.

A worker that only samples needs its policy's forward pass, nothing of
autograd. ``import torch`` alone costs each process about 143 MB of private
memory and 1.5 s here (2-core VM), so the built-in MLP's inference runs in
numpy instead: a driver plus 2 PPO workers on CartPole then fits in less
memory, and each worker step skips torch's per-op dispatch
(``benchmarks/footprint.py``, ``benchmarks/sampling.py``).

``NumpyNet`` describes the network as offsets into the flat weight vector
that the learner broadcasts (``FlatWeights``, in ``parameters()`` order);
``models/numpy_export.py`` derives it in the driver from the torch model,
and returns None for what it does not cover (images, dict observations,
user models, action masks, ``MultiDiscrete`` and ``MultiBinary`` actions).
The results match the torch policy's to float32 rounding
(``tests/rl/test_numpy_policy.py``); sampling uses numpy's generator, so a
seed gives other (equally distributed) actions than the torch policy's.
This module imports no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from ...errors import ConfigError
from ..data.tree import Tree
from ..envs.spaces import env_actions
from ..policy import FlatWeights

__all__ = ["Dense", "NumpyActorCriticPolicy", "NumpyNet"]

Activation = Literal["tanh", "relu"] | None

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


@dataclass(frozen=True)
class Dense:
    """One dense layer: ``y = act(x @ W.T + b)``, with ``W`` (``outputs x inputs``) at
    ``weight`` and ``b`` at ``bias`` in the flat vector."""

    weight: int
    bias: int
    inputs: int
    outputs: int
    activation: Activation


@dataclass(frozen=True)
class NumpyNet:
    """The built-in actor-critic MLP: a shared ``torso`` (empty when the policy and value
    networks are separate), then the ``pi`` and ``vf`` layers; a Gaussian's state-independent
    log-stds at ``log_std``. ``size`` is the flat vector's length."""

    size: int
    obs_dim: int
    torso: tuple[Dense, ...]
    pi: tuple[Dense, ...]
    vf: tuple[Dense, ...]
    log_std: int | None = None


def _layers(vector: np.ndarray, layers: tuple[Dense, ...]) -> list[tuple[np.ndarray, np.ndarray, Activation]]:
    """Each layer's ``W.T`` and ``b`` as views of ``vector``: new weights copied into it are live."""
    out = []
    for d in layers:
        weight = vector[d.weight : d.weight + d.outputs * d.inputs].reshape(d.outputs, d.inputs)
        out.append((weight.T, vector[d.bias : d.bias + d.outputs], d.activation))
    return out


def _forward(x: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray, Activation]]) -> np.ndarray:
    for weight_t, bias, activation in layers:
        x = x @ weight_t
        x += bias
        if activation == "tanh":
            np.tanh(x, out=x)
        elif activation == "relu":
            np.maximum(x, 0.0, out=x)
    return x


class NumpyActorCriticPolicy:
    """A ``WorkerPolicy`` running a ``NumpyNet`` (``Discrete`` or ``Box`` actions).

    It takes the weights the learner broadcasts; it cannot learn (A3C's workers keep the
    torch policy). Its constructor is a ``PolicyFactory`` with ``net`` bound.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        net: NumpyNet,
        seed: int = 0,
        worker_index: int = 0,
    ) -> None:
        if not isinstance(action_space, gym.spaces.Discrete | gym.spaces.Box):
            raise ConfigError(f"NumpyActorCriticPolicy takes Discrete or Box actions, not {action_space}")
        self.action_space = action_space
        self.net = net
        self.rng = np.random.default_rng(seed)
        self.version = 0
        self.vector = np.zeros(net.size, np.float32)
        self._bind()

    def _bind(self) -> None:
        net, vector = self.net, self.vector
        self._torso, self._pi, self._vf = (_layers(vector, part) for part in (net.torso, net.pi, net.vf))
        if isinstance(self.action_space, gym.spaces.Box):
            assert net.log_std is not None
            self._shape = tuple(self.action_space.shape)
            dim = int(np.prod(self._shape))
            self._log_std = vector[net.log_std : net.log_std + dim]

    def __getstate__(self) -> dict[str, Any]:  # the views are rebuilt on unpickling
        return {k: v for k, v in vars(self).items() if k in ("action_space", "net", "rng", "version", "vector")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._bind()

    def _forward(self, obs: Tree) -> tuple[np.ndarray, np.ndarray]:
        """Distribution inputs (logits or means) and values of a batch."""
        x = np.asarray(obs, dtype=np.float32).reshape(len(obs), self.net.obs_dim)
        x = _forward(x, self._torso)
        return _forward(x, self._pi), _forward(x, self._vf).reshape(-1)

    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled actions for a batch, with their log-probabilities and state values."""
        out, values = self._forward(obs)
        n = len(out)
        if isinstance(self.action_space, gym.spaces.Discrete):
            # Inverse-CDF sampling on unnormalized probabilities; the ufuncs' own reduce and
            # accumulate skip the Python wrappers of .max/.sum/cumsum (8 rows: 26 us, 34 before).
            k = out.shape[1]
            out -= np.maximum.reduce(out, axis=1, keepdims=True)
            cdf = np.add.accumulate(np.exp(out), axis=1)
            total = cdf[:, -1:]
            u = self.rng.random((n, 1), dtype=np.float32)
            u *= total
            actions = np.add.reduce(cdf <= u, axis=1, dtype=np.int64)
            np.minimum(actions, k - 1, out=actions)
            logp = out.reshape(-1)[actions + np.arange(0, n * k, k)]
            logp -= np.log(total.reshape(-1))
            return actions, logp, values
        noise = self.rng.standard_normal(out.shape, dtype=np.float32)
        actions = out + np.exp(self._log_std) * noise
        log_prob = (-0.5 * noise**2 - self._log_std - _LOG_SQRT_2PI).sum(-1, dtype=np.float32)
        return actions.reshape(n, *self._shape), log_prob, values

    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """The most likely action (``Discrete``) or the mean (``Box``)."""
        out, _ = self._forward(obs)
        if isinstance(self.action_space, gym.spaces.Discrete):
            return out.argmax(-1)  # type: ignore[no-any-return]
        return out.reshape(len(out), *self._shape)

    def values(self, obs: Tree) -> np.ndarray:
        """State values."""
        return self._forward(obs)[1]

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Actions as ``env.step`` takes them (Gaussian samples clipped to the bounds)."""
        return env_actions(self.action_space, actions)

    def get_weights(self) -> FlatWeights:
        """The weights now held (a copy)."""
        return FlatWeights(self.vector.copy(), self.version)

    def set_weights(self, weights: FlatWeights) -> None:
        """Load the learner's flat vector (into the same memory: the layer views stay)."""
        if weights.vector.shape != self.vector.shape:
            raise ValueError(f"weights of {weights.vector.size} values for a network of {self.vector.size}")
        np.copyto(self.vector, weights.vector)
        self.version = weights.version
