"""Torch policies: an MLP actor-critic with categorical or diagonal-Gaussian actions.

``TorchPolicy`` is what both a rollout worker (inference, A3C gradients) and
a learner (training) hold. Losses are plain functions supplied by each
algorithm module, so this file knows no algorithm.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ..errors import ConfigError
from .nets import mlp
from .optim import Adam
from .sample_batch import SampleBatch

__all__ = ["ActorCritic", "FlatWeights", "LossFn", "TorchPolicy", "actor_critic_policy", "check_spaces"]

LossFn = Callable[["ActorCritic", Mapping[str, torch.Tensor], Any], tuple[torch.Tensor, dict[str, float]]]


@dataclass(frozen=True)
class FlatWeights:
    """All parameters in one float32 vector: serialized once per broadcast,
    travelling out of band as a single buffer."""

    vector: np.ndarray
    version: int


def _as_tensors(batch: SampleBatch) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v) for k, v in batch.items()}


def check_spaces(observation_space: gym.Space[Any], action_space: gym.Space[Any], field: str = "env") -> None:
    """Raise ConfigError for spaces the MLP policies cannot handle."""
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
        raise ConfigError(f"{field}: observations must be a 1-D Box, not {observation_space}")
    if isinstance(action_space, gym.spaces.Discrete):
        return
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return
    raise ConfigError(f"{field}: actions must be Discrete or a 1-D Box, not {action_space}")


class ActorCritic(nn.Module):
    """Separate policy and value MLPs (the usual choice for small control tasks)."""

    def __init__(self, obs_dim: int, action_space: gym.Space[Any], hidden: Sequence[int]) -> None:
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if self.discrete:
            out = int(action_space.n)  # type: ignore[attr-defined]
        else:
            out = int(action_space.shape[0])  # type: ignore[index]
            self.log_std = nn.Parameter(torch.zeros(out))
        self.pi = mlp([obs_dim, *hidden, out], nn.Tanh, 0.01)
        self.vf = mlp([obs_dim, *hidden, 1], nn.Tanh, 1.0)

    def dist(self, obs: torch.Tensor) -> torch.distributions.Distribution:
        """The action distribution for a batch of observations."""
        out = self.pi(obs)
        if self.discrete:
            return torch.distributions.Categorical(logits=out)
        return torch.distributions.Independent(torch.distributions.Normal(out, self.log_std.exp()), 1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values for a batch of observations."""
        return self.vf(obs).squeeze(-1)  # type: ignore[no-any-return]


class TorchPolicy:
    """An actor-critic MLP with inference (batched actions, values) and learning
    (minibatch SGD on a loss function, gradients, flat weights)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        hidden: Sequence[int] = (64, 64),
        lr: float = 3e-4,
        max_grad_norm: float | None = 0.5,
        loss: LossFn | None = None,
        loss_config: Any = None,
        seed: int = 0,
    ) -> None:
        check_spaces(observation_space, action_space)
        torch.manual_seed(seed)
        self.action_space = action_space
        self.model = ActorCritic(int(observation_space.shape[0]), action_space, hidden)  # type: ignore[index]
        self.lr = lr
        self._optimizer: Adam | None = None
        self.max_grad_norm = max_grad_norm
        self.loss = loss
        self.loss_config = loss_config
        self.version = 0
        self._generator = torch.Generator().manual_seed(seed)
        if isinstance(action_space, gym.spaces.Box):
            self._low, self._high = action_space.low, action_space.high

    @property
    def optimizer(self) -> Adam:
        """Built on first use: a sampling-only worker never needs one."""
        if self._optimizer is None:
            self._optimizer = Adam(self.model.parameters(), lr=self.lr, eps=1e-5)
        return self._optimizer

    # -- inference -------------------------------------------------------

    @torch.no_grad()
    def compute_actions(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample actions for a batch of observations: (actions, log-probs, values)."""
        x = torch.as_tensor(obs, dtype=torch.float32)
        dist = self.model.dist(x)
        if self.model.discrete:
            probs = dist.probs  # type: ignore[attr-defined]
            actions = torch.multinomial(probs, 1, generator=self._generator).squeeze(-1)
        else:
            base = dist.base_dist  # type: ignore[attr-defined]
            noise = torch.randn(base.loc.shape, generator=self._generator)
            actions = base.loc + base.scale * noise
        return actions.numpy(), dist.log_prob(actions).numpy(), self.model.value(x).numpy()

    @torch.no_grad()
    def greedy_actions(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions: the most likely (discrete) or the mean (continuous)."""
        dist = self.model.dist(torch.as_tensor(obs, dtype=torch.float32))
        if self.model.discrete:
            return dist.probs.argmax(-1).numpy()  # type: ignore[attr-defined,no-any-return]
        return dist.base_dist.loc.numpy()  # type: ignore[attr-defined,no-any-return]

    @torch.no_grad()
    def values(self, obs: np.ndarray) -> np.ndarray:
        """State values (numpy in, numpy out)."""
        return self.model.value(torch.as_tensor(obs, dtype=torch.float32)).numpy()  # type: ignore[no-any-return]

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Actions as the environment takes them (Gaussian samples clipped to bounds)."""
        if self.model.discrete:
            return actions
        return np.clip(actions, self._low, self._high)  # type: ignore[no-any-return]

    # -- learning --------------------------------------------------------

    def _loss(self, tensors: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        if self.loss is None:
            raise RuntimeError("this policy was built without a loss function")
        return self.loss(self.model, tensors, self.loss_config)

    def _clip(self) -> float:
        """Clip the global gradient norm (if configured); return the norm before clipping."""
        if self.max_grad_norm is None:
            return 0.0
        return float(nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm))

    def _step(self) -> float:
        norm = self._clip()
        self.optimizer.step()
        self.version += 1
        return norm

    def learn_on_batch(
        self,
        batch: SampleBatch,
        num_epochs: int = 1,
        minibatch_size: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
    ) -> dict[str, float]:
        """Epochs of shuffled minibatch SGD; returns the mean of the loss stats.

        The batch becomes tensors once; minibatches are index views of them
        (the shuffle is ``SampleBatch.minibatches``'s, with the same seed).
        ``shuffle=False`` keeps rows in order (losses over sequences, V-trace).
        """
        rng = np.random.default_rng(seed)
        tensors = _as_tensors(batch)
        n = len(batch)
        size = minibatch_size or n
        totals: dict[str, float] = {}
        steps = 0
        for _ in range(num_epochs):
            order = torch.from_numpy(rng.permutation(n) if shuffle else np.arange(n))
            for start in range(0, n, size):
                index = order[start : start + size]
                loss, stats = self._loss({k: t[index] for k, t in tensors.items()})
                self.optimizer.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                stats["grad_norm"] = self._step()
                for k, v in stats.items():
                    totals[k] = totals.get(k, 0.0) + v
                steps += 1
        return {k: v / max(steps, 1) for k, v in totals.items()}

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], dict[str, float]]:
        """Gradients of the loss on ``batch`` (numpy arrays, one per parameter) and the loss stats."""
        loss, stats = self._loss(_as_tensors(batch))
        self.model.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        stats["grad_norm"] = self._clip()
        grads = [
            (p.grad if p.grad is not None else torch.zeros_like(p)).numpy().copy() for p in self.model.parameters()
        ]
        return grads, stats

    def apply_gradients(self, grads: Sequence[np.ndarray]) -> None:
        """One optimizer step with the given gradients."""
        for p, g in zip(self.model.parameters(), grads, strict=True):
            p.grad = torch.as_tensor(g)
        self.optimizer.step()
        self.version += 1

    # -- weights ---------------------------------------------------------

    def get_weights(self) -> FlatWeights:
        """All parameters as one flat vector, with the update count as version."""
        vector = nn.utils.parameters_to_vector(self.model.parameters()).detach().numpy().copy()
        return FlatWeights(vector, self.version)

    def set_weights(self, weights: FlatWeights) -> None:
        """Load a flat weight vector."""
        nn.utils.vector_to_parameters(torch.as_tensor(weights.vector), self.model.parameters())
        self.version = weights.version


def actor_critic_policy(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    *,
    seed: int = 0,
    worker_index: int = 0,
    hidden: Sequence[int] = (64, 64),
) -> TorchPolicy:
    """A sampling-only actor-critic policy (a ``PolicySpec`` factory)."""
    return TorchPolicy(observation_space, action_space, hidden=hidden, seed=seed)
