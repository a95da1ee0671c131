"""``ExperienceWriter``: what one worker samples, written as a Minari dataset of its own.

A worker records ``(T, k, ...)`` segments of ``k`` lanes; the writer cuts each lane's
steps into episodes (an episode ends at a step marked done), keeps the open ones across
segments, and writes the finished ones to its shard once ``flush_steps`` steps wait,
opening and closing the HDF5 file each time, so that a worker killed between two writes
leaves a shard that reads. ``close`` writes the episodes still open as truncated ones
(they end on the observation the worker stopped at, which is what a truncation means:
not terminal, bootstrap from there). Rows that belong to no episode (a vector env's
autoreset step, a step of an env that failed) are left out, as they are from batches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ..data.tree import Tree, tree_concat, tree_map, tree_stack
from .minari_format import DATA, MAIN_FILE, write_metadata, write_tree

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
    skipped: np.ndarray | None = None


@dataclass
class _Open:
    """An episode in progress: its pieces so far."""

    episode_id: int
    pieces: list[dict[str, Any]] = field(default_factory=list)


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
        self._open: list[_Open | None] = [None] * lanes
        self._finished: list[dict[str, Any]] = []
        self._waiting = 0
        self._metadata()  # an empty shard is a dataset too (of no episodes)

    def record(self, s: LaneSteps) -> None:
        """Take a segment's steps; write once ``flush_steps`` steps of finished episodes wait."""
        steps = len(s.rewards)
        for lane in range(len(self._open)):
            rows = np.arange(steps) if s.skipped is None else np.flatnonzero(~s.skipped[:, lane])
            start = 0
            for end in np.flatnonzero(s.dones[rows, lane]).tolist():
                self._add(s, lane, rows[start : end + 1])
                self._finish(lane, terminated=bool(s.terminateds[rows[end], lane]))
                start = end + 1
            if start < len(rows):
                self._add(s, lane, rows[start:])
        if self._waiting >= self.flush_steps:
            self.flush()

    def _add(self, s: LaneSteps, lane: int, rows: np.ndarray) -> None:
        if self._open[lane] is None:
            self._open[lane] = _Open(int(s.eps_ids[rows[0], lane]))
        piece = {
            "observations": tree_map(lambda a: a[rows, lane], s.obs),
            "actions": tree_map(lambda a: a[rows, lane], s.actions),
            "rewards": s.rewards[rows, lane],
            "logps": s.logps[rows, lane],
            "next": tree_map(lambda a: np.array(a[rows[-1], lane]), s.next_obs),
        }
        self._open[lane].pieces.append(piece)  # type: ignore[union-attr]

    def _finish(self, lane: int, *, terminated: bool) -> None:
        """End lane ``lane``'s episode where it stands: terminated, or else truncated."""
        episode = self._open[lane]
        self._open[lane] = None
        if episode is None:
            return
        pieces = episode.pieces
        final = pieces[-1]["next"]
        n = sum(len(p["rewards"]) for p in pieces)
        done = {
            "id": episode.episode_id,
            "observations": tree_concat([*(p["observations"] for p in pieces), tree_map(lambda a: a[None], final)]),
            "actions": tree_concat([p["actions"] for p in pieces]),
            "rewards": np.concatenate([p["rewards"] for p in pieces]),
            "logps": np.concatenate([*(p["logps"] for p in pieces), [np.nan]]).astype(np.float32),
            "terminations": np.zeros(n, bool),
            "truncations": np.zeros(n, bool),
        }
        done["terminations" if terminated else "truncations"][-1] = True
        self._finished.append(done)
        self._waiting += n

    def add_episode(
        self, episode_id: int, observations: list[Any], actions: list[Any], rewards: list[float],
        logps: list[float], *, terminated: bool,
    ) -> None:  # fmt: skip
        """One whole episode, step by step: ``observations`` has one more than the steps (the
        last is the one the episode ended on); written once ``flush_steps`` steps wait."""
        n = len(rewards)
        episode = {
            "id": episode_id,
            "observations": tree_stack(observations),
            "actions": tree_stack(actions),
            "rewards": np.asarray(rewards, np.float32),
            "logps": np.asarray([*logps, np.nan], np.float32),
            "terminations": np.zeros(n, bool),
            "truncations": np.zeros(n, bool),
        }
        episode["terminations" if terminated else "truncations"][-1] = True
        self._finished.append(episode)
        self._waiting += n
        if self._waiting >= self.flush_steps:
            self.flush()

    def flush(self) -> None:
        """Write the finished episodes (one open and close of the HDF5 file)."""
        if not self._finished:
            return
        import h5py

        with h5py.File(self.data / MAIN_FILE, "a") as file:
            for episode in self._finished:
                group = file.create_group(f"episode_{self.episodes}")
                n = len(episode["rewards"])
                group.attrs["id"] = self.episodes
                group.attrs["total_steps"] = n
                group.attrs["asyncflow_episode_id"] = episode["id"]
                write_tree(group, "observations", episode["observations"])
                write_tree(group, "actions", episode["actions"])
                for key in ("rewards", "terminations", "truncations"):
                    group.create_dataset(key, data=episode[key])
                group.create_group("infos").create_dataset("action_logp", data=episode["logps"])
                self.episodes += 1
                self.steps += n
        self._finished, self._waiting = [], 0
        self._metadata()

    def close(self) -> None:
        """Write everything: the episodes still open end here, truncated."""
        for lane in range(len(self._open)):
            self._finish(lane, terminated=False)
        self.flush()

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
    flush_steps: int = field(default=4096)
    """Steps of finished episodes a writer holds before it writes them."""

    def writer(self, role: str, index: int, observation_space: Any, action_space: Any, lanes: int) -> ExperienceWriter:
        """The writer of one worker process: shard ``<role>-<index>-<pid>-v0`` (a restarted
        worker writes a shard of its own beside its predecessor's)."""
        return ExperienceWriter(self.folder, f"{role}-{index}-{os.getpid()}-v0", observation_space, action_space,
                                lanes, env_spec=self.env_spec, algorithm=self.algorithm,
                                flush_steps=self.flush_steps)  # fmt: skip
