"""Learning from data: experiences written by any run, read by any run.

- ``minari_format``: Minari's on-disk format (the Farama standard), which asyncflow
  writes and reads;
- ``writer``: ``ExperienceWriter``, which a rollout worker uses to write what it
  samples as a shard of its own (``output=``);
- ``dataset``: a dataset on disk (asyncflow's shards or any Minari dataset) checked
  before any process starts, and read into transitions;
- ``reader``: ``DatasetShard``, the actor that holds part of a dataset and answers
  ``replay(n)`` like a replay shard, so an offline plan reads like an online one.

The names below load on first use (PEP 562): a run that neither writes nor reads a
dataset imports none of it.
"""

from typing import TYPE_CHECKING, Any

from ..._lazy import lazy_loader

if TYPE_CHECKING:
    from .dataset import Dataset, open_dataset, read_transitions
    from .estimators import ESTIMATORS, fitted_q_evaluation, importance_sampling
    from .reader import DatasetShard
    from .writer import ExperienceWriter

_MODULES = {
    "Dataset": "dataset",
    "open_dataset": "dataset",
    "read_transitions": "dataset",
    "ESTIMATORS": "estimators",
    "fitted_q_evaluation": "estimators",
    "importance_sampling": "estimators",
    "DatasetShard": "reader",
    "ExperienceWriter": "writer",
}


_load = lazy_loader(__name__, _MODULES, globals())


def __getattr__(name: str) -> Any:
    return _load(name)


__all__ = [
    "ESTIMATORS",
    "Dataset",
    "DatasetShard",
    "ExperienceWriter",
    "fitted_q_evaluation",
    "importance_sampling",
    "open_dataset",
    "read_transitions",
]
