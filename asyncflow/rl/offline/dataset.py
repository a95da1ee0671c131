"""A dataset on disk: found, checked in the driver before any process starts, and read.

``input=`` names a Minari dataset (a folder with ``data/metadata.json``, or that ``data``
folder itself) or a folder of them (what ``output=`` writes: one per worker process).
``open_dataset`` reads each one's metadata and opens its file, and says in one line what
is wrong: nothing there, no steps, a damaged file, shards whose spaces differ, spaces that
do not fit the env. Reading goes through Minari's own reader (``minari.MinariDataset``),
which takes its HDF5 and Arrow formats and JPEG-encoded frames; nothing in a dataset runs
code (the spaces are JSON; the env is never made from the dataset's ``env_spec``).

``read_transitions`` turns episodes into the columns offline learners train on:
``obs``, ``actions``, ``rewards``, ``new_obs``, ``terminateds``, ``dones``, ``discounts``,
``returns`` (the discounted return from each step to the episode's end, MARWIL's
target) and, where the data has them, the behaviour policy's ``action_logp``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import ConfigError
from ..data.sample_batch import (
    ACTIONS,
    DISCOUNTS,
    DONES,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    SampleBatch,
)
from ..data.tree import tree_concat, tree_map
from ..sampling.postprocessing import compute_gae
from .minari_format import DATA, METADATA, require

__all__ = ["RETURNS", "Dataset", "open_dataset", "read_transitions"]

RETURNS = "returns"
"""The discounted return from a step to its episode's end."""


@dataclass(frozen=True)
class Dataset:
    """A checked dataset: its shards (Minari ``data`` folders), spaces and size."""

    path: Path
    shards: tuple[Path, ...]
    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    episodes: int
    steps: int
    has_logp: bool
    """Every shard's episodes carry ``infos/action_logp`` (the behaviour policy's)."""
    env_id: str | None = None
    """The gymnasium id in the data's ``env_spec``, where that id is registered in this process
    (only the id is used: the env is made from this gymnasium's registry, never from the file)."""

    def check_fits(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], where: str) -> None:
        """A ``ConfigError`` unless the dataset's spaces are the env's (``where`` names the env)."""
        for what, ours, theirs in (("observation", self.observation_space, observation_space),
                                   ("action", self.action_space, action_space)):  # fmt: skip
            if ours != theirs:
                raise ConfigError(f"input: {self.path}: its {what} space {ours} is not {where}'s {theirs}")

    def require_logp(self, why: str) -> None:
        """A ``ConfigError`` unless the data has the behaviour policy's log-probabilities."""
        if not self.has_logp:
            raise ConfigError(f"input: {self.path}: its episodes have no infos/action_logp (the behaviour policy's "
                              f"log-probabilities), which {why} needs")  # fmt: skip


def open_dataset(path: str | Path) -> Dataset:
    """Find and check the dataset at ``path`` (the module docstring)."""
    require("input")
    root = Path(path)
    if not root.exists():
        raise ConfigError(f"input: {root} does not exist")
    shards = _find_shards(root)
    if not shards:
        raise ConfigError(f"input: {root} holds no Minari dataset (no {DATA}/{METADATA} in it or in its folders)")
    metas = [_metadata(s) for s in shards]
    first = metas[0]
    for shard, meta in zip(shards[1:], metas[1:], strict=True):
        for key in ("observation_space", "action_space"):
            if meta[key] != first[key]:
                raise ConfigError(f"input: {shard / METADATA}: its {key} {meta[key]} is not {shards[0]}'s {first[key]}")
    steps = sum(int(m.get("total_steps", 0)) for m in metas)
    if steps == 0:
        raise ConfigError(f"input: {root} holds no steps ({len(shards)} dataset(s) of 0 episodes)")
    has_logp = all(_has_logp(s, int(m.get("total_episodes", 0))) for s, m in zip(shards, metas, strict=True))
    return Dataset(root, tuple(shards), first["observation_space"], first["action_space"],
                   sum(int(m.get("total_episodes", 0)) for m in metas), steps, has_logp, _env_id(first))  # fmt: skip


def _env_id(meta: dict[str, Any]) -> str | None:
    try:
        env_id = json.loads(meta["env_spec"])["id"]
    except (KeyError, TypeError, ValueError):
        return None
    return env_id if isinstance(env_id, str) and env_id in gym.registry else None


def _find_shards(root: Path) -> list[Path]:
    if (root / METADATA).is_file():
        return [root]
    if (root / DATA / METADATA).is_file():
        return [root / DATA]
    found = []
    for folder, _, files in os.walk(root, followlinks=True):  # datasets linked into a folder count too
        if METADATA in files and Path(folder).name == DATA:
            found.append(Path(folder))
    return sorted(found)


def _metadata(shard: Path) -> dict[str, Any]:
    """The shard's metadata, its spaces deserialized (JSON: no code runs)."""
    from minari.serialization import deserialize_space

    file = shard / METADATA
    try:
        meta: dict[str, Any] = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"input: {file}: not readable as JSON ({exc})") from None
    for key in ("observation_space", "action_space"):
        if key not in meta:
            raise ConfigError(f"input: {file}: no {key} (asyncflow does not make the dataset's env to learn it)")
        try:
            meta[key] = deserialize_space(meta[key])
        except Exception as exc:  # noqa: BLE001 - any malformed space is the file's fault
            raise ConfigError(f"input: {file}: its {key} does not parse ({exc!r})") from None
    if meta.get("data_format", "hdf5") not in ("hdf5", "arrow"):
        raise ConfigError(f"input: {file}: data_format {meta.get('data_format')!r} (Minari's are hdf5 and arrow)")
    return meta


def _has_logp(shard: Path, episodes: int) -> bool:
    if episodes == 0:
        return True  # nothing to lack
    first = next(iter(_episodes(shard, [0])))
    return "action_logp" in (first.infos or {})


def _episodes(shard: Path, indices: Sequence[int] | None = None) -> Iterable[Any]:
    """Minari's episodes of ``shard``; a file that does not read is a ``ConfigError`` naming it."""
    import minari

    try:
        dataset = minari.MinariDataset(shard)
        episodes = list(dataset.iterate_episodes(indices))
    except Exception as exc:  # noqa: BLE001 - h5py, arrow and Minari each raise their own
        raise ConfigError(f"input: {shard}: damaged or unreadable ({type(exc).__name__}: {exc})") from None
    return episodes


def read_transitions(
    shards: Sequence[Path], gamma: float, *, episodes: Sequence[Sequence[int]] | None = None
) -> SampleBatch:
    """The episodes of ``shards`` as transition columns (the module docstring): all of them, or
    ``episodes[i]`` of shard ``i``. Episode ids say their shard's place in ``shards``."""
    chosen: Sequence[Sequence[int] | None] = [None] * len(shards) if episodes is None else episodes
    parts = [_transitions(e, gamma, i) for i, (shard, wanted) in enumerate(zip(shards, chosen, strict=True))
             if wanted is None or len(wanted) for e in _episodes(Path(shard), wanted)]  # fmt: skip
    parts = [p for p in parts if p]
    if not parts:
        return SampleBatch({})
    keys = set.intersection(*(set(p) for p in parts))  # action_logp only where every episode has it
    return SampleBatch({k: tree_concat([p[k] for p in parts]) for k in parts[0] if k in keys})


def _transitions(episode: Any, gamma: float, shard: int) -> dict[str, Any]:
    rewards = np.asarray(episode.rewards, np.float32).reshape(-1)
    n = len(rewards)
    if n == 0:
        return {}
    terminated = np.asarray(episode.terminations, bool).reshape(-1)
    ended = terminated | np.asarray(episode.truncations, bool).reshape(-1)
    ended[-1] = True  # an episode's last step ends it, however it was marked
    obs = episode.observations
    zeros = np.zeros((n, 1), np.float32)  # GAE with no baseline and lambda 1: the discounted return
    returns = compute_gae(rewards[:, None], zeros, ended[:, None], zeros[0], gamma, 1.0)[0][:, 0]
    columns: dict[str, Any] = {
        OBS: tree_map(lambda a: np.asarray(a)[:n], obs),
        NEXT_OBS: tree_map(lambda a: np.asarray(a)[1 : n + 1], obs),
        ACTIONS: tree_map(np.asarray, episode.actions),
        REWARDS: rewards,
        TERMINATEDS: terminated,
        DONES: ended,
        DISCOUNTS: (gamma * (1.0 - terminated)).astype(np.float32),
        RETURNS: returns,
        EPS_ID: np.full(n, shard * 1_000_000_000 + int(episode.id), np.int64),  # unique across shards
    }
    infos = episode.infos or {}
    if "action_logp" in infos:
        columns[LOGP] = np.asarray(infos["action_logp"], np.float32)[:n]
    return columns
