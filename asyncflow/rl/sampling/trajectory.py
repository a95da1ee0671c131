"""The trajectory pipeline that every rollout worker shares.

A worker steps *lanes*: the sub-environments of a ``RolloutWorker``, or one
agent of a ``MultiAgentRolloutWorker``. This module holds everything about
trajectories that does not depend on how the lanes are stepped:

- ``worker_seed``: the seed of a worker's environments and policy;
- ``EpisodeBook``: episode ids, running returns and lengths, and the
  episodes completed since the last ``take()``;
- ``Segment``: the steps of ``k`` lanes, arrays shaped ``(T, k, ...)``;
- ``Postprocessing``: a segment to ``SampleBatch`` columns, the way a policy
  wants them. ``"gae"`` (policy gradients): a time-limit truncation adds
  ``gamma * V(final obs)`` to its reward, a segment that stops mid-episode
  bootstraps from ``V`` of the next observation, then GAE. ``"transitions"``
  (Q-learning, SAC, TD3, and V-trace's inputs): each row keeps its
  ``next_obs`` (the real final observation at an episode's end) and whether
  the episode ``terminated``; with ``n_step > 1`` rewards become n-step
  returns, with the ``discounts`` to bootstrap with.

Rows come out lane-major: each lane's steps stay contiguous and in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ...errors import ConfigError
from ..data.sample_batch import (
    ACTIONS,
    ADVANTAGES,
    DISCOUNTS,
    DONES,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    VALUE_TARGETS,
    VF_PREDS,
)
from ..data.tree import Tree, tree_map, tree_stack
from .postprocessing import compute_gae, compute_nstep

__all__ = ["EpisodeBook", "Postprocessing", "Segment", "drop_rows", "new_episode_seed", "worker_seed"]

PostprocessMode = Literal["gae", "transitions"]


def worker_seed(seed: int, worker_index: int) -> int:
    """The base seed of worker ``worker_index``'s environments and policy (distinct per worker)."""
    return seed * 10_007 + worker_index * 1_009


def new_episode_seed(worker_index: int, episodes_issued: int) -> int:
    """The seed of the envs a restored worker resets (``set_state`` without the envs' own
    state): a function of its counters, so a run resumed twice from one checkpoint goes on
    the same way twice."""
    return int(np.random.SeedSequence([worker_index, episodes_issued]).generate_state(1)[0])


class EpisodeBook:
    """Episode ids, returns and lengths of ``lanes`` concurrent episodes.

    Episode ids are unique across workers: ``worker_index * 1e9 + n``.
    """

    def __init__(self, worker_index: int, lanes: int) -> None:
        self.worker_index = worker_index
        self.issued = 0
        """Episode ids handed out so far (a restored worker goes on counting from here)."""
        self.ids = np.array([self.new_id() for _ in range(lanes)], np.int64)
        self.returns = np.zeros(lanes)
        self.lengths = np.zeros(lanes, np.int64)
        self._done_returns: list[float] = []
        self._done_lengths: list[int] = []

    def new_id(self) -> int:
        """A fresh episode id."""
        self.issued += 1
        return self.worker_index * 1_000_000_000 + self.issued

    def add(self, rewards: np.ndarray, stepped: np.ndarray | None = None) -> None:
        """One step of every lane (or of the lanes where ``stepped`` is set), with these rewards."""
        if stepped is None:
            self.returns += rewards
            self.lengths += 1
        else:
            self.returns += np.where(stepped, rewards, 0.0)
            self.lengths += stepped

    def step(self, lane: int, reward: float) -> None:
        """One step of one lane (the async worker's lanes step one by one)."""
        self.returns[lane] += reward
        self.lengths[lane] += 1

    def drop(self, lane: int) -> None:
        """Abandon ``lane``'s episode (its env failed): not recorded; a new one starts."""
        self.returns[lane], self.lengths[lane] = 0.0, 0
        self.ids[lane] = self.new_id()

    def end(self, lane: int) -> float:
        """Close ``lane``'s episode (recorded as completed) and start a new one; returns its return."""
        ret = float(self.returns[lane])
        self._done_returns.append(ret)
        self._done_lengths.append(int(self.lengths[lane]))
        self.returns[lane], self.lengths[lane] = 0.0, 0
        self.ids[lane] = self.new_id()
        return ret

    def take(self) -> tuple[list[float], list[int]]:
        """The returns and lengths of the episodes completed since the last call."""
        out = self._done_returns, self._done_lengths
        self._done_returns, self._done_lengths = [], []
        return out


@dataclass
class Segment:
    """``T`` steps of ``k`` lanes; every array is shaped ``(T, k, ...)``."""

    obs: Tree
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    terminateds: np.ndarray
    logps: np.ndarray
    values: np.ndarray
    eps_ids: np.ndarray
    last_obs: Tree
    """The observation after the last step, ``(k, ...)`` (GAE's bootstrap)."""
    next_obs: Tree | None = None
    """The observation after each step (``"transitions"`` only)."""
    truncations: list[tuple[int, int, Tree]] = field(default_factory=list)
    """``(t, lane, final observation)`` of each time-limit ending (GAE's bootstrap)."""


def lane_major(x: dict[str, Tree]) -> dict[str, Tree]:
    """``(T, k, ...)`` -> ``(k * T, ...)``, each lane's steps contiguous."""

    def flat(a: np.ndarray) -> np.ndarray:
        steps, lanes = a.shape[:2]
        if lanes == 1:
            return np.ascontiguousarray(a.reshape(steps, *a.shape[2:]))
        return np.ascontiguousarray(np.swapaxes(a, 0, 1).reshape(lanes * steps, *a.shape[2:]))

    return {k: tree_map(flat, v) for k, v in x.items()}


def drop_rows(columns: dict[str, Tree], drop: np.ndarray) -> dict[str, Tree]:
    """Lane-major ``columns`` without the rows where the boolean ``drop`` is set."""
    keep = np.flatnonzero(~drop)
    return {k: tree_map(lambda a: a[keep], v) for k, v in columns.items()}


@dataclass(frozen=True)
class Postprocessing:
    """How a policy wants its experience: ``"gae"`` or ``"transitions"`` (see the module docstring)."""

    mode: PostprocessMode = "gae"
    gamma: float = 0.99
    lam: float = 0.95
    n_step: int = 1
    use_critic: bool = True
    """GAE with a learned value baseline; False: plain discounted returns (PG)."""

    def __post_init__(self) -> None:
        if self.mode not in ("gae", "transitions"):
            raise ConfigError(f"postprocess must be 'gae' or 'transitions', not {self.mode!r}")

    @property
    def keeps_next_obs(self) -> bool:
        """Whether a worker must record each step's next observation."""
        return self.mode == "transitions"

    def __call__(self, seg: Segment, values: Callable[[Tree], np.ndarray]) -> dict[str, Tree]:
        """The columns of ``seg`` as a policy of this kind trains on them; ``values(obs)`` is V."""
        if self.mode == "transitions":
            return self._transitions(seg)
        rewards = seg.rewards
        lanes = rewards.shape[1]
        if self.use_critic and seg.truncations:
            rewards = rewards.copy()
            final = values(tree_stack([obs for _, _, obs in seg.truncations]))
            for (t, lane, _), v in zip(seg.truncations, final, strict=True):
                rewards[t, lane] += self.gamma * v
        if self.use_critic:
            last, baseline = values(seg.last_obs), seg.values
        else:  # plain discounted returns: the policy's value head (untrained) is no baseline
            last, baseline = np.zeros(lanes, np.float32), np.zeros_like(seg.values)
        advantages, targets = compute_gae(rewards, baseline, seg.dones, last, self.gamma, self.lam)
        return lane_major(
            {
                OBS: seg.obs,
                ACTIONS: seg.actions,
                REWARDS: rewards,
                DONES: seg.dones,
                LOGP: seg.logps,
                VF_PREDS: seg.values,
                ADVANTAGES: advantages,
                VALUE_TARGETS: targets,
                EPS_ID: seg.eps_ids,
            }
        )

    def _transitions(self, seg: Segment) -> dict[str, Tree]:
        assert seg.next_obs is not None, "a transitions segment records next_obs"
        columns: dict[str, Any] = {OBS: seg.obs, ACTIONS: seg.actions, TERMINATEDS: seg.terminateds,
                                   DONES: seg.dones, LOGP: seg.logps, EPS_ID: seg.eps_ids}  # fmt: skip
        if self.n_step > 1:
            columns[REWARDS], columns[NEXT_OBS], columns[DISCOUNTS] = compute_nstep(
                seg.rewards, seg.next_obs, seg.terminateds, seg.dones, self.gamma, self.n_step
            )
        else:
            columns[REWARDS], columns[NEXT_OBS] = seg.rewards, seg.next_obs
            columns[DISCOUNTS] = (self.gamma * (1.0 - seg.terminateds)).astype(np.float32)
        return lane_major(columns)
