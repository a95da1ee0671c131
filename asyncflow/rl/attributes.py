"""A worker's whole state as one blob: every attribute pickled (envs mid-episode,
policy, random generators, counters). Torch-free: a numpy-policy worker
checkpoints without loading torch."""

from __future__ import annotations

from typing import Any

import cloudpickle

__all__ = ["pickle_attributes", "unpickle_attributes"]


def pickle_attributes(obj: Any, skip: tuple[str, ...] = ()) -> bytes:
    """All of ``obj``'s attributes in one blob (a worker's envs, policy, counters)."""
    return cloudpickle.dumps({k: v for k, v in vars(obj).items() if k not in skip})  # type: ignore[no-any-return]


def unpickle_attributes(obj: Any, blob: bytes) -> None:
    """Put back what ``pickle_attributes`` captured."""
    vars(obj).update(cloudpickle.loads(blob))
