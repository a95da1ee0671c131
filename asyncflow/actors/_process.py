"""The ``process`` backend: one actor in one child process.

::

    driver (asyncio loop)                         actor process (its own loop)
    ─────────────────────                         ────────────────────────────
    call() ─ pickle ─► request ring ──(actor bell)──► pump ─► method(*args)
                                                            │
    future ◄─ unpickle ◄─ reply ring ◄──(driver bell)──────┘
    sentinel fd ──► add_reader ──► fail every pending call with ActorDiedError

Both doorbells are eventfds watched with ``loop.add_reader``: no thread per
actor, no polling. The process sentinel is watched the same way, so a dead
actor fails its callers at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

from ..errors import ActorDiedError, ClosedError, SerializationError
from ._channel import PUMP_BUDGET, DecodeFailure, Endpoint, Message, Receiver, Sender
from ._doorbell import Doorbell
from ._launch import ActorProcess
from ._loop import EventLoopKind
from ._protocol import Kind, PackedError, unpack_error
from ._ring import Ring, RingReader, RingWriter
from ._worker import Bootstrap, InheritedBell, main

__all__ = ["ProcessOptions", "ProcessTransport"]


@dataclass(frozen=True)
class ProcessOptions:
    start_method: str = "forkserver"
    torch_threads: int | None = 1
    niceness: int = 15
    ring_bytes: int = 8 << 20
    stop_timeout: float = 2.0


_call_ids = itertools.count(1)


class ProcessTransport:
    """Owns one actor process, its two rings and its two doorbells."""

    def __init__(
        self,
        name: str,
        payload: bytes,
        options: ProcessOptions,
        on_exit: Callable[[ProcessTransport, ActorDiedError], None],
        event_loop: EventLoopKind,
    ) -> None:
        self.name = name
        self.event_loop = event_loop
        self.methods: dict[str, bool] = {}
        self.pid: int | None = None
        self.node_id: str | None = None
        self._payload = payload
        self._options = options
        self._on_exit_cb = on_exit
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._process: BaseProcess | None = None
        self._rings: list[Ring] = []
        self._bells: list[Doorbell] = []
        self._endpoint: Endpoint | None = None
        self._sender: Sender | None = None
        self._ready: asyncio.Future[dict[str, bool]] | None = None
        self._exited: asyncio.Future[int | None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._dead: BaseException | None = None
        self._stopping = False
        self._drained: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.notify_errors: list[BaseException] = []
        self.calls_completed = 0

    # -- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        opts = self._options
        requests = Ring(capacity=opts.ring_bytes)
        self._rings = [requests]  # released by stop(), also when the second ring fails
        replies = Ring(capacity=opts.ring_bytes)
        self._rings.append(replies)
        own, actor_bell = Doorbell(), Doorbell()
        self._bells = [own, actor_bell]
        reader = RingReader(replies, actor_bell)
        self._sender = Sender(RingWriter(requests, actor_bell), loop.call_soon)
        self._endpoint = Endpoint(self._sender, Receiver(reader), reader, own)
        boot = Bootstrap(
            self.name,
            requests.name,
            replies.name,
            InheritedBell(actor_bell),
            InheritedBell(own),
            self._payload,
            opts.torch_threads,
            opts.niceness,
            self.event_loop,
            frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        )
        process = self._process = _make_process(opts.start_method, boot, f"asyncflow:{self.name}")
        self._ready = loop.create_future()
        self._exited = loop.create_future()
        # Process.start blocks (it talks to the fork server), so it runs in a
        # thread; shielded, so that a cancelled spawn still knows its process.
        self._started = asyncio.ensure_future(loop.run_in_executor(None, process.start))
        await asyncio.shield(self._started)
        self.pid = process.pid
        loop.add_reader(own.read_fd, self._on_wake)
        loop.add_reader(process.sentinel, self._on_sentinel)
        self.methods = await self._ready

    async def stop(self) -> None:
        """Polite stop, then SIGTERM, then SIGKILL; reap; unlink every segment."""
        self._stopping = True
        self._fail_pending(ClosedError(f"actor {self.name!r} was stopped"))
        if self._started is not None and not self._started.done():
            await asyncio.wait([self._started])
        process = self._process
        if process is not None and process.pid is not None and self._exited is not None:
            if not self._exited.done() and self._sender is not None:
                with contextlib.suppress(Exception):  # escalate below
                    self._sender.send(0, Kind.STOP, None)
            for escalate in (None, process.terminate, process.kill):
                if self._exited.done():
                    break
                if escalate is not None:
                    escalate()
                await asyncio.wait([self._exited], timeout=self._options.stop_timeout)
            if not self._exited.done():  # pragma: no cover - kill never fails
                self._on_sentinel()
            process.join(timeout=1.0)
        self._release()

    async def kill(self) -> None:
        """SIGKILL the process, as a crash would, and wait until its death is handled
        (pending calls failed, the owner told)."""
        if self._process is not None and self._process.pid is not None and self._exited is not None:
            if not self._exited.done():
                self._process.kill()
            await asyncio.shield(self._exited)

    def kill_now(self) -> None:
        """Synchronous last resort (atexit): kill the process, unlink segments."""
        process = self._process
        if process is not None and process.pid is not None:
            try:
                process.kill()
                process.join(timeout=1.0)
            except Exception:  # noqa: BLE001 - best effort at interpreter exit
                pass
        for ring in self._rings:
            ring.unlink()

    def _release(self) -> None:
        loop = self._loop
        for bell in self._bells:
            if loop is not None and not loop.is_closed():
                loop.remove_reader(bell.read_fd)
            bell.close()
        self._bells = []
        for ring in self._rings:
            ring.close()
            ring.unlink()
        self._rings = []
        if self._process is not None and self._process.exitcode is not None:
            self._process.close()
        self._process = None

    # -- calls -----------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._dead is None and not self._stopping

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def bytes_moved(self) -> int:
        sent = self._sender.bytes_sent if self._sender else 0
        received = 0
        if self._endpoint is not None:
            received = self._endpoint.receiver.bytes_received
        return sent + received

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
        assert self._loop is not None and self._sender is not None
        self._check_alive()
        tag = next(_call_ids)
        try:
            self._sender.send(tag, Kind.CALL, (method, args, kwargs))
        except Exception as exc:
            raise SerializationError(f"cannot pickle the arguments of {self.name}.{method}(): {exc}") from exc
        future = self._loop.create_future()
        self._pending[tag] = future
        if self.methods.get(method):
            future.add_done_callback(lambda f: self._cancel_remote(tag, f))
        return future

    def notify(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        assert self._sender is not None
        if self._stopping or self._dead is not None:
            self._check_alive()
        try:
            self._sender.send(0, Kind.NOTIFY, (method, args, kwargs))
        except Exception as exc:
            raise SerializationError(f"cannot pickle the arguments of {self.name}.{method}(): {exc}") from exc

    @property
    def backlogged(self) -> bool:
        """Whether some of what was sent still waits for ring space."""
        return self._sender is not None and self._sender.backlogged

    async def drain(self) -> None:
        """Wait until everything sent so far is in the ring (not in our backlog)."""
        while self.backlogged:
            self._check_alive()
            if self._drained is None or self._drained.done():
                assert self._loop is not None
                self._drained = self._loop.create_future()
            await self._drained

    def _check_alive(self) -> None:
        if self._stopping:
            raise ClosedError(f"actor {self.name!r} was stopped")
        if self._dead is not None:
            raise self._dead

    def _cancel_remote(self, tag: int, future: asyncio.Future[Any]) -> None:
        if future.cancelled() and self.alive and self._sender is not None:
            self._pending.pop(tag, None)
            self._sender.send(tag, Kind.CANCEL, None)

    # -- events from the loop --------------------------------------------

    def _on_wake(self) -> None:
        if self._endpoint is None:
            return  # a pump scheduled just before the transport closed
        messages, more = self._endpoint.pump(PUMP_BUDGET)
        if more and self._loop is not None:
            self._loop.call_soon(self._on_wake)  # we stay awake: no doorbell will come
        for tag, kind, payload in messages:
            self._handle(tag, kind, payload)
        drained = self._drained
        if drained is not None and not drained.done() and not self.backlogged:
            drained.set_result(None)

    def _drain_all(self) -> list[Message]:
        """Everything in the ring now, however much (the peer has exited)."""
        assert self._endpoint is not None
        out: list[Message] = []
        more = True
        while more:
            messages, more = self._endpoint.pump(PUMP_BUDGET)
            out += messages
        return out

    def _handle(self, tag: int, kind: int, payload: Any) -> None:
        if kind == Kind.OK:
            self._resolve(tag, payload, None)
        elif kind == Kind.ERROR:
            error = _error_from(payload)
            if tag == 0:
                self.notify_errors.append(error)
            else:
                self._resolve(tag, None, error)
        elif kind == Kind.READY:
            self._on_ready(payload)

    def _resolve(self, tag: int, result: Any, error: BaseException | None) -> None:
        future = self._pending.pop(tag, None)
        self.calls_completed += 1
        if future is None or future.done():
            return  # the caller cancelled
        if isinstance(result, DecodeFailure):
            error = SerializationError(f"cannot unpickle the result from actor {self.name!r}: {result.error!r}")
            error.__cause__ = result.error
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def _on_ready(self, payload: Any) -> None:
        assert self._ready is not None
        if self._ready.done():
            return
        if isinstance(payload, dict):
            self._ready.set_result(payload)
        else:
            self._ready.set_exception(_error_from(payload))

    def _on_sentinel(self) -> None:
        assert self._loop is not None and self._process is not None and self._exited is not None
        self._loop.remove_reader(self._process.sentinel)
        if self._endpoint is not None and self._rings:
            for tag, kind, payload in self._drain_all():  # answers written before the exit still count
                self._handle(tag, kind, payload)
        for ring in self._rings:  # nobody will attach again: the names go now, the mappings at _release
            ring.unlink()
        exitcode = self._process.exitcode
        if not self._exited.done():
            self._exited.set_result(exitcode)
        if self._stopping:
            return
        died = ActorDiedError(self.name, exitcode)
        self._dead = died
        self._fail_pending(died)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(ActorDiedError(self.name, exitcode, "before it was ready"))
        self._on_exit_cb(self, died)

    def _fail_pending(self, error: BaseException) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(error)
            self._drained.exception()  # retrieved here; drain() re-raises via _check_alive
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)


def _make_process(start_method: str, boot: Bootstrap, name: str) -> BaseProcess:
    if start_method == "forkserver":
        return ActorProcess(target=main, args=(boot,), name=name)
    process: BaseProcess = multiprocessing.get_context(start_method).Process(  # type: ignore[attr-defined]
        target=main, args=(boot,), name=name
    )
    return process


def _error_from(payload: Any) -> BaseException:
    if isinstance(payload, DecodeFailure):
        return SerializationError(f"cannot unpickle an error sent by the actor: {payload.error!r}")
    packed: PackedError = payload
    return unpack_error(packed)
