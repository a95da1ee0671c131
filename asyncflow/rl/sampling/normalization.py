"""Observation and reward normalization (``normalize_observations``, ``normalize_rewards``).

As Stable-Baselines3's ``VecNormalize`` does: observations become
``clip((obs - mean) / sqrt(var + eps), -clip, clip)``, and rewards are divided by the
standard deviation of the discounted return (no mean taken off). Running statistics:

- Each worker counts what its envs produce (``WorkerNormalizer``): every raw observation,
  and every step's discounted return, once.
- The driver merges what the workers counted into the global statistics
  (``RunningStats.merge``: the same numbers as one pass over all of it) and sends those back
  with the weights (``WorkerSet.broadcast``); workers normalize with the global statistics.
- Checkpoints keep the global statistics; evaluation, ``asyncflow evaluate`` and export use
  them frozen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import ConfigError

__all__ = ["NormalizeObservation", "NormalizerState", "RunningStats", "WorkerNormalizer", "check_normalizable"]

EPS = 1e-8


class RunningStats:
    """Count, mean and variance of a stream of arrays of one shape; mergeable."""

    def __init__(self, shape: tuple[int, ...] = ()) -> None:
        self.count = 0.0
        self.mean = np.zeros(shape, np.float64)
        self.m2 = np.zeros(shape, np.float64)  # sum of squared deviations

    @property
    def var(self) -> np.ndarray:
        return self.m2 / self.count if self.count else np.ones_like(self.mean)

    def update(self, x: np.ndarray) -> None:
        """Add a batch of samples (the first axis)."""
        x = np.asarray(x, np.float64)
        if len(x):
            other = RunningStats(self.mean.shape)
            other.count, other.mean = float(len(x)), x.mean(axis=0)
            other.m2 = ((x - other.mean) ** 2).sum(axis=0)
            self.merge(other)

    def merge(self, other: RunningStats) -> None:
        """Add everything ``other`` counted (Chan, Golub and LeVeque's pairwise update)."""
        if not other.count:
            return
        total = self.count + other.count
        delta = other.mean - self.mean
        self.mean = self.mean + delta * (other.count / total)
        self.m2 = self.m2 + other.m2 + delta**2 * (self.count * other.count / total)
        self.count = total

    def copy(self) -> RunningStats:
        out = RunningStats(self.mean.shape)
        out.count, out.mean, out.m2 = self.count, self.mean.copy(), self.m2.copy()
        return out


@dataclass
class NormalizerState:
    """The global statistics that workers normalize with (None: that part is off)."""

    obs: RunningStats | None
    ret: RunningStats | None
    clip: float

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """Observations as the policy sees them, in their own dtype."""
        if self.obs is None:
            return obs
        scaled = (np.asarray(obs, np.float64) - self.obs.mean) * (1.0 / np.sqrt(self.obs.var + EPS))
        return np.clip(scaled, -self.clip, self.clip).astype(np.asarray(obs).dtype, copy=False)

    def scale_rewards(self, rewards: np.ndarray) -> np.ndarray:
        if self.ret is None:
            return rewards
        scaled = rewards / np.sqrt(self.ret.var + EPS)
        return np.clip(scaled, -self.clip, self.clip).astype(rewards.dtype, copy=False)

    def merge(self, delta: NormalizerState) -> None:
        """Add what one worker counted since its last sync."""
        for mine, theirs in ((self.obs, delta.obs), (self.ret, delta.ret)):
            if mine is not None and theirs is not None:
                mine.merge(theirs)

    def copy(self) -> NormalizerState:
        return NormalizerState(self.obs.copy() if self.obs else None, self.ret.copy() if self.ret else None, self.clip)

    @classmethod
    def empty(cls, obs_shape: tuple[int, ...] | None, rewards: bool, clip: float) -> NormalizerState:
        return cls(RunningStats(obs_shape) if obs_shape is not None else None, RunningStats() if rewards else None,
                   clip)  # fmt: skip


class WorkerNormalizer:
    """A worker's side: normalizes with the global state, counts what its envs produce."""

    def __init__(self, state: NormalizerState, num_envs: int, gamma: float) -> None:
        self.state = state
        self.pending_obs: list[np.ndarray] = []  # raw observations since the last sync
        self.pending = NormalizerState.empty(None, state.ret is not None, state.clip)
        self.returns = np.zeros(num_envs, np.float64)  # each env's discounted return so far
        self.gamma = gamma

    def observation(self, obs: np.ndarray) -> np.ndarray:
        self.pending_obs.append(np.asarray(obs))
        return self.state.normalize(obs)

    def rewards(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """Scale a ``(steps, envs)`` block of raw rewards; count the discounted returns."""
        if self.state.ret is None:
            return rewards
        seen = np.empty(rewards.shape, np.float64)
        for t in range(len(rewards)):
            self.returns = self.returns * self.gamma + rewards[t]
            seen[t] = self.returns
            self.returns[dones[t]] = 0.0
        assert self.pending.ret is not None
        self.pending.ret.update(seen.reshape(-1))
        return self.state.scale_rewards(rewards)

    def restore(self, saved: WorkerNormalizer) -> None:
        """Take a checkpoint's counts (the global statistics, and what was counted since the
        last sync); each env's discounted return starts at 0, with a new episode."""
        self.state, self.pending, self.pending_obs = saved.state, saved.pending, list(saved.pending_obs)
        self.returns = np.zeros_like(self.returns)

    def sync(self, state: NormalizerState) -> NormalizerState:
        """Take the new global state; return what was counted since the last sync."""
        delta = self.pending
        if self.state.obs is not None:
            delta.obs = RunningStats(self.state.obs.mean.shape)
            if self.pending_obs:
                delta.obs.update(np.stack(self.pending_obs))
        self.pending_obs = []
        self.pending = NormalizerState.empty(None, self.state.ret is not None, self.state.clip)
        self.state = state
        return delta


class NormalizeObservation(gym.ObservationWrapper[Any, Any, Any]):
    """An env whose observations go through a worker's normalizer (counted there once)."""

    def __init__(self, env: gym.Env[Any, Any], normalizer: WorkerNormalizer | NormalizerState) -> None:
        super().__init__(env)
        self.normalizer = normalizer

    def observation(self, observation: Any) -> Any:
        if isinstance(self.normalizer, NormalizerState):  # frozen: evaluation
            return self.normalizer.normalize(observation)
        return self.normalizer.observation(observation)


def check_normalizable(space: gym.Space[Any]) -> tuple[int, ...]:
    """The shape to keep statistics of, or a ``ConfigError`` for a space that has none."""
    if not isinstance(space, gym.spaces.Box) or not np.issubdtype(space.dtype, np.floating):
        raise ConfigError(f"normalize_observations: needs a float Box observation space, not {space}")
    return tuple(space.shape)
