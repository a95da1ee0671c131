"""The Ray side of the ``ray`` backend: the Ray actor that hosts one of our actors.

One ``Host`` per asyncflow actor. It unpickles the constructor the driver sent
(the same payload as the process backend), builds the object, and serves calls
on the Ray actor's event loop, the way ``_worker`` serves them from its rings:
sync methods run inline, in call order; ``async def`` methods run as tasks, so
they overlap.

Call order: Ray does not keep the submission order of calls to an async actor
(measured: of 2,000 calls in flight, some ran out of order). Every call
carries the driver's sequence number, and a call waits until those before it
have started. A cancelled or unsendable call is skipped through ``cancel``.

Results travel as ``(True, value)`` and errors as ``(False, pack_error(...))``,
so that an exception comes back with its own type and the remote traceback as
``__cause__``, exactly as on the process backend. Values go back to Ray as
they are: numpy arrays travel out of band in Ray's own serializer, with no
pickling of ours in between.

Ray hands over a large array as a read-only view of its object store; both ends
replace those with writable copies (``own_arrays``), so that an actor or a
learner may write into what it received, as on the process backend (whose
arrays are copied out of the ring: the same one copy).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
from typing import Any

import numpy as np

from ._protocol import pack_error
from ._serialize import loads
from ._worker import close_actor_object, limit_threads, method_table

__all__ = ["Host", "own_arrays"]


class Host:
    """Plain class; ``_ray.host_class`` turns it into a Ray actor class."""

    def __init__(self, name: str, payload: bytes, torch_threads: int | None) -> None:
        self.name = name
        self.payload = payload
        limit_threads(torch_threads)
        self.obj: Any = None
        self.methods: dict[str, tuple[Any, bool]] = {}
        self.next_seq = 1  # the driver numbers its calls from 1
        self.turns: dict[int, asyncio.Future[None]] = {}
        self.skipped: set[int] = set()
        self.tasks: dict[int, asyncio.Task[Any]] = {}

    async def start(self) -> tuple[bool, Any]:
        """Build the object: ``(True, (method table, pid, node id))`` or a packed error."""
        try:
            factory, args, kwargs = loads(self.payload)
            obj = factory(*args, **kwargs)
            if inspect.isawaitable(obj):
                obj = await obj
            table = method_table(obj)
        except Exception as exc:  # noqa: BLE001 - reported to spawn()
            return False, pack_error(exc, f"while constructing actor {self.name!r}")
        self.obj = obj
        self.methods = {name: (getattr(obj, name), is_async) for name, is_async in table.items()}
        import ray

        return True, (table, os.getpid(), ray.get_runtime_context().get_node_id())

    async def call(self, seq: int, method: str, kwargs: dict[str, Any], *args: Any) -> tuple[bool, Any]:
        # Positional arguments come last and unpacked: Ray resolves an ObjectRef
        # among them (``Runtime.share``) to its value before this runs.
        if seq in self.skipped:
            self.skipped.discard(seq)
            return True, None  # cancelled before it arrived
        if seq != self.next_seq:
            turn = self.turns[seq] = asyncio.get_running_loop().create_future()
            try:
                await turn
            except asyncio.CancelledError:
                if turn.cancelled() and not _current_task_cancelling():
                    self.skipped.discard(seq)
                    return True, None  # cancelled through cancel() while it waited
                raise
        bound, is_async = self.methods[method]
        try:
            result = bound(*own_arrays(args), **own_arrays(kwargs))
        except Exception as exc:  # noqa: BLE001 - travels back to the caller
            return False, pack_error(exc)
        finally:
            self._advance(seq)
        if not (is_async or (result is not None and inspect.isawaitable(result))):
            return True, result
        task = self.tasks[seq] = asyncio.ensure_future(result)
        try:
            return True, await task
        except asyncio.CancelledError:
            if task.cancelled() and not _current_task_cancelling():
                return True, None  # cancelled through cancel(): nobody waits for the answer
            raise
        except Exception as exc:  # noqa: BLE001 - travels back to the caller
            return False, pack_error(exc)
        finally:
            self.tasks.pop(seq, None)

    def _advance(self, seq: int) -> None:
        """Call ``seq`` has started: let the next one that has arrived go."""
        self.next_seq = seq + 1
        while self.next_seq in self.skipped:
            self.next_seq += 1
        turn = self.turns.pop(self.next_seq, None)
        if turn is not None and not turn.done():
            turn.set_result(None)

    async def cancel(self, seq: int) -> None:
        """Cancel call ``seq``: its task if it runs, or its turn if it has not started."""
        task = self.tasks.get(seq)
        if task is not None:
            task.cancel()
            return
        if seq < self.next_seq:
            return  # it started and finished (or it was a sync call, which runs to its end)
        turn = self.turns.pop(seq, None)
        if turn is not None:  # waiting for its turn: it will not run
            turn.cancel()
        self.skipped.add(seq)
        if seq == self.next_seq:
            self._advance(seq)

    async def wait_forever(self) -> None:
        """Never returns: the driver learns of this actor's death when this call fails."""
        await asyncio.Event().wait()

    async def close(self) -> None:
        """The polite stop: cancel what runs, then the object's own ``aclose()``."""
        for task in list(self.tasks.values()):
            task.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks.values()))
        obj, self.obj = self.obj, None
        await close_actor_object(obj)


def own_arrays(value: Any, depth: int = 0) -> Any:
    """``value`` with every read-only numpy array in it (Ray's zero-copy views) replaced by a
    writable copy: in place in dicts, lists and dataclasses, rebuilt in plain tuples."""
    if isinstance(value, np.ndarray):
        return value if value.flags.writeable else value.copy()
    if depth >= 8 or isinstance(value, str | bytes | int | float | type(None)):
        return value
    if isinstance(value, dict):
        for key, item in value.items():
            mine = own_arrays(item, depth + 1)
            if mine is not item:
                value[key] = mine
    elif isinstance(value, list):
        for i, item in enumerate(value):
            mine = own_arrays(item, depth + 1)
            if mine is not item:
                value[i] = mine
    elif type(value) is tuple:
        mine = tuple(own_arrays(item, depth + 1) for item in value)
        if any(a is not b for a, b in zip(mine, value, strict=True)):
            return mine
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            item = getattr(value, f.name, None)
            mine = own_arrays(item, depth + 1)
            if mine is not item:
                object.__setattr__(value, f.name, mine)  # frozen ones too: the object is ours
    return value


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
