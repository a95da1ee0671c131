"""``ActorHandle``: what ``Runtime.spawn`` returns.

``await handle.method(*args)`` (or ``await handle.call(Class.method, *args)``, which a type
checker follows to the method and checks the arguments of; or by name,
``handle.call("method", *args)``) runs a method in the actor; many calls may be in flight at once. A handle
outlives restarts: when its process dies and the restart policy allows, a new
process is built from the same constructor arguments, calls made meanwhile
wait for it, and ``handle.restarts`` counts how often that happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

from ..errors import ActorDiedError, ClosedError, ConfigError

__all__ = ["ActorHandle", "Transport", "check_method_names", "method_name"]

P = ParamSpec("P")
R = TypeVar("R")


def method_name(method: str | Callable[..., Any]) -> str:
    """The name of an actor method given by name or as the method itself (``Class.method``)."""
    return method if isinstance(method, str) else method.__name__


class Transport(Protocol):
    name: str
    methods: dict[str, bool]
    pid: int | None
    node_id: str | None
    notify_errors: list[BaseException]
    calls_completed: int

    async def start(self) -> None: ...
    async def drain(self) -> None: ...
    async def stop(self) -> None: ...
    @property
    def backlogged(self) -> bool: ...
    async def kill(self) -> None: ...
    def kill_now(self) -> None: ...
    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> asyncio.Future[Any]: ...
    def notify(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None: ...
    @property
    def alive(self) -> bool: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def bytes_moved(self) -> int: ...


def check_method_names(type_name: str, methods: Iterable[str]) -> None:
    """A ``ConfigError`` for an actor whose methods include one of ``ActorHandle.RESERVED``."""
    taken = sorted(set(methods) & ActorHandle.RESERVED)
    if taken:
        names, them = ", ".join(f"{n}()" for n in taken), "it" if len(taken) == 1 else "them"
        raise ConfigError(f"actor {type_name} has {names}, which an ActorHandle uses for itself "
                          f"(handle.{taken[0]} is the handle's own): rename {them}")  # fmt: skip


class _Method:
    __slots__ = ("_handle", "_name")

    def __init__(self, handle: ActorHandle, name: str) -> None:
        self._handle, self._name = handle, name

    def __call__(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        return self._handle.call(self._name, *args, **kwargs)

    def notify(self, *args: Any, **kwargs: Any) -> None:
        self._handle.notify(self._name, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<method {self._name} of {self._handle!r}>"


class _AlreadyDone:
    """An awaitable that is already done."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # makes this a generator function that finishes at once


class ActorHandle:
    """A reference to one actor. Cheap to pass around inside the driver."""

    RESERVED = frozenset({"name", "type_name", "max_restarts", "restarts", "pid", "node_id", "methods", "alive",
                          "call", "notify", "drain", "kill", "close"})  # fmt: skip
    """The handle's own names: an actor method called so would be out of reach as
    ``handle.name(...)``, so ``Runtime.spawn`` refuses an actor that has one."""

    def __init__(
        self,
        name: str,
        type_name: str,
        make_transport: Callable[[ActorHandle], Transport],
        max_restarts: int,
    ) -> None:
        self.name = name
        self.type_name = type_name
        self.max_restarts = max_restarts
        self.restarts = 0
        self._make_transport = make_transport
        self._transport = make_transport(self)
        self._restarting: asyncio.Task[None] | None = None
        self._closing: asyncio.Future[None] | None = None
        self._closed = False
        self._moved_before = 0
        self._methods: dict[str, bool] = {}  # kept across restarts
        self._failed: ActorDiedError | None = None  # set when a restart failed
        # Calls (with their futures) and notifies (None) made while a restart is under way:
        # the new process gets them in the order they were made.
        self._held: list[tuple[str, tuple[Any, ...], dict[str, Any], asyncio.Future[Any] | None]] = []

    def __repr__(self) -> str:
        return f"<ActorHandle {self.name!r} ({self.type_name}) pid={self.pid}>"

    @property
    def pid(self) -> int | None:
        return self._transport.pid

    @property
    def node_id(self) -> str | None:
        """The Ray node the actor runs on (the ``ray`` backend); None on the others."""
        return self._transport.node_id

    @property
    def methods(self) -> frozenset[str]:
        return frozenset(self._methods)

    @property
    def alive(self) -> bool:
        return not self._closed and (self._transport.alive or self._restarting is not None)

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        self._check_method(name)
        # Cached on the instance: the next ``handle.name`` is a plain lookup
        # (a producer calling ``sink.take.notify(x)`` in a loop saves ~1 us each).
        method = self.__dict__[name] = _Method(self, name)
        return method

    def _check_method(self, name: str) -> None:
        if name not in self._methods:
            known = ", ".join(sorted(self._methods)) or "none"
            raise AttributeError(f"actor {self.name!r} ({self.type_name}) has no method {name!r}; its methods: {known}")

    @overload
    def call(
        self, method: Callable[Concatenate[Any, P], Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[R]: ...
    @overload
    def call(self, method: Callable[Concatenate[Any, P], R], /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]: ...
    @overload
    def call(self, method: str, /, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...

    def call(self, method: str | Callable[..., Any], /, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """Run ``method`` (``Class.method``, or its name) in the actor; await the returned
        future for its result."""
        method = method_name(method)
        self._check_open()
        self._check_method(method)
        self._raise_notify_errors()
        if self._restarting is not None:
            future = asyncio.get_running_loop().create_future()
            self._held.append((method, args, kwargs, future))
            return future
        return self._transport.call(method, args, kwargs)

    @overload
    def notify(self, method: Callable[Concatenate[Any, P], Any], /, *args: P.args, **kwargs: P.kwargs) -> None: ...
    @overload
    def notify(self, method: str, /, *args: Any, **kwargs: Any) -> None: ...

    def notify(self, method: str | Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """Run ``method`` (``Class.method``, or its name) without waiting for an answer; a
        failure surfaces at the next call."""
        method = method_name(method)
        transport = self._transport
        if self._closed or self._failed is not None or method not in self._methods or transport.notify_errors:
            self._check_open()  # each raises its own error
            self._check_method(method)
            self._raise_notify_errors()
        if self._restarting is not None:  # for the new process, in order with the calls held
            self._held.append((method, args, kwargs, None))
            return
        transport.notify(method, args, kwargs)

    def drain(self) -> Awaitable[None]:
        """Wait until every call made so far has been written to the actor.

        ``notify`` never waits; a producer that notifies in a loop awaits
        ``drain()`` for backpressure, like ``asyncio.StreamWriter.drain``.
        With nothing to wait for it returns an awaitable that is already
        done, which is cheaper than a coroutine in that loop.
        """
        if self._restarting is None and not self._transport.backlogged:
            return _AlreadyDone()
        return self._drain()

    async def _drain(self) -> None:
        if self._restarting is not None:
            await asyncio.shield(self._restarting)
        await self._transport.drain()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"actor {self.name!r} is closed")
        if self._failed is not None:
            raise self._failed

    def _raise_notify_errors(self) -> None:
        errors = self._transport.notify_errors
        if errors:
            error = errors.pop(0)
            raise error

    # -- lifecycle (driven by the runtime) -------------------------------

    async def _start(self) -> None:
        await self._transport.start()
        self._methods = dict(self._transport.methods)
        check_method_names(self.type_name, self._methods)

    def _on_exit(self, transport: Transport, died: ActorDiedError) -> None:
        """The process died; restart it if the policy allows."""
        if self._closed or transport is not self._transport or self.restarts >= self.max_restarts:
            return
        self._restarting = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        old = self._transport
        self._moved_before += old.bytes_moved
        await old.stop()
        self.restarts += 1
        self._transport = self._make_transport(self)
        try:
            await self._transport.start()
        except asyncio.CancelledError:
            await self._transport.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - kept for every later call
            await self._transport.stop()
            # Not raised here: nobody awaits this task. Calls held for the
            # restart, and every later call, raise it instead.
            self._failed = ActorDiedError(self.name, None, f"its restart failed: {exc!r}")
            self._failed.__cause__ = exc
            self._release_held(self._failed)
        else:
            self._send_held()
        finally:
            self._restarting = None

    def _send_held(self) -> None:
        """Send what was called or notified during the restart to the new process, in order."""
        held, self._held = self._held, []
        for method, args, kwargs, future in held:
            try:
                if future is None:
                    self._transport.notify(method, args, kwargs)
                elif not future.cancelled():
                    _forward(self._transport.call(method, args, kwargs), future)
            except Exception as exc:  # noqa: BLE001 - the caller has gone on: its future, or the next call, gets it
                if future is None:
                    self._transport.notify_errors.append(exc)
                elif not future.done():
                    future.set_exception(exc)

    def _release_held(self, error: BaseException) -> None:
        held, self._held = self._held, []
        for _, _, _, future in held:
            if future is not None and not future.done():
                future.set_exception(error)

    async def kill(self) -> None:
        """Kill the actor's process now (SIGKILL), as a crash would, for an actor that hangs:
        its pending calls fail with ``ActorDiedError`` and the restart policy applies.
        Returns once the death is handled (``alive`` then says whether a restart is on its way)."""
        self._check_open()
        await self._transport.kill()

    async def close(self) -> None:
        """Stop the actor and release its resources. Idempotent: a call while another
        is under way waits for it, so whoever returns from ``close`` finds the process gone."""
        if self._closing is None:
            if self._closed:  # killed at interpreter exit (_kill_now): nothing left to release
                return
            self._closed = True
            self._closing = asyncio.ensure_future(self._shut_down())
        await asyncio.shield(self._closing)

    async def _shut_down(self) -> None:
        restarting = self._restarting
        if restarting is not None:
            restarting.cancel()
            await asyncio.wait([restarting])
        self._release_held(ClosedError(f"actor {self.name!r} is closed"))
        await self._transport.stop()

    def _kill_now(self) -> None:
        self._closed = True
        self._transport.kill_now()

    @property
    def _in_flight(self) -> int:
        return self._transport.in_flight

    @property
    def _bytes_moved(self) -> int:
        return self._moved_before + self._transport.bytes_moved

    @property
    def _calls_completed(self) -> int:
        return self._transport.calls_completed


def _forward(call: asyncio.Future[Any], to: asyncio.Future[Any]) -> None:
    """Resolve ``to`` as ``call`` resolves; cancelling ``to`` cancels ``call``."""

    def done(f: asyncio.Future[Any]) -> None:
        if to.done():
            return
        if f.cancelled():
            to.cancel()
        elif (error := f.exception()) is not None:
            to.set_exception(error)
        else:
            to.set_result(f.result())

    call.add_done_callback(done)
    to.add_done_callback(lambda f: call.cancel() if f.cancelled() else None)
