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

__all__ = ["RandomPolicy"]


class RandomPolicy:
    """Uniform random actions; log-probabilities and values are zeros."""

    def __init__(
        self, observation_space: gym.Space[Any], action_space: gym.Space[Any], *, seed: int = 0, worker_index: int = 0
    ) -> None:
        self.action_space = action_space
        action_space.seed(seed)

    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One random action per row."""
        n = tree_len(obs)
        actions = np.stack([np.asarray(self.action_space.sample()) for _ in range(n)])
        zeros = np.zeros(n, np.float32)
        return actions, zeros, zeros

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
