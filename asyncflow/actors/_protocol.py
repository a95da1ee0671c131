"""The few message kinds that travel between a driver and an actor, and how
errors are packed so that their type survives when it can."""

from __future__ import annotations

import pickle
import traceback
from enum import IntEnum
from typing import Any

import cloudpickle

from ..errors import RemoteError, RemoteTraceback

__all__ = ["Kind", "pack_error", "unpack_error"]


class Kind(IntEnum):
    # driver -> actor
    CALL = 1  # tag = call id; payload = (method, args, kwargs)
    NOTIFY = 2  # tag = 0; same payload; no reply unless it fails
    CANCEL = 3  # tag = call id of an async method to cancel
    STOP = 4  # finish and exit
    # actor -> driver
    READY = 5  # payload = {method name: is coroutine function}, or an error
    OK = 6  # tag = call id; payload = result
    ERROR = 7  # tag = call id (0 for a failed notify); payload = pack_error(...)


PackedError = tuple[bytes | None, str, str, str]


def pack_error(exc: BaseException, context: str = "") -> PackedError:
    """The exception pickled on its own, plus its type name, message and traceback."""
    tb = "".join(traceback.format_exception(exc))
    if context:
        tb = f"{context}\n{tb}"
    try:
        blob: bytes | None = cloudpickle.dumps(exc, protocol=5)
    except Exception:  # noqa: BLE001 - the type name and text still travel
        blob = None
    kind = type(exc)
    return blob, f"{kind.__module__}.{kind.__qualname__}", str(exc), tb


def unpack_error(packed: PackedError) -> BaseException:
    """Rebuild the exception with the remote traceback as its cause."""
    blob, type_name, message, tb = packed
    exc: BaseException | None = None
    if blob is not None:
        try:
            exc = pickle.loads(blob)
        except Exception:  # noqa: BLE001 - fall back to RemoteError below
            exc = None
    if not isinstance(exc, BaseException):
        exc = RemoteError(type_name, message)
    exc.__cause__ = RemoteTraceback(tb)
    return exc


def describe(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"
