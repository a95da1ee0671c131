"""``VectorLanes``: one gymnasium vector env, one ``step`` call for every lane (``lanes.Lanes``).

The vector env is built from the id's own vectorized implementation
(``gym.make_vec(..., vectorization_mode="vector_entry_point")``; CartPole-v1's
is numpy over all lanes). Such envs reset a finished lane on the *next* step,
which ignores that lane's action and returns its first observation with
reward 0 (gymnasium's ``NEXT_STEP`` autoreset). That step belongs to no
episode: it is recorded as ``done`` (so GAE and n-step returns stop at the
real end before it) and marked ``unstepped``, so the worker drops it from the
batch, which so has up to one row fewer per finished episode.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ..data.sample_batch import BatchMetrics
from ..envs.checks import EnvChecker
from ..envs.make import EnvSpec, make_vector_env
from .lanes import StepRow

__all__ = ["VectorLanes"]


class VectorLanes:
    """``num_lanes`` lanes of one gymnasium vector env made from ``spec``."""

    def __init__(self, spec: EnvSpec, num_lanes: int, *, worker_index: int, check_env_output: bool) -> None:
        self.num_lanes = num_lanes
        self.vector: gym.vector.VectorEnv[Any, Any, Any] = make_vector_env(spec, num_lanes)
        self.observation_space: gym.Space[Any] = self.vector.single_observation_space
        self.action_space: gym.Space[Any] = self.vector.single_action_space
        self.checker = EnvChecker(spec, self.observation_space, worker_index) if check_env_output else None
        self.resetting = np.zeros(num_lanes, bool)  # lanes whose next step is the autoreset

    def reset(self, into: Any, seed: int, steps: np.ndarray) -> None:
        """Every lane reset (the vector env seeds lane ``i`` with ``seed + i``)."""
        obs = self.vector.reset(seed=seed)[0]
        self._check(obs, steps)
        into[...] = obs
        self.resetting[:] = False

    def step(self, actions: Any, row: StepRow) -> None:
        next_obs, reward, terminated, truncated, _ = self.vector.step(actions)
        self._check(next_obs, row.first + row.t + 1)
        resetting = self.resetting
        row.unstepped = resetting
        row.rewards[:] = reward
        row.terminateds[:] = terminated
        if row.next_obs is not None:
            row.next_obs[...] = next_obs
        ended = np.logical_or(terminated, truncated)
        row.dones[:] = ended | resetting
        if ended.any():
            row.ended.extend(np.flatnonzero(ended).tolist())
            row.truncations.extend((int(i), next_obs[i].copy()) for i in np.flatnonzero(truncated & ~terminated))
        row.into[...] = next_obs
        self.resetting = ended

    def _check(self, obs: Any, steps: np.ndarray | int) -> None:
        """The inline check of every lane's observation at once; a misfit names its lane."""
        check = self.checker
        if check is None:
            return
        shape, dtype = check.expected or ((), None)
        if type(obs) is np.ndarray and obs.shape == (self.num_lanes, *shape) and obs.dtype == dtype:
            return
        lane_steps = np.broadcast_to(steps, (self.num_lanes,))
        if type(obs) is np.ndarray and obs.shape[:1] == (self.num_lanes,):
            for i in range(self.num_lanes):
                check.observation(obs[i], i, int(lane_steps[i]))
        check.observation(obs, 0, int(lane_steps[0]))  # not one row per lane: lane 0's error names it

    def report(self, returns: list[float], lengths: list[int]) -> tuple[list[float], list[int], BatchMetrics]:
        return returns, lengths, {"num_env_errors": 0}  # a vector env's lanes are never replaced

    def close(self) -> None:
        self.vector.close()
