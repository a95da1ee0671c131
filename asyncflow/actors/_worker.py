"""The actor process: one object, one event loop, two rings.

``main`` runs in the child. It attaches to the rings the driver created,
builds the object, says READY with its method table, and then serves calls
whenever its doorbell fires. Sync methods run inline, in arrival order;
``async def`` methods run as tasks, so they overlap. A polite stop cancels
the calls still running, then awaits the object's ``aclose()`` if it has one
(``close_actor_object``): an actor that holds connections closes them. A watchdog thread exits
the process (after unlinking the rings) as soon as the driver disappears,
even while a long sync method holds the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import parent_process, reduction
from typing import Any

from ..errors import SerializationError
from ._blas import limit_blas_threads
from ._channel import PUMP_BUDGET, DecodeFailure, Endpoint, Receiver, Sender
from ._doorbell import Doorbell
from ._loop import EventLoopKind, new_actor_loop
from ._protocol import Kind, describe, pack_error
from ._ring import Ring, RingReader, RingWriter
from ._serialize import loads

__all__ = [
    "Bootstrap",
    "InheritedBell",
    "close_actor_object",
    "limit_threads",
    "main",
    "method_table",
]


class InheritedBell:
    """A doorbell that travels to a child: its fds are duplicated on the way."""

    def __init__(self, bell: Doorbell) -> None:
        self.bell = bell

    def __reduce__(self) -> tuple[Callable[..., Doorbell], tuple[Any, ...]]:
        read_fd, write_fd = self.bell.fds()
        dup_write = reduction.DupFd(write_fd) if write_fd != read_fd else None
        return _rebuild_bell, (reduction.DupFd(read_fd), dup_write)


def _rebuild_bell(read: Any, write: Any) -> Doorbell:
    read_fd = read.detach()
    return Doorbell(read_fd, write.detach() if write is not None else read_fd)


@dataclass
class Bootstrap:
    name: str
    request_ring: str
    reply_ring: str
    actor_bell: Any  # InheritedBell on the way, Doorbell on arrival
    driver_bell: Any
    payload: bytes  # cloudpickle of (factory, args, kwargs)
    torch_threads: int | None
    niceness: int
    event_loop: EventLoopKind
    cpus: frozenset[int] | None
    """The driver's CPUs (its affinity), which the actor takes: an early fork server may
    have imported on one CPU only (``_runtime._pin_early_servers``). None: left as is."""


def method_table(obj: object) -> dict[str, bool]:
    """Public callables of ``obj``: name -> whether it is a coroutine function."""
    table = {}
    for name in dir(type(obj)):
        if name.startswith("_"):
            continue
        attr = getattr(type(obj), name, None)
        if callable(attr):
            table[name] = inspect.iscoroutinefunction(attr)
    return table


async def close_actor_object(obj: object) -> None:
    """Await ``obj.aclose()`` if the actor's object has one (an ``async def``); what it
    raises is printed, not raised: the actor is stopping either way."""
    aclose = getattr(obj, "aclose", None)
    if aclose is None or not inspect.iscoroutinefunction(aclose):
        return
    try:
        await aclose()
    except Exception:  # noqa: BLE001 - reported, the stop goes on
        import traceback

        traceback.print_exc()


def main(boot: Bootstrap) -> None:
    """Entry point of an actor process."""
    # Ctrl-C belongs to the driver, which stops its actors in order. Ignored, and no
    # longer blocked as the fork server was started with it (start_fork_server), so that
    # what an actor starts itself does not inherit a blocked SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    limit_threads(boot.torch_threads)
    lower_priority(boot.niceness)
    if boot.cpus is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, boot.cpus)
    loop = new_actor_loop(boot.event_loop)
    asyncio.set_event_loop(loop)
    rings = [Ring(boot.request_ring), Ring(boot.reply_ring)]
    _start_watchdog(rings)
    try:
        loop.run_until_complete(_Server(boot, rings, loop).serve())
    finally:
        for ring in rings:
            ring.close()
    # Skip interpreter teardown (atexit of torch and friends): nothing is left to save.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def limit_threads(threads: int | None) -> None:
    if threads is None:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    limit_blas_threads(threads)  # numpy's OpenBLAS read its variable in the fork server, before this


def lower_priority(niceness: int) -> None:
    """Run this process at ``niceness`` (never higher in priority than it already is).

    Actors are batch work beside a driver whose event loop serves an application:
    at the driver's own priority, two CPU-bound workers on two cores keep the
    loop waiting for a core on every wake-up (p99 heartbeat lag 3.8 ms with PPO
    on CartPole here, 1.2-1.4 ms at niceness 19; ``benchmarks/loop_lag.py``).
    Ray's workers run at niceness 15 too."""
    now = os.nice(0)
    if niceness > now:
        os.nice(niceness - now)


def _start_watchdog(rings: list[Ring]) -> None:
    parent = parent_process()
    if parent is None:  # pragma: no cover - always set for spawned children
        return
    sentinel = parent.sentinel

    def watch() -> None:
        select.select([sentinel], [], [])
        # The driver is gone: nobody else will unlink our segments.
        for ring in rings:
            ring.unlink()
        os._exit(1)

    threading.Thread(target=watch, name="asyncflow-watchdog", daemon=True).start()


class _Server:
    def __init__(self, boot: Bootstrap, rings: list[Ring], loop: asyncio.AbstractEventLoop) -> None:
        requests, replies = rings
        own: Doorbell = boot.actor_bell
        peer: Doorbell = boot.driver_bell
        reader = RingReader(requests, peer)
        self.sender = Sender(RingWriter(replies, peer), loop.call_soon)
        self.endpoint = Endpoint(self.sender, Receiver(reader), reader, own)
        self.boot = boot
        self.tasks: dict[int, asyncio.Task[Any]] = {}
        self.methods: dict[str, tuple[Callable[..., Any], bool]] = {}
        self.stopped: asyncio.Future[None] | None = None
        self.obj: object = None

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        self.stopped = loop.create_future()
        try:
            factory, args, kwargs = loads(self.boot.payload)
            obj = factory(*args, **kwargs)
            if inspect.isawaitable(obj):
                obj = await obj
            table = method_table(obj)
        except Exception as exc:  # noqa: BLE001 - reported to spawn()
            self.sender.send(0, Kind.READY, pack_error(exc, f"while constructing actor {self.boot.name!r}"))
            return
        self.methods = {name: (getattr(obj, name), is_async) for name, is_async in table.items()}
        self.obj = obj
        self.sender.send(0, Kind.READY, table)
        bell = self.endpoint.bell
        loop.add_reader(bell.read_fd, self.on_wake)
        self.on_wake()  # calls may have arrived before we watched the doorbell
        try:
            await self.stopped
        finally:
            loop.remove_reader(bell.read_fd)
            for task in self.tasks.values():
                task.cancel()
            if self.tasks:
                await asyncio.wait(list(self.tasks.values()))
            await close_actor_object(self.obj)

    def on_wake(self) -> None:
        messages, more = self.endpoint.pump(PUMP_BUDGET)
        if more:
            asyncio.get_running_loop().call_soon(self.on_wake)  # we stay awake: no doorbell will come
        for tag, kind, payload in messages:
            if kind == Kind.CALL or kind == Kind.NOTIFY:
                self.dispatch(tag, payload)
            elif kind == Kind.CANCEL:
                task = self.tasks.get(tag)
                if task is not None:
                    task.cancel()
            elif kind == Kind.STOP:
                assert self.stopped is not None
                if not self.stopped.done():
                    self.stopped.set_result(None)

    def dispatch(self, tag: int, payload: Any) -> None:
        if isinstance(payload, DecodeFailure):
            err = SerializationError(f"the arguments could not be unpickled in the actor: {payload.error!r}")
            self.sender.send(tag, Kind.ERROR, pack_error(err))
            return
        method, args, kwargs = payload
        bound, is_async = self.methods[method]
        if not is_async:
            # A sync method may hold the loop for long: answers already written
            # must not wait for it.
            self.sender.wake()
        try:
            result = bound(*args, **kwargs)
            if is_async or (result is not None and inspect.isawaitable(result)):
                task = asyncio.ensure_future(result)
                self.tasks[tag] = task
                task.add_done_callback(lambda t: self.finish_task(tag, method, t))
                return
        except Exception as exc:  # noqa: BLE001 - travels back to the caller
            self.sender.send(tag, Kind.ERROR, pack_error(exc))
            return
        if tag:  # a notify (tag 0) gets no answer
            self.reply(tag, method, result)

    def finish_task(self, tag: int, method: str, task: asyncio.Task[Any]) -> None:
        self.tasks.pop(tag, None)
        if task.cancelled():
            return  # the caller cancelled; nobody waits for an answer
        exc = task.exception()
        if exc is not None:
            self.sender.send(tag, Kind.ERROR, pack_error(exc))
        else:
            self.reply(tag, method, task.result())

    def reply(self, tag: int, method: str, result: Any) -> None:
        if tag == 0:
            return  # a notify: no answer unless it failed
        try:
            self.sender.send(tag, Kind.OK, result)
        except Exception as exc:  # noqa: BLE001 - the actor stays usable
            err = SerializationError(
                f"the result of {method}() has type {describe(result)}, which cannot be pickled: {exc}"
            )
            self.sender.send(tag, Kind.ERROR, pack_error(err))
