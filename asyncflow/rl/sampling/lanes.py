"""The one interface of environments stepped in lock step: ``Lanes``.

``RolloutWorker`` runs one stepping loop (``rollout_worker.py``) over ``k``
lanes: each time step, one batched forward pass, then ``lanes.step(actions,
row)``, which steps every lane once and writes what came back into ``row``,
one row of the segment being recorded (``recorder.py``). A kind of env is one
class with the methods below:

- ``EnvLanes`` (``env_lanes.py``): ``k`` gymnasium envs, stepped one by one,
  each reset on the spot when its episode ends; output checks inline; a failed
  env replaced (``restart_failed_envs``); observations normalized.
- ``VectorLanes`` (``vector_lanes.py``): one gymnasium vector env, one
  ``step`` call for all lanes; a finished lane's autoreset step belongs to no
  episode (``StepRow.unstepped``).

What the loop does with a row (episode returns and ids, recurrent state
resets, dropped rows, reward normalization, NaN checks, postprocessing) is
the same for every kind.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from ..data.sample_batch import BatchMetrics

__all__ = ["Lanes", "LanesFactory", "StepRow"]


class StepRow:
    """Time step ``t`` of a segment being recorded, for ``Lanes.step`` to fill.

    The arrays are views into the segment's ``(T, k, ...)`` buffers, written in
    place; the lists start empty."""

    __slots__ = ("dones", "ended", "failed", "first", "into", "next_obs", "rewards", "t", "terminateds",
                 "truncations", "unstepped")  # fmt: skip

    def __init__(self, t: int, first: np.ndarray, into: Any, next_obs: Any, rewards: np.ndarray,
                 terminateds: np.ndarray, dones: np.ndarray) -> None:  # fmt: skip
        self.t = t
        self.first = first
        """Each lane's env steps before the segment: lane ``i``'s step now is ``first[i] + t + 1``
        (what an error names)."""
        self.into = into
        """``(k, ...)``: each lane's next observation to act on (after a reset, the new episode's first)."""
        self.next_obs = next_obs
        """``(k, ...)``: the observation each step led to, or None where the policy keeps none."""
        self.rewards = rewards
        self.terminateds = terminateds
        self.dones = dones
        """Whether each lane's episode ended at this step (terminated, truncated or abandoned)."""
        self.ended: list[int] = []
        """Lanes whose episode ended at this step (recorded as completed)."""
        self.failed: list[int] = []
        """Lanes whose env failed at this step and was replaced: the step leaves the batch, the
        episode is abandoned (``restart_failed_envs``)."""
        self.truncations: list[tuple[int, Any]] = []
        """``(lane, final observation)`` of each time-limit ending (GAE's bootstrap)."""
        self.unstepped: np.ndarray | None = None
        """``(k,)`` bool: lanes whose step belongs to no episode (a vector env's autoreset), or
        None: every lane stepped its episode."""


class Lanes(Protocol):
    """``num_lanes`` environments stepped in lock step (see the module docstring)."""

    num_lanes: int
    observation_space: gym.Space[Any]
    """One lane's observation space."""
    action_space: gym.Space[Any]
    """One lane's action space."""

    def reset(self, into: Any, seed: int, steps: np.ndarray) -> None:
        """Start a new episode in every lane, lane ``i`` seeded ``seed + i``: its first observation
        into ``into[i]`` (``steps[i]``: the lane's env steps so far, named in errors)."""
        ...

    def step(self, actions: Any, row: StepRow) -> None:
        """Step every lane with its action (as the env takes it) and fill ``row``."""
        ...

    def report(self, returns: list[float], lengths: list[int]) -> tuple[list[float], list[int], BatchMetrics]:
        """The episodes a batch reports, given those the worker counted (Atari: whole games'
        scores instead of lives), and what these lanes measured since the last call."""
        ...

    def close(self) -> None:
        """Close every env."""
        ...


class LanesFactory(Protocol):
    """Builds the lanes of one worker: ``factory(env, num_lanes, worker_index=, check_env_output=)``
    (``RolloutWorker(lanes=...)``; ``EnvLanes`` and ``VectorLanes`` are the built-in ones)."""

    def __call__(self, env: Any, num_lanes: int, *, worker_index: int, check_env_output: bool) -> Lanes: ...
