"""The epsilon-greedy policy the workers of DQN and Ape-X run (Ape-X's with a fixed
epsilon per worker). The Q network is any module that honours ``QModel`` (the built-in
dueling ``QNet`` by default); the learner, with its loss, lives in ``algorithms/dqn.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ...errors import ConfigError
from ..data.tree import Tree, tree_len
from ..envs.action_mask import MASK_KEY, has_action_mask, masked, random_valid_actions
from ..learners.device import resolve_device, to_tensors
from ..models import ModelSpec, build_model
from ..models.nets import seeded
from ..policy import ModelWeights

__all__ = [
    "EpsilonGreedyPolicy",
    "EpsilonSpec",
    "apex_epsilon",
    "apex_policy",
    "check_discrete",
    "epsilon_at",
    "linear_schedule",
]


def linear_schedule(initial: float, final: float, steps: int, t: int) -> float:
    """``initial`` at ``t=0``, moving linearly to ``final`` at ``t=steps``, then flat."""
    if steps <= 0:
        return final
    return final + (initial - final) * max(0.0, 1.0 - t / steps)


EpsilonSpec = tuple[float, float, int] | float
"""A linear schedule ``(initial, final, steps)`` over a worker's steps, or a fixed epsilon."""


def epsilon_at(spec: EpsilonSpec, steps: int) -> float:
    """The epsilon ``spec`` gives after ``steps`` of a worker."""
    if isinstance(spec, tuple):
        return linear_schedule(*spec, t=steps)
    return float(spec)


def check_discrete(action_space: gym.Space[Any]) -> tuple[int, int]:
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(f"Q-learning needs Discrete actions, not {action_space}")
    return int(action_space.n), int(action_space.start)


class EpsilonGreedyPolicy(ModelWeights):
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
        epsilon: EpsilonSpec = (1.0, 0.05, 10_000),
        device: str | torch.device = "cpu",
    ) -> None:
        n, self.start = check_discrete(action_space)
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
        return epsilon_at(self.epsilon_spec, self.steps)

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
