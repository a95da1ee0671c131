"""A worker's whole state as one blob: every attribute pickled (envs mid-episode,
policy, random generators, counters). Torch-free: a numpy-policy worker
checkpoints without loading torch. A checkpoint restores it only when the caller
trusts the file (unpickling runs code); see ``algorithms/_checkpoint.py``."""

from __future__ import annotations

import io
from typing import Any

import cloudpickle
from gymnasium.utils import EzPickle

from ..data.state_tree import Pickled

__all__ = ["pickle_attributes", "pickled_attributes", "restore_exactly", "unpickle_attributes"]


def pickle_attributes(obj: Any, skip: tuple[str, ...] = ()) -> bytes:
    """All of ``obj``'s attributes in one blob (a worker's envs, policy, counters)."""
    return cloudpickle.dumps({k: v for k, v in vars(obj).items() if k not in skip})  # type: ignore[no-any-return]


class _NotExact(Exception):
    pass


class _ExactPickler(cloudpickle.Pickler):  # type: ignore[misc]
    """Refuses what would not come back as it was: gymnasium's ``EzPickle`` objects (Box2D
    envs, every PettingZoo env) pickle their constructor's arguments, not their state, so an
    env mid-episode would come back new and never reset."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, EzPickle):
            raise _NotExact
        return super().reducer_override(obj)


def pickled_attributes(obj: Any, what: str) -> Pickled | None:
    """``pickle_attributes(obj)`` as a ``Pickled`` blob that says what it holds, or None where
    something in ``obj`` cannot be pickled (an env that holds a socket) or would not come back
    as it was (``EzPickle``): a checkpoint then restores the rest, and the envs start new episodes."""
    buffer = io.BytesIO()
    try:
        _ExactPickler(buffer).dump(dict(vars(obj)))
    except Exception:  # noqa: BLE001 - anything pickling raises: the exact state is optional
        return None
    return Pickled(buffer.getvalue(), what)


def restore_exactly(obj: Any, state: Any) -> bool:
    """Put back every attribute of a worker from its checkpoint state, where that holds them
    (``exact``, loaded because the checkpoint was trusted; bytes: checkpoint formats 1 and 2),
    after closing its envs (``obj.close_envs()``); False where it does not."""
    exact = state if isinstance(state, bytes) else state.get("exact")
    if not isinstance(exact, bytes | Pickled):
        return False
    obj.close_envs()
    unpickle_attributes(obj, exact if isinstance(exact, bytes) else exact.blob)
    return True


def unpickle_attributes(obj: Any, blob: bytes) -> None:
    """Put back what ``pickle_attributes`` captured."""
    vars(obj).update(cloudpickle.loads(blob))
