"""``ExperienceWriter``: what one worker samples, written as a Minari dataset of its own.

A worker records ``(T, k, ...)`` segments of ``k`` lanes; the writer cuts each lane's
steps into episodes (an episode ends at a step marked done), keeps the open ones across
segments, and writes the finished ones to its shard once ``flush_steps`` steps wait, in a
thread of its own (one write at a time), opening and closing the HDF5 file each time, so
that a worker killed between two writes leaves a shard that reads. ``close`` writes the
episodes still open as truncated ones (they end on the observation the worker stopped at,
which is what a truncation means: not terminal, bootstrap from there). Rows that belong to no episode (a vector env's
autoreset step, a step of an env that failed) are left out, as they are from batches.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ..data.tree import Tree, tree_concat, tree_map, tree_stack
from .minari_format import DATA, MAIN_FILE, EpisodeFile, write_metadata

__all__ = ["ExperienceWriter", "LaneSteps", "Output"]


@dataclass
class LaneSteps:
    """The steps of one lane, ``(T, k, ...)`` arrays of a segment: what ``record`` takes."""

    obs: Tree
    next_obs: Tree
    actions: Tree
    """As the env took them (``policy.env_actions``)."""
    rewards: np.ndarray
    terminateds: np.ndarray
    dones: np.ndarray
    logps: np.ndarray
    eps_ids: np.ndarray
    """Each step's episode id: a lane whose episode id changes without an end had its env
    replaced (a failure): the episode so far is written as truncated there."""
    skipped: np.ndarray | None = None
    lanes: list[int] | None = None
    """The writer lane of each column (an async worker's sequences come from any env in any
    order); None: column ``k`` is lane ``k``."""


class ExperienceWriter:
    """Writes the episodes of ``lanes`` lanes to ``folder/name/data`` (a Minari dataset)."""

    def __init__(
        self,
        folder: str | Path,
        name: str,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        lanes: int,
        *,
        env_spec: str | None = None,
        algorithm: str = "asyncflow",
        flush_steps: int = 4096,
    ) -> None:
        self.name = name
        self.data = Path(folder) / name / DATA
        self.data.mkdir(parents=True, exist_ok=False)  # one writer per shard: never two on one file
        self.observation_space, self.action_space = observation_space, action_space
        self.env_spec, self.algorithm, self.flush_steps = env_spec, algorithm, flush_steps
        self.episodes = 0
        self.steps = 0
        """Episodes and steps written so far (by the writer thread)."""
        self.received = 0
        """Steps of the episodes finished so far, written or not."""
        self._open: list[list[dict[str, Any]] | None] = [None] * lanes  # each lane's episode so far, in pieces
        self._finished: list[dict[str, Any]] = []
        self._waiting = 0
        self._thread: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None
        self._metadata()  # an empty shard is a dataset too (of no episodes)

    def record(self, s: LaneSteps) -> None:
        """Take a segment's steps; write once ``flush_steps`` steps of finished episodes wait."""
        steps = len(s.rewards)
        for column in range(s.rewards.shape[1]):
            lane = column if s.lanes is None else s.lanes[column]
            rows = np.arange(steps) if s.skipped is None else np.flatnonzero(~s.skipped[:, column])
            start = 0
            for end in np.flatnonzero(s.dones[rows, column]).tolist():
                self._add(s, lane, column, rows[start : end + 1])
                self._finish(lane, terminated=bool(s.terminateds[rows[end], column]))
                start = end + 1
            if start < len(rows):
                self._add(s, lane, column, rows[start:])
        if self._waiting >= self.flush_steps:
            self.flush()

    def _add(self, s: LaneSteps, lane: int, column: int, rows: np.ndarray) -> None:
        episode = int(s.eps_ids[rows[0], column])
        pieces = self._open[lane]
        if pieces is not None and pieces[-1]["episode"] != episode:  # its env was replaced mid-episode
            self._finish(lane, terminated=False)
            pieces = None
        piece = {
            "episode": episode,
            "observations": tree_map(lambda a: a[rows, column], s.obs),
            "actions": tree_map(lambda a: a[rows, column], s.actions),
            "rewards": s.rewards[rows, column],
            "logps": s.logps[rows, column],
            "next": tree_map(lambda a: np.array(a[rows[-1], column]), s.next_obs),
        }
        if pieces is None:
            self._open[lane] = [piece]
        else:
            pieces.append(piece)

    def _finish(self, lane: int, *, terminated: bool) -> None:
        """End lane ``lane``'s episode where it stands: terminated, or else truncated."""
        pieces = self._open[lane]
        self._open[lane] = None
        if pieces is None:
            return
        final = pieces[-1]["next"]
        self._take({
            "seed": None,
            "observations": tree_concat([*(p["observations"] for p in pieces), tree_map(lambda a: a[None], final)]),
            "actions": tree_concat([p["actions"] for p in pieces]),
            "rewards": np.concatenate([p["rewards"] for p in pieces]),
            "logps": np.concatenate([*(p["logps"] for p in pieces), [np.nan]]).astype(np.float32),
        }, terminated)  # fmt: skip

    def add_episode(
        self, observations: list[Any], actions: list[Any], rewards: list[float], logps: list[float], *,
        terminated: bool, seed: int | None = None,
    ) -> None:  # fmt: skip
        """One whole episode, step by step: ``observations`` has one more than the steps (the
        last is the one the episode ended on); ``seed``: its reset's, kept as Minari's episode
        attribute ``seed``. Written once ``flush_steps`` steps wait."""
        self._take({
            "seed": seed,
            "observations": tree_stack(observations),
            "actions": tree_stack(actions),
            "rewards": np.asarray(rewards, np.float32),
            "logps": np.asarray([*logps, np.nan], np.float32),
        }, terminated)  # fmt: skip
        if self._waiting >= self.flush_steps:
            self.flush()

    def _take(self, episode: dict[str, Any], terminated: bool) -> None:
        """A finished episode, to write with the next flush: its end marked one way or the other."""
        n = len(episode["rewards"])
        episode["terminations"], episode["truncations"] = np.zeros(n, bool), np.zeros(n, bool)
        episode["terminations" if terminated else "truncations"][-1] = True
        self._finished.append(episode)
        self._waiting += n
        self.received += n

    def flush(self) -> None:
        """Hand the finished episodes to the writer thread (after the previous write is done:
        at most one batch of episodes waits in memory)."""
        if not self._finished:
            return
        self._wait()
        episodes, self._finished, self._waiting = self._finished, [], 0
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="asyncflow-writer")
        self._pending = self._thread.submit(self._write, episodes)

    def _wait(self) -> None:
        """Wait for the write under way; its error, if it failed, is raised here."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def _write(self, episodes: list[dict[str, Any]]) -> None:
        """One open and close of the HDF5 file, then the metadata: in the writer thread, so that
        HDF5's own work overlaps the worker's waits (for its next call, for the driver)."""
        with EpisodeFile(self.data / MAIN_FILE) as file:
            for episode in episodes:
                n = len(episode["rewards"])
                group = file.episode(self.episodes, n, episode["seed"])
                file.tree(group, "observations", episode["observations"])
                file.tree(group, "actions", episode["actions"])
                for key in ("rewards", "terminations", "truncations"):
                    file.tree(group, key, episode[key])
                file.tree(file.group(group, "infos"), "action_logp", episode["logps"])
                self.episodes += 1
                self.steps += n
        self._metadata()

    def close(self) -> None:
        """Write everything (the episodes still open end here, truncated) and wait for it."""
        for lane in range(len(self._open)):
            self._finish(lane, terminated=False)
        self.flush()
        try:
            self._wait()
        finally:
            if self._thread is not None:
                self._thread.shutdown()
                self._thread = None

    def _metadata(self) -> None:
        write_metadata(self.data, dataset_id=self.name, observation_space=self.observation_space,
                       action_space=self.action_space, env_spec=self.env_spec, episodes=self.episodes,
                       steps=self.steps, algorithm=self.algorithm)  # fmt: skip


@dataclass(frozen=True)
class Output:
    """Where a worker writes its experiences (``output=``), and what the shards say of them."""

    folder: str
    algorithm: str = "asyncflow"
    """``algorithm_name`` in each shard's metadata."""
    env_spec: str | None = None
    """The env's gymnasium ``EnvSpec`` as JSON (``minari_format.env_spec_json``), when it has one."""
    flush_steps: int = 4096
    """Steps of finished episodes a writer holds before it writes them."""

    def writer(self, role: str, index: int, observation_space: Any, action_space: Any, lanes: int) -> ExperienceWriter:
        """The writer of one worker process: shard ``<role>-<index>-<pid>-v0`` (a restarted
        worker writes a shard of its own beside its predecessor's), or ``...-<pid>-<k>-v0``
        where that is taken (a second run in one process writing to the same folder)."""
        base, k = f"{role}-{index}-{os.getpid()}", 1
        while True:
            name = f"{base}-v0" if k == 1 else f"{base}-{k}-v0"
            try:
                return ExperienceWriter(self.folder, name, observation_space, action_space, lanes,
                                        env_spec=self.env_spec, algorithm=self.algorithm,
                                        flush_steps=self.flush_steps)  # fmt: skip
            except FileExistsError:
                k += 1
