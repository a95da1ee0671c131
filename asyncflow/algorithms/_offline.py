"""What the algorithms that learn from a dataset share: their config fields, the dataset
(``Recipe.dataset``), and the reader actors their plans replay from (``Recipe.resources``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from ..errors import ConfigError
from ..rl.envs.make import EnvSpec
from ..rl.offline.dataset import Dataset, open_dataset
from ..rl.offline.reader import DatasetShard
from ..rl.sampling.worker_set import WorkerSet
from ._config import AlgorithmConfig, algorithm_config, field
from ._recipe import Resources

__all__ = ["READERS", "SCALED_READERS", "OfflineConfig", "dataset", "open_readers"]


@algorithm_config(defaults={"learner.lr": 1e-3, "learner.max_grad_norm": None, "evaluation.episodes": 10})
class OfflineConfig(AlgorithmConfig):
    """What every algorithm that learns from a dataset holds."""

    env: EnvSpec | None = None  # type: ignore[assignment]
    """An env to evaluate in (its spaces must be the dataset's); None: no evaluation."""

    input: str | None = None
    """The dataset: a Minari dataset folder, or a folder of them (what ``output`` writes)."""
    input_memory_rows: int | None = field(default=None, min=1)
    """Rows each reader holds at once; a larger share streams in windows of whole episodes
    (None: every reader reads its share once)."""
    train_batch_size: int = field(default=256, min=1)
    """Rows per update."""
    updates_per_iteration: int = field(default=100, min=1)
    """Updates per training iteration (one result)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.input is None:
            raise ConfigError("input: an offline algorithm needs a dataset (input=FOLDER, --input FOLDER)")
        if self.output is not None:
            raise ConfigError("output: an offline algorithm samples nothing to write")


def dataset(config: OfflineConfig) -> Dataset:
    """``Recipe.dataset``: the config's ``input``, checked."""
    assert config.input is not None
    return open_dataset(config.input)


async def open_readers(config: OfflineConfig, runtime: Any, *, scale_actions: bool = False) -> WorkerSet:
    """The reader actors, each with a share of the dataset's shards (``rollouts.num_workers``
    of them, at most one per shard; one in the driver with 0); ``scale_actions``: a ``Box``
    action space's actions served in ``[-1, 1]``."""
    data = dataset(config)
    space = data.action_space
    bounds = (space.low, space.high) if scale_actions and isinstance(space, gym.spaces.Box) else None
    count = max(1, min(config.rollouts.num_workers, len(data.shards)))
    shares = [[str(s) for s in data.shards[i::count]] for i in range(count)]
    handles = [
        await runtime.spawn(
            DatasetShard,
            share,
            gamma=config.gamma,
            seed=config.seed * 131 + i,
            memory_rows=config.input_memory_rows,
            action_bounds=bounds,
            name=f"reader-{i + 1}",
        )
        for i, share in enumerate(shares)
    ]
    return WorkerSet(handles, timeout_s=config.rollouts.timeout_s, env=f"dataset {config.input}")


async def _nothing(config: Any, readers: WorkerSet) -> None:
    return None  # the dataset is on disk: a checkpoint does not copy it


async def _same(config: Any, readers: WorkerSet, state: None) -> WorkerSet:
    return readers


async def _scaled(config: Any, runtime: Any) -> WorkerSet:
    return await open_readers(config, runtime, scale_actions=True)


READERS: Resources[Any, WorkerSet] = Resources(open=open_readers, save=_nothing, load=_same)
SCALED_READERS: Resources[Any, WorkerSet] = Resources(open=_scaled, save=_nothing, load=_same)
"""Readers that serve a ``Box`` action space's actions in ``[-1, 1]`` (for the SAC-family learners)."""
