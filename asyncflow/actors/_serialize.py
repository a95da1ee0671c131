"""Pickle protocol 5 with numpy arrays and torch CPU tensors out of band.

``Serializer.dumps`` returns the pickle stream plus a list of raw buffers.
The channel writes those buffers straight into shared memory, so a large
array is copied once into the ring and once out of it, never turned into
``bytes`` first.

Plain :mod:`pickle` (the C pickler) does the work because it is several times
faster than cloudpickle. Our ``reducer_override`` sends three things
differently: contiguous numpy arrays and torch CPU tensors as out-of-band
buffers, and classes or functions defined in ``__main__`` by value through
cloudpickle, since actor processes never import the driver's main script.
Anything plain pickle still cannot handle (lambdas, closures) falls back to
cloudpickle as a whole.
"""

from __future__ import annotations

import io
import pickle
import sys
import types
from collections.abc import Sequence
from typing import Any

import cloudpickle
import numpy as np

__all__ = ["Serializer", "dumps_by_value", "loads"]


def _rebuild_array(buf: Any, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    array = np.frombuffer(buf, dtype=dtype)
    return array if len(shape) == 1 else array.reshape(shape)


_dtype_strs: dict[np.dtype[Any], str] = {}


def _dtype_str(dtype: np.dtype[Any]) -> str:
    """``dtype.str``, cached: numpy builds the string anew on each access (0.5 us)."""
    code = _dtype_strs.get(dtype)
    if code is None:
        if len(_dtype_strs) >= 256:  # many string or record dtypes: start over
            _dtype_strs.clear()
        code = _dtype_strs[dtype] = dtype.str
    return code


def _rebuild_tensor(array: np.ndarray, requires_grad: bool) -> Any:
    import torch

    tensor = torch.from_numpy(array)
    if requires_grad:
        tensor.requires_grad_(True)
    return tensor


class _ByValue(Exception):
    """Raised inside the fast pickler: this message needs cloudpickle."""


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is np.ndarray:
            if obj.dtype.hasobject or not obj.flags.c_contiguous:
                return NotImplemented
            return _rebuild_array, (pickle.PickleBuffer(obj), _dtype_str(obj.dtype), obj.shape)
        if kind is type or kind is types.FunctionType:
            if getattr(obj, "__module__", None) == "__main__":
                raise _ByValue
            return NotImplemented
        if kind is pickle.PickleBuffer:  # our own arrays' buffers: the common case
            return NotImplemented
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.Tensor):
            return _reduce_tensor(obj)
        return NotImplemented


def _reduce_tensor(tensor: Any) -> Any:
    # Plain CPU tensors with a numpy dtype take the fast path; anything else
    # (CUDA, bfloat16, sparse) keeps torch's own reduction.
    if tensor.device.type != "cpu" or tensor.is_sparse or tensor.dtype.is_complex:
        return NotImplemented
    try:
        array = tensor.detach().contiguous().numpy()
    except (TypeError, RuntimeError):
        return NotImplemented
    return _rebuild_tensor, (array, tensor.requires_grad)


class Serializer:
    """A reusable pickler; one per sending end (not thread-safe).

    Reusing one pickler with a cleared memo saves about half the cost of
    ``pickle.dumps`` for small messages.
    """

    def __init__(self) -> None:
        self._file = io.BytesIO()
        self._buffers: list[pickle.PickleBuffer] = []
        self._pickler = _Pickler(self._file, protocol=5, buffer_callback=self._buffers.append)

    def dumps(self, obj: object) -> tuple[bytes, list[memoryview]]:
        """Serialize ``obj``; return the pickle stream and its raw buffers."""
        file, buffers = self._file, self._buffers
        file.seek(0)
        file.truncate()
        buffers.clear()
        try:
            self._pickler.dump(obj)
            data = file.getvalue()
            raws = [b.raw() for b in buffers]
        except Exception:  # noqa: BLE001 - whatever fails, cloudpickle gets a try
            cloud: list[pickle.PickleBuffer] = []
            data = cloudpickle.dumps(obj, protocol=5, buffer_callback=cloud.append)
            raws = [b.raw() for b in cloud]
        finally:
            self._pickler.clear_memo()
            buffers.clear()
        return data, raws


def loads(data: Any, buffers: Sequence[Any] = ()) -> Any:
    """Inverse of :meth:`Serializer.dumps`."""
    return pickle.loads(data, buffers=buffers)


def dumps_by_value(obj: object) -> bytes:
    """cloudpickle ``obj`` in band (spawn payloads)."""
    data: bytes = cloudpickle.dumps(obj, protocol=5)
    return data
