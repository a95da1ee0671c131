"""The checkpoint file: a header line, a format version, then a pickle.

Written to a temporary name in the same folder, flushed to disk, then
renamed over the target, so a process that dies while saving leaves the
previous checkpoint (or none), never half a file. Reading checks the header
first: a file that is not ours, or is cut short, is a ``CheckpointError``
that says so, not an unpickling traceback.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import cloudpickle

from ..errors import CheckpointError

__all__ = ["read_checkpoint", "write_checkpoint"]

MAGIC = b"ASYNCFLOW-CHECKPOINT\n"
VERSION = 1


def write_checkpoint(path: str | os.PathLike[str], payload: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            f.write(f"{VERSION}\n".encode())
            f.write(cloudpickle.dumps(payload))  # by value: configs may hold lambdas or __main__ classes
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(path)
    try:
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                raise CheckpointError(f"{path} is not an asyncflow checkpoint")
            version = f.readline().strip()
            if version != str(VERSION).encode():
                raise CheckpointError(f"{path} has checkpoint format {version.decode(errors='replace')!r}; "
                                      f"this asyncflow reads format {VERSION}")  # fmt: skip
            body = f.read()
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from exc
    try:
        payload = pickle.loads(body)
    except Exception as exc:
        raise CheckpointError(f"{path} is damaged (truncated or corrupt): {type(exc).__name__}: {exc}") from exc
    if not isinstance(payload, dict) or "algorithm" not in payload:
        raise CheckpointError(f"{path} does not hold an algorithm's state")
    return payload
