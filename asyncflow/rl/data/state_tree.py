"""State trees as JSON and arrays: what a checkpoint holds, never code that loading runs.

``encode(tree)`` turns a tree of training state into a JSON-able tree and a dict
of named numpy arrays; ``decode`` turns them back. The kinds a tree may hold:

- ``None``, ``bool``, ``int``, ``str``, ``float`` (NaN and infinities tagged);
- lists, tuples, dicts (any keys), sets and deques;
- numpy arrays (any non-object dtype) and numpy scalars, torch tensors (bfloat16 too),
  ``bytes``: stored as arrays;
- numpy random generators (``Generator`` and the legacy ``RandomState``): their state;
- instances of the classes listed in ``PLAIN_CLASSES`` (asyncflow's own replay buffers,
  frame stores, episode books, normalizer statistics), by their attributes; an instance
  met twice is stored once and comes back shared;
- functions and classes that an import path names (``"package.module:name"``): the path;
  a ``functools.partial`` of one, with arguments of the kinds above: the path and the arguments;
- ``Pickled`` blobs: bytes that only unpickling can turn back into what they were (a
  lambda in a config, an environment mid-episode).

Anything else is a ``TypeError`` when encoding, naming where in the tree it was, so a
checkpoint never pickles something by accident.

Decoding runs no code from the file. It builds only the kinds above; a class instance
only of a class in ``PLAIN_CLASSES`` (``object.__new__``, then its attributes); an import
path is imported (a checkpoint names its env and model classes by import path, as a config
file does), except that a path into Python's standard library is refused (``os:system``).
A ``Pickled`` blob comes back as it is when the caller trusts the file
(``trust_code=True``), else as ``Untrusted``: whoever needs its content decides what to do
without it (``Algorithm.restore``: a config's lambda is an error, an environment mid-episode
starts a new episode).
"""

from __future__ import annotations

import collections
import functools
import importlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import CheckpointError, CheckpointImportError

__all__ = [
    "PLAIN_CLASSES",
    "Pickled",
    "Untrusted",
    "decode",
    "encode",
    "import_path",
    "in_standard_library",
    "storable",
]

PLAIN_CLASSES: dict[str, str] = {
    "ReplayBuffer": "asyncflow.rl.data.replay_buffer",
    "PrioritizedReplayBuffer": "asyncflow.rl.data.replay_buffer",
    "FrameStore": "asyncflow.rl.data.frame_store",
    "SumTree": "asyncflow.rl.data.sum_tree",
    "MinTree": "asyncflow.rl.data.sum_tree",
    "EpisodeBook": "asyncflow.rl.sampling.trajectory",
    "RunningStats": "asyncflow.rl.sampling.normalization",
    "NormalizerState": "asyncflow.rl.sampling.normalization",
    "WorkerNormalizer": "asyncflow.rl.sampling.normalization",
}
"""The classes whose instances a state tree holds by their attributes (name: module).
Each restores from ``__getstate__``'s dict through ``__setstate__`` (or a plain update of
its attributes); none runs anything else when built, or when dropped."""

_DTYPES = {"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8",
           "bool", "complex64", "complex128"}  # fmt: skip
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


@dataclass(frozen=True)
class Pickled:
    """Bytes that only unpickling turns back into an object: code, or an object that holds it."""

    blob: bytes
    what: str = "pickled Python objects"

    def load(self) -> Any:
        import cloudpickle

        return cloudpickle.loads(self.blob)


@dataclass(frozen=True)
class Untrusted:
    """Stands for a ``Pickled`` blob that was not loaded: the caller did not trust the file."""

    where: str
    what: str


def storable(value: Any) -> bool:
    """Whether ``encode`` stores ``value`` without a ``Pickled`` blob (a callable by its import
    path, a partial of one with plain arguments, or data)."""
    try:
        encode(value)
    except TypeError:
        return False
    return True


def import_path(value: Any) -> str | None:
    """``"module:qualname"`` that imports back to ``value`` itself (a module-level function or
    class), or None (a lambda, a closure, a class defined in ``__main__``)."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__" or "<" in qualname:
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 - anything that does not import back is stored by value
        return None
    return f"{module}:{qualname}" if found is value else None


# -- encoding -------------------------------------------------------------------------------


class _Encoder:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.dtypes: dict[str, str] = {}  # arrays stored as raw bits of another dtype (bfloat16)
        self.seen: dict[int, int] = {}  # id(plain object) -> its number
        self.keep: list[Any] = []  # the objects numbered, alive while encoding (their ids stay theirs)

    def array(self, path: str, value: np.ndarray) -> str:
        path = path.lstrip("/")
        name, n = path or "value", 1
        while name in self.arrays:
            n += 1
            name = f"{path}#{n}"
        self.arrays[name] = value
        return name

    def __call__(self, value: Any, path: str) -> Any:
        if isinstance(value, np.generic):  # before float: np.float64 is one
            if value.dtype.name not in _DTYPES:
                raise TypeError(f"{path or 'the state'}: a numpy {value.dtype} scalar cannot be stored safely")
            return {"$scalar": self.array(path, np.asarray(value))}
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, Pickled):
            return {"$pickle": self.array(path, np.frombuffer(value.blob, np.uint8)), "what": value.what}
        if isinstance(value, np.ndarray):
            if value.dtype.name not in _DTYPES:
                raise TypeError(f"{path or 'the state'}: an array of dtype {value.dtype} cannot be stored safely")
            return {"$array": self.array(path, value)}
        if isinstance(value, bytes | bytearray):
            return {"$bytes": self.array(path, np.frombuffer(bytes(value), np.uint8))}
        if isinstance(value, tuple):
            return {"$tuple": [self(v, f"{path}/{i}") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self(v, f"{path}/{i}") for i, v in enumerate(value)]
        if isinstance(value, collections.deque):
            return {"$deque": [self(v, f"{path}/{i}") for i, v in enumerate(value)], "maxlen": value.maxlen}
        if isinstance(value, set | frozenset):
            return {"$set": [self(v, f"{path}/{i}") for i, v in enumerate(sorted(value, key=repr))]}
        if isinstance(value, dict):
            return self.mapping(value, path)
        if isinstance(value, np.random.Generator):
            return {"$rng": self(value.bit_generator.state, f"{path}/rng")}
        if isinstance(value, np.random.RandomState):
            return {"$random_state": self(value.get_state(legacy=True), f"{path}/rng")}
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(value, torch.Tensor):
            return self.tensor(torch, value, path)
        name = type(value).__name__
        if PLAIN_CLASSES.get(name) == type(value).__module__:
            return self.plain_object(value, name, path)
        if isinstance(value, functools.partial) and (where := import_path(value.func)) is not None:
            return {"$partial": where, "args": self(list(value.args), f"{path}/args"),
                    "keywords": self(dict(value.keywords), f"{path}/keywords")}  # fmt: skip
        if isinstance(value, type) or callable(value):
            where = import_path(value)
            if where is not None:
                return {"$import": where}
            raise TypeError(f"{path or 'the state'}: {value!r} has no import path (a lambda, a closure, or "
                            "defined in __main__); store it as Pickled")  # fmt: skip
        raise TypeError(f"{path or 'the state'}: a {type(value).__qualname__} cannot be stored safely")

    def mapping(self, value: dict[Any, Any], path: str) -> Any:
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: self(v, f"{path}/{k}") for k, v in value.items()}
        return {
            "$dict": [[self(k, f"{path}/key{i}"), self(v, f"{path}/{k}")] for i, (k, v) in enumerate(value.items())]
        }

    def tensor(self, torch: Any, value: Any, path: str) -> Any:
        tensor = value.detach().to("cpu")
        if tensor.dtype == torch.bfloat16:
            name = self.array(path, tensor.contiguous().view(torch.int16).numpy().view(np.uint16).copy())
            self.dtypes[name] = "bfloat16"
            return {"$tensor": name, "dtype": "bfloat16"}
        array = tensor.numpy()
        if array.dtype.name not in _DTYPES:
            raise TypeError(f"{path or 'the state'}: a tensor of dtype {tensor.dtype} cannot be stored safely")
        return {"$tensor": self.array(path, array.copy())}

    def plain_object(self, value: Any, name: str, path: str) -> Any:
        number = self.seen.get(id(value))
        if number is not None:
            return {"$ref": number}
        number = self.seen[id(value)] = len(self.seen)
        self.keep.append(value)
        state = value.__getstate__()
        if not isinstance(state, dict):
            raise TypeError(f"{path}: a {name}'s __getstate__ must return a dict of its attributes")
        return {"$object": name, "id": number, "state": self(state, path)}


def encode(tree: Any) -> tuple[Any, dict[str, np.ndarray], dict[str, str]]:
    """``tree`` as ``(json_tree, arrays, raw_dtypes)``: ``arrays`` by name, and for the names
    stored as raw bits of another dtype, that dtype ("bfloat16" tensors are kept as uint16)."""
    encoder = _Encoder()
    return encoder(tree, ""), encoder.arrays, encoder.dtypes


# -- decoding -------------------------------------------------------------------------------


def _damaged(what: str) -> CheckpointError:
    return CheckpointError(f"damaged state: {what}")


class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray], trust_code: bool, imports: bool) -> None:
        self.arrays = arrays
        self.trust_code = trust_code
        self.imports = imports
        self.objects: dict[int, Any] = {}

    def array(self, name: Any) -> np.ndarray:
        if not isinstance(name, str) or name not in self.arrays:
            raise _damaged(f"no array {name!r}")
        return self.arrays[name]

    def __call__(self, value: Any, path: str) -> Any:
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self(v, f"{path}/{i}") for i, v in enumerate(value)]
        if not isinstance(value, dict):
            raise _damaged(f"{path}: {type(value).__name__}")
        tag = next((k for k in value if k.startswith("$")), None)
        if tag is None:
            return {k: self(v, f"{path}/{k}") for k, v in value.items()}
        body = value[tag]
        if tag == "$float":
            if body not in ("nan", "inf", "-inf"):
                raise _damaged(f"{path}: float {body!r}")
            return float(body)
        if tag == "$array":
            return self.array(body)
        if tag == "$scalar":
            return self.array(body)[()]
        if tag == "$bytes":
            return self.array(body).tobytes()
        if tag == "$tensor":
            return self.tensor(body, value.get("dtype"))
        if tag == "$tuple":
            return tuple(self(v, f"{path}/{i}") for i, v in enumerate(self.items(body, path)))
        if tag == "$deque":
            maxlen = value.get("maxlen")
            items = [self(v, f"{path}/{i}") for i, v in enumerate(self.items(body, path))]
            return collections.deque(items, maxlen if isinstance(maxlen, int) else None)
        if tag == "$set":
            return {self(v, f"{path}/{i}") for i, v in enumerate(self.items(body, path))}
        if tag == "$dict":
            return {self(k, path): self(v, f"{path}/{i}") for i, (k, v) in enumerate(self.pairs(body, path))}
        if tag == "$rng":
            return self.generator(self(body, path), path)
        if tag == "$random_state":
            rng = np.random.RandomState()
            try:
                rng.set_state(self(body, path))
            except (TypeError, ValueError) as exc:
                raise _damaged(f"{path}: a random state ({exc})") from None
            return rng
        if tag == "$object":
            return self.plain_object(body, value, path)
        if tag == "$ref":
            if body not in self.objects:
                raise _damaged(f"{path}: a reference to object {body!r} before it")
            return self.objects[body]
        if tag in ("$import", "$partial"):
            if not self.imports:
                raise _damaged(f"{path}: an import path ({body!r}) where only data belongs")
            found = resolve_import(body, path)
            if tag == "$import":
                return found
            args, keywords = self(value.get("args"), f"{path}/args"), self(value.get("keywords"), f"{path}/keywords")
            if not isinstance(args, list) or not isinstance(keywords, dict):
                raise _damaged(f"{path}: the arguments of a partial")
            return functools.partial(found, *args, **keywords)
        if tag == "$pickle":
            what = str(value.get("what", "pickled Python objects"))
            blob = self.array(body).tobytes()
            return Pickled(blob, what) if self.trust_code else Untrusted(path, what)
        raise _damaged(f"{path}: unknown tag {tag!r}")

    @staticmethod
    def items(body: Any, path: str) -> list[Any]:
        if not isinstance(body, list):
            raise _damaged(f"{path}: {type(body).__name__}, not a list")
        return body

    def pairs(self, body: Any, path: str) -> Iterator[tuple[Any, Any]]:
        for pair in self.items(body, path):
            if not isinstance(pair, list) or len(pair) != 2:
                raise _damaged(f"{path}: a dict entry that is not a pair")
            yield pair[0], pair[1]

    def tensor(self, name: Any, dtype: Any) -> Any:
        import torch

        array = self.array(name)
        if dtype == "bfloat16":
            return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
        return torch.from_numpy(np.array(array))

    def generator(self, state: Any, path: str) -> np.random.Generator:
        name = state.get("bit_generator") if isinstance(state, dict) else None
        if name not in _BIT_GENERATORS:
            raise _damaged(f"{path}: bit generator {name!r}")
        bits = getattr(np.random, name)()
        try:
            bits.state = state
        except (TypeError, ValueError, KeyError) as exc:
            raise _damaged(f"{path}: a {name} state ({exc})") from None
        return np.random.Generator(bits)

    def plain_object(self, name: Any, value: dict[str, Any], path: str) -> Any:
        module = PLAIN_CLASSES.get(name) if isinstance(name, str) else None
        number = value.get("id")
        if module is None or not isinstance(number, int) or number in self.objects:
            raise _damaged(f"{path}: object {name!r}")
        cls = getattr(importlib.import_module(module), name)
        obj = cls.__new__(cls)
        self.objects[number] = obj  # before its attributes: they may refer back to it
        state = self(value.get("state"), path)
        if not isinstance(state, dict):
            raise _damaged(f"{path}: the attributes of a {name}")
        setstate: Callable[[dict[str, Any]], None] | None = getattr(obj, "__setstate__", None)
        if setstate is not None:
            setstate(state)
        else:
            vars(obj).update(state)
        return obj


def in_standard_library(module: str) -> bool:
    """Whether ``module`` (dotted) is part of Python's standard library, the builtins included."""
    top = module.partition(".")[0]
    return top in sys.stdlib_module_names or top == "builtins"


def resolve_import(path_spec: Any, where: str = "") -> Any:
    """The function or class ``"module:qualname"`` names; a ``CheckpointImportError`` where its
    module cannot be imported here, a ``CheckpointError`` for the standard library's names."""
    if not isinstance(path_spec, str) or path_spec.count(":") != 1:
        raise _damaged(f"{where}: import path {path_spec!r}")
    module, qualname = path_spec.split(":")
    if not module or not qualname or in_standard_library(module):
        raise CheckpointError(f"{where or 'the state'} names {path_spec!r}, in Python's standard library: a "
                              "checkpoint names only the env, model and function of a run, never the "
                              "standard library's (os:system)")  # fmt: skip
    try:
        found: Any = importlib.import_module(module)
    except ImportError as exc:
        raise CheckpointImportError(f"it needs module {module!r}, which cannot be imported here ({exc}); make it "
                                    "importable (PYTHONPATH) and retry", module) from exc  # fmt: skip
    try:
        for part in qualname.split("."):
            found = getattr(found, part)
    except AttributeError:
        raise CheckpointImportError(f"module {module!r} here has no {qualname!r}, which it needs (was it "
                                    "renamed?)", module) from None  # fmt: skip
    if not callable(found):
        raise CheckpointError(f"{where or 'the state'} names {path_spec!r}, which is not a function or class")
    return found


def decode(tree: Any, arrays: dict[str, np.ndarray], *, trust_code: bool = False, imports: bool = False) -> Any:
    """What ``encode`` took apart; ``Pickled`` blobs come back only with ``trust_code``, and import
    paths are followed only with ``imports`` (a config's env and model; data holds none)."""
    try:
        return _Decoder(arrays, trust_code, imports)(tree, "")
    except RecursionError:
        raise _damaged("nested too deeply") from None
