"""The checkpoint file: a header line, a format version and the payload's
SHA-256, then the payload (a pickle).

Written to a temporary name in the same folder, flushed to disk, then
renamed over the target, so a process that dies while saving leaves the
previous checkpoint (or none), never half a file. Reading checks the header
first and the checksum before unpickling anything: a file that is not ours,
cut short, or damaged in place (a flipped byte in the weights unpickles
fine, and would evaluate without a word) is a ``CheckpointError`` that says
so. A sound file whose code cannot be imported here (the env's module) is a
``CheckpointImportError`` naming the module: the file is good, do not
delete it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from pathlib import Path
from typing import Any

import cloudpickle

from ..errors import CheckpointError, CheckpointImportError

__all__ = ["read_checkpoint", "write_checkpoint"]

MAGIC = b"ASYNCFLOW-CHECKPOINT\n"
VERSION = 2  # 2: the header line holds the payload's SHA-256; 1 (still read): no checksum


def write_checkpoint(path: str | os.PathLike[str], payload: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            body = cloudpickle.dumps(payload)  # by value: configs may hold lambdas or __main__ classes
            f.write(MAGIC)
            f.write(f"{VERSION} sha256={hashlib.sha256(body).hexdigest()}\n".encode())
            f.write(body)
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
            header = f.readline().decode(errors="replace").split()
            body = f.read()
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from exc
    version = header[0] if header else ""
    if version == "2":
        expected = header[1].removeprefix("sha256=") if len(header) > 1 else ""
        if hashlib.sha256(body).hexdigest() != expected:
            raise CheckpointError(f"{path} is damaged: checksum mismatch (the payload is not what was written)")
    elif version != "1":
        raise CheckpointError(f"{path} has checkpoint format {version!r}; this asyncflow reads formats 1 and {VERSION}")
    try:
        payload = pickle.loads(body)
    except ImportError as exc:
        module = getattr(exc, "name", None)
        raise CheckpointImportError(f"{path} is a sound checkpoint, but it needs module {module!r}, which cannot be "
                                    f"imported here ({exc}); make it importable (PYTHONPATH) and retry",
                                    module) from exc  # fmt: skip
    except AttributeError as exc:
        missing = re.match(r"Can't get attribute '([^']+)' on <module '([^']+)'", str(exc))
        if missing is None:
            raise CheckpointError(f"{path} is damaged (truncated or corrupt): AttributeError: {exc}") from exc
        name, module = missing.groups()
        raise CheckpointImportError(f"{path} is a sound checkpoint, but module {module!r} here has no {name!r}, "
                                    "which it needs (was it renamed?)", module) from exc  # fmt: skip
    except Exception as exc:
        raise CheckpointError(f"{path} is damaged (truncated or corrupt): {type(exc).__name__}: {exc}") from exc
    if not isinstance(payload, dict) or "algorithm" not in payload:
        raise CheckpointError(f"{path} does not hold an algorithm's state")
    return payload
