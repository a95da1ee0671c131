"""``RandomPolicy``: uniform random actions from any action space, no network.

A ``WorkerPolicy`` for baselines and for measuring what sampling costs
without inference (``benchmarks/sampling.py``). Its actions are seeded from
the worker's seed; it has no weights (``get_weights`` is an empty vector).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ..data.tree import Tree, tree_len
from ..policy import FlatWeights

__all__ = ["RandomPolicy", "uniform_logp"]


def uniform_logp(space: gym.Space[Any]) -> float:
    """The log-probability (or log-density) of each action under the uniform distribution over
    ``space``; NaN where it has none (an unbounded ``Box``, a ``Text``...)."""
    if isinstance(space, gym.spaces.Discrete):
        return -float(np.log(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return -float(np.log(space.nvec).sum())
    if isinstance(space, gym.spaces.MultiBinary):
        return -float(np.prod(space.shape) * np.log(2))
    if isinstance(space, gym.spaces.Box) and space.is_bounded():
        return -float(np.log(np.asarray(space.high, np.float64) - space.low).sum())
    if isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        parts = space.spaces.values() if isinstance(space, gym.spaces.Dict) else space.spaces
        return float(sum(uniform_logp(s) for s in parts))
    return float("nan")


class RandomPolicy:
    """Uniform random actions, with their log-probabilities (``uniform_logp``); values are zeros."""

    def __init__(
        self, observation_space: gym.Space[Any], action_space: gym.Space[Any], *, seed: int = 0, worker_index: int = 0
    ) -> None:
        self.action_space = action_space
        self.logp = np.float32(uniform_logp(action_space))
        action_space.seed(seed)

    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One random action per row."""
        n = tree_len(obs)
        actions = np.stack([np.asarray(self.action_space.sample()) for _ in range(n)])
        return actions, np.full(n, self.logp, np.float32), np.zeros(n, np.float32)

    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """Random too: there is nothing to be greedy about."""
        return self.compute_actions(obs)[0]

    def values(self, obs: Tree) -> np.ndarray:
        """Zeros."""
        return np.zeros(tree_len(obs), np.float32)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """The actions as sampled (they are already in the space)."""
        return actions

    def get_weights(self) -> FlatWeights:
        """No weights: an empty vector."""
        return FlatWeights(np.zeros(0, np.float32), 0)

    def set_weights(self, weights: FlatWeights) -> None:
        """Nothing to load."""
