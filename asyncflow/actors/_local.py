"""The ``local`` backend: the same interface with the object in this process.

Sync methods run inline at the call, in call order, so a program is exactly
reproducible and pdb stops inside the actor. ``async def`` methods run as
tasks on the caller's loop. Exceptions are the originals, with their real
tracebacks. Arguments are passed by reference, not copied.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable
from typing import Any

from ..errors import ClosedError
from ._worker import close_actor_object, method_table

__all__ = ["LocalTransport"]


class LocalTransport:
    def __init__(self, name: str, factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.name = name
        self.methods: dict[str, bool] = {}
        self.pid: int | None = None
        self.node_id: str | None = None
        self.notify_errors: list[BaseException] = []
        self.calls_completed = 0
        self._factory, self._args, self._kwargs = factory, args, kwargs
        self._obj: Any = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False

    async def start(self) -> None:
        obj = self._factory(*self._args, **self._kwargs)
        if inspect.isawaitable(obj):
            obj = await obj
        self._obj = obj
        self.methods = method_table(obj)
        self.pid = os.getpid()

    @property
    def alive(self) -> bool:
        return not self._stopped

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    bytes_moved = 0

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
        if self._stopped:
            raise ClosedError(f"actor {self.name!r} was stopped")
        loop = asyncio.get_running_loop()
        self.calls_completed += 1
        bound = getattr(self._obj, method)
        if self.methods[method]:
            task = loop.create_task(bound(*args, **kwargs))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return task
        future = loop.create_future()
        try:
            result = bound(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - delivered at the await, like the process backend
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future

    def notify(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        future = self.call(method, args, kwargs)

        def keep_error(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is not None:
                self.notify_errors.append(f.exception())  # type: ignore[arg-type]

        future.add_done_callback(keep_error)

    async def drain(self) -> None:
        """Nothing is ever buffered in-process."""

    @property
    def backlogged(self) -> bool:
        return False

    async def stop(self) -> None:
        self._stopped = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))
        obj, self._obj = self._obj, None
        await close_actor_object(obj)

    async def kill(self) -> None:
        raise RuntimeError(f"actor {self.name!r} runs in this process (the local backend): it cannot be killed")

    def kill_now(self) -> None:
        self._stopped = True
