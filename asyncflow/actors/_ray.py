"""The ``ray`` backend: each actor is a Ray actor, on whichever node Ray places it.

::

    driver (asyncio loop)                           Ray actor (Host, its own loop)
    ─────────────────────                           ──────────────────────────────
    call() ─ seq ─► host.call.remote(seq, ...) ───► waits its turn ─► method(*args)
                                                                    │
    future ◄── (ok, value) ◄── Ray's object store ◄─────────────────┘
    host.wait_forever.remote() fails ──► every pending call fails with ActorDiedError

The handle, its restart policy and its errors are the same objects as on the
process backend: Ray restarts nothing itself (``max_restarts=0``); a dead Host
is reported like a dead process and ``ActorHandle`` builds a new one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import importlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ActorDiedError, ActorError, ClosedError, ConfigError, SerializationError
from ._protocol import PackedError, unpack_error
from ._ray_host import own_arrays

__all__ = ["RayOptions", "RayTransport", "import_ray"]

NOTIFY_WINDOW = 64  # notifies in flight before drain() waits: Ray queues without bound
MAX_CONCURRENCY = 100_000  # coroutines a Host runs at once; calls waiting their turn count too


@dataclass(frozen=True)
class RayOptions:
    torch_threads: int | None = 1
    stop_timeout: float = 2.0
    num_cpus: float = 0.0
    num_gpus: float = 0.0


def import_ray() -> ModuleType:
    """``ray``, or a ``ConfigError`` that says how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ConfigError(
            "backend='ray' needs Ray, which is not installed: pip install 'asyncflow[ray]' "
            "(on every node of the cluster)"
        ) from exc


@functools.cache
def host_class() -> Any:
    from ._ray_host import Host

    return import_ray().remote(Host)


class RayTransport:
    """Owns one Ray actor (a ``Host``) and the calls in flight to it."""

    def __init__(
        self,
        name: str,
        payload: bytes,
        options: RayOptions,
        on_exit: Callable[[RayTransport, ActorDiedError], None],
    ) -> None:
        self.name = name
        self.methods: dict[str, bool] = {}
        self.pid: int | None = None
        self.node_id: str | None = None
        self.notify_errors: list[BaseException] = []
        self.calls_completed = 0
        self.bytes_moved = 0  # the arrays and bytes in arguments and results (Ray moves them)
        self._payload = payload
        self._options = options
        self._on_exit_cb = on_exit
        self._ray = import_ray()
        self._actor: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._notifies = 0
        # Sync-method notifies in flight, and replies held back until they are reported: Ray
        # answers each call on its own, and a later call's answer can come first. The process
        # backend's ring keeps the order, so a notify's error is there by the next reply.
        self._sync_notifies: set[int] = set()
        self._held: dict[int, tuple[str, concurrent.futures.Future[Any]]] = {}
        self._drained: asyncio.Future[None] | None = None
        self._exited: asyncio.Future[None] | None = None
        self._dead: ActorDiedError | None = None
        self._stopping = False

    # -- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        opts = self._options
        self._exited = loop.create_future()
        self._actor = (
            host_class()
            .options(num_cpus=opts.num_cpus, num_gpus=opts.num_gpus, max_restarts=0, max_concurrency=MAX_CONCURRENCY)
            .remote(self.name, self._payload, opts.torch_threads)
        )
        self._when_done(self._actor.wait_forever.remote(), self._on_death)
        ready: asyncio.Future[Any] = loop.create_future()
        self._when_done(self._actor.start.remote(), functools.partial(_settle, ready))
        try:
            ok, value = await ready
        except self._ray.exceptions.RayActorError as exc:
            raise self._died(exc, "before it was ready") from exc
        if not ok:
            raise unpack_error(value)
        self.methods, self.pid, self.node_id = value

    async def stop(self) -> None:
        """The object's ``aclose()`` (within ``stop_timeout``), then ``ray.kill``; returns once Ray
        reports the actor dead."""
        self._stopping = True
        self._fail_pending(ClosedError(f"actor {self.name!r} was stopped"))
        if self._actor is None or self._exited is None:
            return
        timeout = self._options.stop_timeout
        if not self._exited.done() and self.methods:
            closed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._when_done(self._actor.close.remote(), functools.partial(_settle, closed))
            await asyncio.wait([closed, self._exited], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if closed.done() and not closed.cancelled():
                closed.exception()  # retrieved: the actor is going either way
        if not self._exited.done():
            self._ray.kill(self._actor, no_restart=True)
            await asyncio.wait([self._exited], timeout=timeout)
        await self._process_gone(timeout)

    async def _process_gone(self, timeout: float) -> None:
        """On this node, wait until the actor's process has exited too (Ray reports the
        death some milliseconds before): whoever returns from ``stop`` finds it gone."""
        if self.pid is None or self.node_id != self._ray.get_runtime_context().get_node_id():
            return
        deadline = asyncio.get_running_loop().time() + timeout
        while _running(self.pid) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)

    async def kill(self) -> None:
        """Kill the Ray actor, as a crash would, and wait until its death is handled."""
        if self._actor is not None and self._exited is not None:
            if not self._exited.done():
                self._ray.kill(self._actor, no_restart=True)
            await asyncio.shield(self._exited)

    def kill_now(self) -> None:
        self._stopping = True
        if self._actor is not None and self._ray.is_initialized():
            with contextlib.suppress(Exception):  # best effort at interpreter exit
                self._ray.kill(self._actor, no_restart=True)

    # -- calls -----------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._dead is None and not self._stopping

    @property
    def in_flight(self) -> int:
        return len(self._pending) + self._notifies

    @property
    def backlogged(self) -> bool:
        return self._notifies >= NOTIFY_WINDOW

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
        assert self._loop is not None
        self._check_alive()
        seq = self._submit(method, args, kwargs, self._on_reply)
        future = self._pending[seq] = self._loop.create_future()
        if self.methods.get(method):
            future.add_done_callback(lambda f: self._cancel_remote(seq, f))
        return future

    def notify(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._check_alive()
        seq = self._submit(method, args, kwargs, self._on_notified)
        self._notifies += 1
        if not self.methods.get(method):
            self._sync_notifies.add(seq)

    async def drain(self) -> None:
        """Wait until fewer than ``NOTIFY_WINDOW`` notifies are in flight."""
        while self.backlogged:
            self._check_alive()
            if self._drained is None or self._drained.done():
                assert self._loop is not None
                self._drained = self._loop.create_future()
            await self._drained

    def _submit(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], done: Callable[[int, str, Any], None]
    ) -> int:
        seq = next(self._seq)
        self.bytes_moved += payload_bytes(args) + payload_bytes(kwargs)
        try:
            ref = self._actor.call.remote(seq, method, kwargs, *args)
        except Exception as exc:
            self._actor.cancel.remote(seq)  # the host must not wait for this number
            raise SerializationError(f"cannot pickle the arguments of {self.name}.{method}(): {exc}") from exc
        self._when_done(ref, functools.partial(done, seq, method))
        return seq

    def _check_alive(self) -> None:
        if self._stopping:
            raise ClosedError(f"actor {self.name!r} was stopped")
        if self._dead is not None:
            raise self._dead

    def _cancel_remote(self, seq: int, future: asyncio.Future[Any]) -> None:
        if future.cancelled() and self.alive:
            self._pending.pop(seq, None)
            self._actor.cancel.remote(seq)

    def _when_done(self, ref: Any, callback: Callable[[concurrent.futures.Future[Any]], None]) -> None:
        """Run ``callback(ray_future)`` on our loop once ``ref`` is ready (Ray answers on its own thread)."""
        loop = self._loop
        assert loop is not None

        def on_ray_thread(done: concurrent.futures.Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(callback, done)

        ref.future().add_done_callback(on_ray_thread)

    # -- answers (on our loop) -------------------------------------------

    def _on_reply(self, seq: int, method: str, done: concurrent.futures.Future[Any]) -> None:
        if self._sync_notifies and min(self._sync_notifies) < seq:
            self._held[seq] = (method, done)  # an earlier notify's error must surface first
            return
        self.calls_completed += 1
        future = self._pending.pop(seq, None)
        if future is None or future.done():
            return  # the caller cancelled, or the actor was declared dead first
        try:
            result, error = self._outcome(method, done)
        except BaseException as exc:  # noqa: BLE001 - delivered to the caller
            future.set_exception(exc)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def _on_notified(self, seq: int, method: str, done: concurrent.futures.Future[Any]) -> None:
        self.calls_completed += 1
        self._notifies -= 1
        self._sync_notifies.discard(seq)
        if not self._stopping and self._dead is None:
            try:
                _, error = self._outcome(method, done)
            except ActorDiedError:
                error = None  # the death itself is reported through the sentinel
            except BaseException as exc:  # noqa: BLE001 - surfaces at the next call
                error = exc
            if error is not None:
                self.notify_errors.append(error)
        drained = self._drained
        if drained is not None and not drained.done() and not self.backlogged:
            drained.set_result(None)
        for held in sorted(self._held):  # the replies that waited for this notify, in order
            if self._sync_notifies and min(self._sync_notifies) < held:
                break
            self._on_reply(held, *self._held.pop(held))

    def _outcome(self, method: str, done: concurrent.futures.Future[Any]) -> tuple[Any, BaseException | None]:
        """``(result, None)`` or ``(None, the caller's exception)``; raises what Ray raised, translated."""
        exceptions = self._ray.exceptions
        try:
            ok, value = done.result()
        except exceptions.ActorDiedError as exc:
            # The call's own answer can come before the sentinel's: the death is handled
            # now, so the next call already goes to the restarted actor.
            raise self._declare_dead(exc) from exc
        except exceptions.RayActorError as exc:
            raise self._died(exc) from exc
        except exceptions.RayTaskError as exc:  # Ray failed around our code: (un)pickling
            cause = getattr(exc, "cause", None) or exc
            raise SerializationError(
                f"the arguments or the result of {self.name}.{method}() could not travel through Ray: "
                f"{type(cause).__name__}: {cause}"
            ) from exc
        except exceptions.RayError as exc:
            raise ActorError(f"a call to actor {self.name!r} failed in Ray: {exc}") from exc
        if ok:
            self.bytes_moved += payload_bytes(value)
            return own_arrays(value), None
        packed: PackedError = value
        return None, unpack_error(packed)

    def _on_death(self, done: concurrent.futures.Future[Any]) -> None:
        assert self._exited is not None
        if not self._exited.done():
            self._exited.set_result(None)
        if not self._stopping:
            self._declare_dead(done.exception())

    def _declare_dead(self, cause: BaseException | None) -> ActorDiedError:
        """Fail every pending call and hand the death to the restart policy, once; whichever of
        Ray's reports (the sentinel's, or a call's) comes first."""
        if self._dead is None and not self._stopping:
            died = self._died(cause)
            died.__cause__ = cause
            self._dead = died
            self._fail_pending(died)
            self._on_exit_cb(self, died)
        return self._died(cause) if self._dead is None else self._dead

    def _died(self, cause: BaseException | None, when: str = "") -> ActorDiedError:
        reason = _ray_reason(cause)
        detail = f"its Ray actor is gone{f' ({reason})' if reason else ''}"
        if when:
            detail = f"{when}: {detail}"
        return ActorDiedError(self.name, None, detail)

    def _fail_pending(self, error: BaseException) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(error)
            self._drained.exception()  # retrieved here; drain() re-raises via _check_alive
        self._held.clear()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)


def payload_bytes(value: Any, depth: int = 0) -> int:
    """The bytes of the arrays, tensors and bytes objects in ``value`` (what ``statistics()``
    counts as moved on Ray, whose serializer does the moving)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if depth >= 8 or isinstance(value, str | int | float | type(None)):
        return 0
    if isinstance(value, dict):
        return sum(payload_bytes(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(payload_bytes(v, depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(payload_bytes(getattr(value, f.name, None), depth + 1) for f in dataclasses.fields(value))
    nbytes = getattr(value, "nbytes", None)  # a torch tensor
    return nbytes if isinstance(nbytes, int) else 0


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no such process (or no /proc: then we cannot tell, and do not wait)
        return False


def _settle(target: asyncio.Future[Any], done: concurrent.futures.Future[Any]) -> None:
    if target.done():
        return
    exc = done.exception()
    if exc is not None:
        target.set_exception(exc)
    else:
        target.set_result(done.result())


def _ray_reason(cause: BaseException | None) -> str:
    """The line of Ray's long death message that says why."""
    if cause is None:
        return ""
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("The actor is dead because"):
            return line.removeprefix("The actor is dead because").strip().rstrip(".")
    return lines[0] if lines else type(cause).__name__
