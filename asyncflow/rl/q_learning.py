"""Q-learning parts for DQN and Ape-X: the epsilon-greedy policy a worker
runs, and the learner (double Q, n-step targets, importance weights from
prioritized replay, a target network). The Q network is any module that
honours ``QModel`` (the built-in dueling ``QNet`` by default)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ..errors import ConfigError
from .action_mask import MASK_KEY, has_action_mask, masked, random_valid_actions
from .device import resolve_device, to_numpy, to_tensors
from .models import ModelSpec, build_model
from .nets import polyak_update, seeded
from .optim import Adam, UpdateGuard
from .policy import FlatWeights, ReplayUpdate, flat_weights, load_flat_weights
from .precision import autocast, resolve_precision, to_float32
from .replay_buffer import WEIGHTS
from .sample_batch import ACTIONS, DISCOUNTS, NEXT_OBS, OBS, REWARDS, SampleBatch
from .tree import Tree, tree_len

__all__ = ["DQNLearner", "EpsilonGreedyPolicy", "apex_epsilon", "apex_policy", "linear_schedule"]


def linear_schedule(initial: float, final: float, steps: int, t: int) -> float:
    """``initial`` at ``t=0``, moving linearly to ``final`` at ``t=steps``, then flat."""
    if steps <= 0:
        return final
    return final + (initial - final) * max(0.0, 1.0 - t / steps)


def _check_discrete(action_space: gym.Space[Any]) -> tuple[int, int]:
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(f"Q-learning needs Discrete actions, not {action_space}")
    return int(action_space.n), int(action_space.start)


class EpsilonGreedyPolicy:
    """What a DQN worker runs: greedy in its Q network with probability ``1 - epsilon``.

    ``epsilon`` follows a linear schedule over the steps *this worker* has
    taken, or stays fixed (Ape-X gives each worker its own constant epsilon).
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        seed: int = 0,
        worker_index: int = 0,
        model: ModelSpec = None,
        hidden: Sequence[int] = (64, 64),
        dueling: bool = True,
        epsilon: tuple[float, float, int] | float = (1.0, 0.05, 10_000),
        device: str | torch.device = "cpu",
    ) -> None:
        n, self.start = _check_discrete(action_space)
        self.device = resolve_device(device) if isinstance(device, str) else device
        with seeded(seed):
            net = build_model(model, observation_space, action_space, "q", hidden=hidden, dueling=dueling)
        self.model = net.to(self.device)
        self.masked = has_action_mask(observation_space, action_space)
        self.num_actions = n
        self.epsilon_spec = epsilon
        self.steps = 0
        self.rng = np.random.default_rng(seed)
        self.version = 0

    @property
    def epsilon(self) -> float:
        if isinstance(self.epsilon_spec, tuple):
            return linear_schedule(*self.epsilon_spec, t=self.steps)
        return float(self.epsilon_spec)

    @torch.no_grad()
    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Epsilon-greedy actions (log-probs and values are zeros)."""
        n = tree_len(obs)
        actions = self.greedy_actions(obs)
        explore = self.rng.random(n) < self.epsilon
        if self.masked:  # explore among the valid actions
            actions[explore] = random_valid_actions(obs[MASK_KEY][explore], self.rng)
        else:
            actions[explore] = self.rng.integers(0, self.num_actions, int(explore.sum()))
        self.steps += n
        zeros = np.zeros(n, np.float32)
        return actions, zeros, zeros

    @torch.no_grad()
    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """The argmax of Q (over the valid actions, with an action mask)."""
        t = to_tensors(obs, self.device)
        q = self.model(t)
        return (masked(q, t) if self.masked else q).argmax(-1).cpu().numpy()  # type: ignore[no-any-return]

    def values(self, obs: Tree) -> np.ndarray:
        """Zeros: Q-learning workers need no state values."""
        return np.zeros(tree_len(obs), np.float32)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Actions shifted by the space's start."""
        return actions + self.start if self.start else actions

    def get_weights(self) -> FlatWeights:
        """The Q network's weights."""
        return flat_weights(self.model, self.version)

    def set_weights(self, weights: FlatWeights) -> None:
        """Load the learner's Q network weights."""
        load_flat_weights(self.model, weights.vector)
        self.version = weights.version


class DQNLearner:
    """Trains a Q network from replayed transitions.

    The target is ``r_n + discount * Q_target(s', argmax_a Q(s', a))`` with
    double Q (van Hasselt et al. 2016), or ``max_a Q_target(s', a)`` without.
    ``discount`` comes with the batch (``gamma**k`` for a k-step return, 0 at
    a termination). The Huber loss is weighted by the replay's importance
    weights; ``learn_on_batch`` returns the absolute TD errors for priorities.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        model: ModelSpec = None,
        hidden: Sequence[int] = (64, 64),
        dueling: bool = True,
        double_q: bool = True,
        lr: float = 5e-4,
        max_grad_norm: float | None = 10.0,
        tau: float = 1.0,
        seed: int = 0,
        device: str | torch.device = "cpu",
        max_nonfinite_updates: int = 10,
        precision: str = "float32",
    ) -> None:
        _check_discrete(action_space)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.autocast_dtype = resolve_precision(precision, self.device)
        """Forward passes in this dtype under autocast (None: float32); ``precision.py``."""
        with seeded(seed):
            net = build_model(model, observation_space, action_space, "q", hidden=hidden, dueling=dueling)
        self.model = net.to(self.device)
        self.target = copy.deepcopy(self.model).requires_grad_(False)
        self.masked = has_action_mask(observation_space, action_space)
        self.double_q = double_q
        self.optimizer = Adam(self.model.parameters(), lr=lr)
        self._params = list(self.model.parameters())
        self.guard = UpdateGuard(max_nonfinite_updates, type(self).__name__)
        self.max_grad_norm = max_grad_norm
        self.tau = tau
        self.version = 0
        self.target_updates = 0

    def _q(self, net: nn.Module, obs: Tree) -> torch.Tensor:
        """Q-values of ``net`` in float32, its forward pass in ``autocast_dtype``."""
        with autocast(self.device, self.autocast_dtype):
            return to_float32(net(obs))  # type: ignore[no-any-return]

    def learn_on_batch(self, batch: SampleBatch) -> ReplayUpdate | dict[str, float]:
        """One Huber-loss step on replayed transitions: its stats and TD errors (only the
        stats when the step was skipped, so that NaN TD errors never become priorities)."""
        t = to_tensors({k: batch[k] for k in (OBS, ACTIONS, REWARDS, NEXT_OBS, DISCOUNTS)}, self.device)
        obs, actions, rewards, next_obs, discounts = t[OBS], t[ACTIONS].long(), t[REWARDS], t[NEXT_OBS], t[DISCOUNTS]
        if WEIGHTS in batch:
            weights = torch.as_tensor(batch[WEIGHTS]).to(self.device)
        else:
            weights = torch.ones(len(batch), device=self.device)
        q = self._q(self.model, obs).gather(1, actions[:, None]).squeeze(1)
        with torch.no_grad():
            target_q = self._q(self.target, next_obs)
            if self.masked:  # the bootstrap's max runs over the actions valid in s'
                target_q = masked(target_q, next_obs)
            if self.double_q:
                online = self._q(self.model, next_obs)
                best = (masked(online, next_obs) if self.masked else online).argmax(-1, keepdim=True)
                next_q = target_q.gather(1, best).squeeze(1)
            else:
                next_q = target_q.max(-1).values
            targets = rewards + discounts * next_q
        td = q - targets
        loss = (weights * nn.functional.huber_loss(q, targets, reduction="none")).mean()
        self.optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        norm = self.guard.step(self.optimizer, loss, self._params, self.max_grad_norm)
        stats = {"skipped_updates": float(self.guard.skipped)}
        if norm is None:  # skipped: no priorities from NaN TD errors either
            return stats
        self.version += 1
        stats |= {
            "loss": float(loss.detach()),
            "mean_q": float(q.detach().mean()),
            "mean_td_error": float(td.detach().abs().mean()),
            "grad_norm": norm,
        }
        return ReplayUpdate(stats, to_numpy(td.abs()))

    def update_target(self) -> None:
        """Move the target network toward the online one (``tau=1``: copy it)."""
        polyak_update(self.target, self.model, self.tau)
        self.target_updates += 1

    def get_weights(self) -> FlatWeights:
        """The online network's weights, for the workers."""
        return flat_weights(self.model, self.version)

    def set_weights(self, weights: FlatWeights) -> None:
        """Load online network weights."""
        load_flat_weights(self.model, weights.vector)
        self.version = weights.version


def apex_epsilon(worker_index: int, num_workers: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's fixed per-worker epsilon (Horgan et al. 2018): ``base ** (1 + alpha * i / (N - 1))``
    for workers ``i = 0 .. N-1`` (``worker_index`` counts from 1)."""
    i = worker_index - 1
    return base ** (1 + alpha * i / (num_workers - 1)) if num_workers > 1 else base


def apex_policy(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    *,
    seed: int = 0,
    worker_index: int = 1,
    num_workers: int = 1,
    base: float = 0.4,
    alpha: float = 7.0,
    **kwargs: Any,
) -> EpsilonGreedyPolicy:
    """An epsilon-greedy policy with the worker's own constant Ape-X epsilon."""
    epsilon = apex_epsilon(worker_index, num_workers, base, alpha)
    return EpsilonGreedyPolicy(
        observation_space, action_space, seed=seed, worker_index=worker_index, epsilon=epsilon, **kwargs
    )
