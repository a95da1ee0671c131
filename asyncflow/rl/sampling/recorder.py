"""What a rollout worker records, and how a recording becomes a batch.

- ``SegmentRecorder``: the buffers of one ``sample()`` of ``k`` lanes stepped in
  lock step, ``(T, k, ...)``, which ``Lanes.step`` fills one ``StepRow`` at a
  time; the observations lie lane-major in memory, so the batch's columns are
  views of them, not copies (an observation is copied from the env into the
  buffer, and next into the ring, and no more).
- ``segment_batch``: a recorded ``Segment`` as the ``SampleBatch`` a worker
  returns: checked for NaN and inf, postprocessed, a recurrent policy's states
  added, the steps that belong to no episode dropped, with the episodes
  completed and the batch's metrics. Every single-agent worker (lock step or
  asynchronous) ends its ``sample()`` here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ..data.sample_batch import BatchMetrics, SampleBatch
from ..data.tree import tree_map, tree_zeros
from ..envs.checks import EnvChecker
from ..policy import StatefulPolicy
from .lanes import StepRow
from .trajectory import EpisodeBook, Postprocessing, Segment, drop_rows, lane_major

__all__ = ["SegmentRecorder", "check_segment_finite", "segment_batch"]

Report = Callable[[list[float], list[int]], tuple[list[float], list[int], BatchMetrics]]


def _lane_major_zeros(space: gym.Space[Any], steps: int, n: int) -> Any:
    """Zeros indexed ``[t, lane]`` whose memory is lane-major, each lane's steps contiguous."""
    return tree_map(lambda a: a.swapaxes(0, 1), tree_zeros(space, (n, steps)))


def _copy_at(tree: Any, t: int, lane: int) -> Any:
    """A copy of step ``t`` of lane ``lane`` of a ``(T, k, ...)`` tree."""
    return tree_map(lambda a: np.array(a[t, lane]), tree)


def _row(tree: Any, t: int) -> Any:
    """Step ``t`` of a ``(T, k, ...)`` tree: views, one per leaf."""
    return tree[t] if isinstance(tree, np.ndarray) else tree_map(lambda a: a[t], tree)


class SegmentRecorder:
    """One ``sample()``'s recording: ``steps`` time steps of ``lanes`` lanes."""

    def __init__(self, space: gym.Space[Any], steps: int, lanes: int, *, keeps_next_obs: bool) -> None:
        self.steps = steps
        self.obs = _lane_major_zeros(space, steps, lanes)
        self.next_obs = _lane_major_zeros(space, steps, lanes) if keeps_next_obs else None
        self.rewards = np.zeros((steps, lanes), np.float32)
        self.dones = np.zeros((steps, lanes), bool)
        self.terminateds = np.zeros((steps, lanes), bool)
        self.logps = np.zeros((steps, lanes), np.float32)
        self.values = np.zeros((steps, lanes), np.float32)
        self.eps = np.zeros((steps, lanes), np.int64)
        self.actions: list[np.ndarray] = []
        self.truncations: list[tuple[int, int, Any]] = []
        self.skipped: np.ndarray | None = None
        """``(T, k)``: steps that leave the batch (an autoreset, a failed env), or None: none."""

    def observations(self, t: int) -> Any:
        """The observations acted on at step ``t``, ``(k, ...)`` (views)."""
        return _row(self.obs, t)

    def row(self, t: int, first: np.ndarray, last_obs: Any) -> StepRow:
        """Step ``t``'s row, for ``Lanes.step``; its next observations go to step ``t + 1``'s,
        or to ``last_obs`` after the last step."""
        into = _row(self.obs, t + 1) if t + 1 < self.steps else last_obs
        next_obs = None if self.next_obs is None else _row(self.next_obs, t)
        return StepRow(t, first, into, next_obs, self.rewards[t], self.terminateds[t], self.dones[t])

    def skip(self, t: int, lanes: np.ndarray | list[int]) -> None:
        """Step ``t`` of ``lanes`` (a bool mask or indices) leaves the batch."""
        if self.skipped is None:
            self.skipped = np.zeros(self.rewards.shape, bool)
        self.skipped[t, lanes] = True

    def add(self, t: int, row: StepRow) -> None:
        """What ``row`` holds beside its arrays: its truncations and the steps to leave out."""
        if row.truncations:
            self.truncations.extend((t, lane, obs) for lane, obs in row.truncations)
        if row.unstepped is not None and row.unstepped.any():
            self.skip(t, row.unstepped)
            self.values[t, row.unstepped] = 0.0

    def abandon(self, t: int, lanes: list[int]) -> None:
        """The episodes of ``lanes``, whose env failed at step ``t``, end before it: step ``t``
        leaves the batch, and the step before it bootstraps from the observation it led to (as a
        time limit does)."""
        self.skip(t, lanes)
        for i in lanes:
            self.dones[t, i] = True
            if t > 0 and not self.dones[t - 1, i]:
                self.dones[t - 1, i] = True
                self.truncations.append((t - 1, i, _copy_at(self.obs, t, i)))

    def segment(self, last_obs: Any, rewards: np.ndarray | None = None) -> Segment:
        """The recording as a ``Segment`` (``rewards``: normalized ones in place of the raw)."""
        return Segment(self.obs, np.stack(self.actions), self.rewards if rewards is None else rewards, self.dones,
                       self.terminateds, self.logps, self.values, self.eps, last_obs=last_obs,
                       next_obs=self.next_obs, truncations=self.truncations)  # fmt: skip


def check_segment_finite(check: EnvChecker, seg: Segment, first: np.ndarray) -> None:
    """NaN and inf anywhere in a segment, before it leaves the worker: the observations
    (row ``t`` came from each lane's step ``first + t``: row 0 from the last step before
    the segment), the rewards and next observations (step ``first + t + 1``), the
    observations that end episodes, and the next one to act on (``first + T``)."""
    check.finite_steps(first, 0, observations=seg.obs)
    check.finite_steps(first, 1, rewards=seg.rewards, observations=seg.next_obs)
    last = tree_map(lambda x: x[None], seg.last_obs)
    check.finite_steps(first, len(seg.rewards), observations=last)
    for t, lane, obs in seg.truncations:
        check.finite(obs, 0.0, lane, int(first[lane]) + t + 1)


def segment_batch(
    segment: Segment,
    *,
    first: np.ndarray,
    checker: EnvChecker | None,
    postprocessing: Postprocessing,
    policy: Any,
    episodes: EpisodeBook,
    report: Report,
    skipped: np.ndarray | None = None,
) -> SampleBatch:
    """``segment`` as a worker's batch (the module docstring); ``first``: each lane's env steps
    before it; ``report``: the episodes to report and the metrics (``Lanes.report``)."""
    if checker is not None:
        check_segment_finite(checker, segment, first)
    columns = postprocessing(segment, policy.values)
    if isinstance(policy, StatefulPolicy):  # a recurrent policy's states, (T, k, ...) like the segment
        columns.update(lane_major(policy.take_columns()))
    if skipped is not None and skipped.any():
        columns = drop_rows(columns, np.swapaxes(skipped, 0, 1).reshape(-1))
    returns, lengths, metrics = report(*episodes.take())
    return SampleBatch(columns, episode_returns=returns, episode_lengths=lengths, metrics=metrics)
