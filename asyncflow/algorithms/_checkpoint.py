"""The checkpoint file: a safetensors file, whose arrays are the run's and whose metadata
holds the rest of its state as JSON. Loading it runs no code from it.

Layout (safetensors, so its tools read the arrays too)::

    8 bytes     N, the header's length (little-endian)
    N bytes     JSON: {"__metadata__": {"format": "asyncflow-checkpoint", "version": "3",
                        "algorithm": "ppo", "sha256": ..., "config": JSON, "state": JSON},
                       "learner/model/encoder.0.weight": {"dtype": "F32", "shape": [...],
                                                          "data_offsets": [begin, end]}, ...}
    the arrays, one after another, widest dtypes first (each stays aligned)

The state tree (``rl/data/state_tree.py``) refers to the arrays by name. ``sha256`` covers the
config, the state, the array index and the data: a file damaged in place (a flipped byte in
the weights) is a ``CheckpointError`` that says so, not a run that trains on garbage. It is
not a signature: the format is safe because nothing in it is executed, not because of it.

Two things a file may hold that only unpickling brings back, each loaded only when the
caller trusts the file (``trust_code=True``, ``--trust-code``), and each named in the
refusal otherwise: a config value with no import path (a lambda, a class defined in
``__main__``), and the environments of each worker mid-episode. Without them a run
resumes with new episodes, as RLlib's and Stable-Baselines3's do. Files of formats 1
and 2 (before 2026-12) are pickles from end to end: they load behind the same opt-in.

Written to a temporary file created exclusively in the same folder (``mkstemp``: a name
nobody can predict, mode 0600, never through a symlink), flushed to disk, then renamed
over the target: a process that dies while saving leaves the previous checkpoint (or
none), never half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pickle
import re
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._fields import is_config
from ..errors import CheckpointError, CheckpointImportError, CheckpointTrustError, ConfigError
from ..rl.data.state_tree import decode, encode, in_standard_library

__all__ = ["FORMAT", "VERSION", "read_checkpoint", "write_checkpoint", "write_exclusively"]

FORMAT = "asyncflow-checkpoint"
VERSION = 3
LEGACY_MAGIC = b"ASYNCFLOW-CHECKPOINT\n"  # formats 1 and 2: a header line, then a pickle
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit

_CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32", "int16": "I16",
          "int8": "I8", "uint64": "U64", "uint32": "U32", "uint16": "U16", "uint8": "U8", "bool": "BOOL",
          "complex64": "C64", "complex128": "C128"}  # fmt: skip
_DTYPES = {code: np.dtype(name) for name, code in _CODES.items()}
_DTYPES["BF16"] = np.dtype(np.uint16)  # bfloat16 tensors: their bits (the state tree says what they are)


def write_checkpoint(path: str | os.PathLike[str], payload: dict[str, Any]) -> Path:
    """Write ``payload`` (a state tree with ``"algorithm"`` and ``"config"``) to ``path``, atomically."""
    path = Path(path)
    tree, arrays, raw = encode(payload)
    config = json.dumps(tree.pop("config", None), allow_nan=False)
    state = json.dumps(tree, allow_nan=False)
    order = sorted(arrays, key=lambda name: -arrays[name].dtype.itemsize)  # widest first: every array aligned
    index: dict[str, Any] = {}
    offset = 0
    for name in order:
        array = arrays[name]
        end = offset + array.nbytes
        index[name] = {"dtype": "BF16" if raw.get(name) == "bfloat16" else _CODES[array.dtype.name],
                       "shape": list(array.shape), "data_offsets": [offset, end]}  # fmt: skip
        offset = end
    digest = _digest(config, state, index, (_bytes_of(arrays[name]) for name in order))
    metadata = {"format": FORMAT, "version": str(VERSION), "algorithm": str(payload.get("algorithm", "")),
                "sha256": digest, "config": config, "state": state}  # fmt: skip
    header = json.dumps({"__metadata__": metadata, **index}, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)  # the data starts 8-byte aligned

    def write(f: io.BufferedWriter) -> None:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        for name in order:
            f.write(_bytes_of(arrays[name]))

    return write_exclusively(path, write)


def write_exclusively(path: Path, write: Any) -> Path:
    """Call ``write(file)`` on a new temporary file beside ``path`` (created exclusively, mode
    0600), flush it to disk, and rename it over ``path``; on any error, remove it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself, on disk (not every file system can)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    return path


def _bytes_of(array: np.ndarray) -> memoryview:
    contiguous = np.ascontiguousarray(array)
    if contiguous.dtype.byteorder == ">":
        contiguous = contiguous.astype(contiguous.dtype.newbyteorder("<"))
    return memoryview(contiguous).cast("B")  # type: ignore[arg-type]


def _digest(config: str, state: str, index: dict[str, Any], data: Iterator[memoryview]) -> str:
    h = hashlib.sha256()
    h.update(config.encode())
    h.update(b"\0")
    h.update(state.encode())
    h.update(b"\0")
    h.update(json.dumps(index, sort_keys=True).encode())
    for chunk in data:
        h.update(chunk)
    return h.hexdigest()


def read_checkpoint(path: str | os.PathLike[str], *, trust_code: bool = False) -> dict[str, Any]:
    """The payload ``write_checkpoint`` wrote. Its ``Pickled`` parts come back only with
    ``trust_code`` (else as ``Untrusted``); a file of format 1 or 2 needs ``trust_code``."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = bytearray(size)  # writable: the arrays are views of it (a replay buffer is not copied)
            f.readinto(data)
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from exc
    if data.startswith(LEGACY_MAGIC):
        return _read_legacy(path, bytes(data), trust_code)
    metadata, index, start = _header(path, data)
    arrays = _arrays(path, data, index, start)
    config, state = metadata.get("config"), metadata.get("state")
    if not isinstance(config, str) or not isinstance(state, str):
        raise CheckpointError(f"{path} is damaged: its metadata has no config or state")
    order = sorted(index, key=lambda name: index[name]["data_offsets"][0])
    view = memoryview(data)
    spans = ((start + index[n]["data_offsets"][0], start + index[n]["data_offsets"][1]) for n in order)
    digest = _digest(config, state, index, (view[begin:end] for begin, end in spans))
    if digest != metadata.get("sha256"):
        raise CheckpointError(f"{path} is damaged: checksum mismatch (the payload is not what was written)")
    try:
        payload = decode(json.loads(state), arrays, trust_code=trust_code)
        payload["config"] = decode(json.loads(config), arrays, trust_code=trust_code, imports=True)
        _refuse_standard_library(payload["config"], "config")
    except CheckpointImportError as exc:
        raise CheckpointImportError(f"{path} is a sound checkpoint, but {exc}", exc.module) from exc
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"{path} is damaged: {type(exc).__name__}: {exc}") from exc
    if not isinstance(payload, dict) or not payload.get("algorithm"):
        raise CheckpointError(f"{path} does not hold an algorithm's state")
    return payload  # type: ignore[no-any-return]


IMPORT_PATH = re.compile(r"([A-Za-z_][\w.]*):[A-Za-z_][\w.]*")
"""A string shaped as ``"module:name"``, which a config resolves as code where it takes code (an
env, a model, a policy mapping, a league's players)."""


def _refuse_standard_library(tree: Any, where: str) -> None:
    """A ``CheckpointError`` for a plain string in the config that names the standard library's
    code: decoding refuses such import paths (``resolve_import``), and a string where a config
    takes code would be imported as one (``"os:system"`` as a model or a policy mapping)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            _refuse_standard_library(value, f"{where}.{key}")
    elif isinstance(tree, list | tuple):
        for i, value in enumerate(tree):
            _refuse_standard_library(value, f"{where}[{i}]")
    elif isinstance(tree, str) and (found := IMPORT_PATH.fullmatch(tree)) and in_standard_library(found.group(1)):
        raise CheckpointError(f"{where} names {tree!r}, in Python's standard library: a checkpoint names only "
                              "the env, model and function of a run, never the standard library's")  # fmt: skip


def _header(path: Path, data: bytearray) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The metadata, the array index and where the data starts."""
    ours = b'{"__metadata__":{"format":"' + FORMAT.encode()
    if len(data) < 8:
        raise CheckpointError(f"{path} is not an asyncflow checkpoint (only {len(data)} bytes)")
    (length,) = struct.unpack("<Q", bytes(data[:8]))
    if not data[8:].startswith(ours):
        raise CheckpointError(f"{path} is not an asyncflow checkpoint")
    if length > MAX_HEADER_BYTES or 8 + length > len(data):
        raise CheckpointError(f"{path} is damaged (truncated or corrupt): its header is cut short")
    try:
        header = json.loads(bytes(data[8 : 8 + length]))
        metadata = header.pop("__metadata__")
    except (ValueError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"{path} is damaged (truncated or corrupt): its header ({exc})") from None
    if metadata.get("version") != str(VERSION):
        raise CheckpointError(f"{path} has checkpoint format {metadata.get('version')!r}; this asyncflow reads "
                              f"formats 1 to {VERSION}")  # fmt: skip
    return metadata, header, 8 + length


def _arrays(path: Path, data: bytearray, index: dict[str, Any], start: int) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for name, entry in index.items():
        try:
            dtype = _DTYPES[entry["dtype"]]
            shape = tuple(int(n) for n in entry["shape"])
            begin, end = (int(n) for n in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path} is damaged: array {name!r} is described wrongly") from None
        count = int(np.prod(shape, dtype=np.int64))
        if min(shape, default=0) < 0 or not 0 <= begin <= end or end - begin != count * dtype.itemsize:
            raise CheckpointError(f"{path} is damaged: array {name!r} is described wrongly")
        if start + end > len(data):
            raise CheckpointError(f"{path} is damaged (truncated): it ends before array {name!r}")
        arrays[name] = np.frombuffer(data, dtype, count, start + begin).reshape(shape)
    return arrays


# -- formats 1 and 2 -------------------------------------------------------------------------


_MOVED: dict[str, str] = {
    "asyncflow.rl.action_mask": "asyncflow.rl.envs.action_mask",
    "asyncflow.rl.actor_critic": "asyncflow.rl.policies.actor_critic",
    "asyncflow.rl.async_env": "asyncflow.rl.envs.async_env",
    "asyncflow.rl.async_worker": "asyncflow.rl.sampling.async_worker",
    "asyncflow.rl.atari": "asyncflow.rl.envs.atari",
    "asyncflow.rl.attributes": "asyncflow.rl.sampling.attributes",
    "asyncflow.rl.continuous": "asyncflow.rl.policies.continuous",
    "asyncflow.rl.device": "asyncflow.rl.learners.device",
    "asyncflow.rl.env": "asyncflow.rl.envs.make",
    "asyncflow.rl.env_checks": "asyncflow.rl.envs.checks",
    "asyncflow.rl.evaluation_worker": "asyncflow.rl.sampling.evaluation_worker",
    "asyncflow.rl.frame_store": "asyncflow.rl.data.frame_store",
    "asyncflow.rl.multi_agent": "asyncflow.rl.envs.multi_agent",
    "asyncflow.rl.multi_agent_worker": "asyncflow.rl.sampling.multi_agent_worker",
    "asyncflow.rl.nets": "asyncflow.rl.models.nets",
    "asyncflow.rl.normalization": "asyncflow.rl.sampling.normalization",
    "asyncflow.rl.numpy_policy": "asyncflow.rl.policies.numpy_policy",
    "asyncflow.rl.optim": "asyncflow.rl.learners.optim",
    "asyncflow.rl.postprocessing": "asyncflow.rl.sampling.postprocessing",
    "asyncflow.rl.precision": "asyncflow.rl.learners.precision",
    "asyncflow.rl.q_learning": "asyncflow.rl.policies.epsilon_greedy",
    "asyncflow.rl.random_policy": "asyncflow.rl.policies.random_policy",
    "asyncflow.rl.recurrent": "asyncflow.rl.policies.recurrent",
    "asyncflow.rl.replay_actor": "asyncflow.rl.data.replay_actor",
    "asyncflow.rl.replay_buffer": "asyncflow.rl.data.replay_buffer",
    "asyncflow.rl.rollout_worker": "asyncflow.rl.sampling.rollout_worker",
    "asyncflow.rl.sample_batch": "asyncflow.rl.data.sample_batch",
    "asyncflow.rl.spaces": "asyncflow.rl.envs.spaces",
    "asyncflow.rl.state": "asyncflow.rl.data.state",
    "asyncflow.rl.state_tree": "asyncflow.rl.data.state_tree",
    "asyncflow.rl.sum_tree": "asyncflow.rl.data.sum_tree",
    "asyncflow.rl.trajectory": "asyncflow.rl.sampling.trajectory",
    "asyncflow.rl.tree": "asyncflow.rl.data.tree",
    "asyncflow.rl.vtrace": "asyncflow.rl.learners.vtrace",
    "asyncflow.rl.worker_set": "asyncflow.rl.sampling.worker_set",
}
"""Old module -> new module, for the classes that formats 1 and 2 pickled by reference."""


class _FlatConfig:
    """A config as formats 1 and 2 pickled it, its fields flat (``lr``, ``num_workers``,
    ...): built again, once unpickled, as its class is now (``_modern``), the flat names
    read as the shorthands they are. A name the class no longer has is dropped: the flat
    class gave every algorithm every field (``lam`` to DQN), used or not."""

    target: type

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.state = state


class _LegacyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(_MOVED.get(module, module), name)
        if isinstance(found, type) and is_config(found):
            return type(f"Flat{found.__name__}", (_FlatConfig,), {"target": found})
        return found


def _modern(value: Any) -> Any:
    """``value`` with each ``_FlatConfig`` in it built as its config class is now."""
    if isinstance(value, _FlatConfig):
        cls: Any = value.target
        known = {path.partition(".")[0] for path in cls.__config_paths__} | set(cls.__config_shorthands__)
        return cls.build({k: _modern(v) for k, v in value.state.items() if k in known})
    if isinstance(value, dict):
        return {k: _modern(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_modern(v) for v in value)
    return value


def _read_legacy(path: Path, data: bytes, trust_code: bool) -> dict[str, Any]:
    body_at = data.index(b"\n", len(LEGACY_MAGIC)) + 1 if b"\n" in data[len(LEGACY_MAGIC) :] else len(data)
    header = data[len(LEGACY_MAGIC) : body_at].decode(errors="replace").split()
    version = header[0] if header else ""
    if version not in ("1", "2"):
        raise CheckpointError(f"{path} has checkpoint format {version!r}; this asyncflow reads formats 1 to {VERSION}")
    if not trust_code:
        raise CheckpointTrustError(f"{path} is a checkpoint of format {version}, a pickle, and loading a "
                                   "pickle runs whatever code it holds: load it with trust_code=True "
                                   "(--trust-code) only if you trust who wrote it (saved again, it is in the "
                                   "safe format)")  # fmt: skip
    body = data[body_at:]
    if version == "2":
        expected = header[1].removeprefix("sha256=") if len(header) > 1 else ""
        if hashlib.sha256(body).hexdigest() != expected:
            raise CheckpointError(f"{path} is damaged: checksum mismatch (the payload is not what was written)")
    try:
        payload = _LegacyUnpickler(io.BytesIO(body)).load()
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
    if isinstance(payload.get("workers"), list):  # each worker's attributes as that asyncflow had them
        payload["workers"] = [None] * len(payload["workers"])
    try:
        payload = dict(_modern(payload))
    except ConfigError as exc:
        raise CheckpointError(f"{path}: its config does not fit this asyncflow: {exc}") from exc
    payload["format"] = int(version)
    return payload
