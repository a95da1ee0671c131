"""``open_runtime``: the owner of every actor process and segment.

Leaving the ``async with`` block, however it is left (normally, by an
exception, by cancellation, by Ctrl-C in ``asyncio.run``), stops every actor
(politely, then SIGTERM, then SIGKILL), reaps the processes and unlinks every
shared-memory segment. An ``atexit`` hook does the same, synchronously, for a
runtime whose loop died before it could close.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import itertools
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ClosedError, ConfigError, SerializationError
from ._handle import ActorHandle, Transport, check_method_names
from ._launch import ActorProcess
from ._local import LocalTransport
from ._loop import actor_event_loop
from ._process import ProcessOptions, ProcessTransport
from ._ray import RayOptions, RayTransport, import_ray
from ._ring import sweep_stale_segments
from ._serialize import dumps_by_value
from ._server_exit import imported_by_the_fork_server, preload_with_quick_exit

__all__ = [
    "add_preload",
    "torch_free_preload",
    "Runtime",
    "RuntimeStatistics",
    "open_runtime",
    "prefer_torch_free_fork_server",
    "start_fork_server",
    "stop_fork_server",
]

Backend = Literal["process", "local", "ray"]

_live_runtimes: weakref.WeakSet[Runtime] = weakref.WeakSet()
_names = itertools.count(1)
_fork_server_used = False  # a runtime of this process has used the fork server
_tracker_started_with_server = False  # start_fork_server() also started the resource tracker
_spare: multiprocessing.forkserver.ForkServer | None = None  # start_fork_server_early's second server
_stopping_server = threading.Event()  # stop_fork_server() is at work: the warm-up may fail
_warmups: list[threading.Thread] = []


BASE_PRELOAD = ("asyncflow.actors._worker", "numpy")
"""What the fork server always imports: the actor layer's own modules."""

_preloads: dict[bool, list[str]] = {False: [], True: []}  # torch_free -> what the layers above added


def add_preload(modules: Sequence[str], *, torch_free: bool = False) -> None:
    """Modules the fork server should import once, so that actors start warm. The layers
    above say what their actors need (``asyncflow.algorithms`` adds torch, gymnasium and its
    workers' modules); with ``torch_free``, the list for actors that never load torch
    (``prefer_torch_free_fork_server``). Only servers started afterwards see them."""
    listed = _preloads[torch_free]
    listed += [m for m in modules if m not in listed]


def default_preload() -> list[str]:
    """Modules the fork server imports once: ``BASE_PRELOAD`` and what ``add_preload``
    added, where importable."""
    return [*BASE_PRELOAD, *(m for m in _preloads[False] if _importable(m))]


def torch_free_preload() -> list[str]:
    """The fork server's imports for actors that never load torch."""
    return [*BASE_PRELOAD, *_preloads[True]]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class RuntimeStatistics:
    """A snapshot of the runtime (``Runtime.statistics()``)."""

    backend: str
    actors_alive: int
    actors_spawned: int
    restarts: int
    calls_in_flight: int
    calls_completed: int
    bytes_moved: int


def _noop() -> None:
    pass


TransportMaker = Callable[[ActorHandle], Transport]
"""What a backend hands ``ActorHandle``: a function that starts one incarnation of an actor."""


class _LocalBackend:
    """Actors as objects in this process (``local``): for debugging and exact replay."""

    def __init__(self, runtime: Runtime) -> None:
        pass

    async def open(self) -> None:
        pass

    async def wait_ready(self) -> None:
        pass

    async def settle(self) -> None:
        """Before the actors are closed: let what the backend started on its own finish."""

    async def close(self) -> None:
        """After the actors are closed: release what the backend holds."""

    async def transport(self, spec: _ActorSpec) -> TransportMaker:
        return lambda handle: LocalTransport(spec.name, spec.factory, spec.args, spec.kwargs)

    def check_fits(self, count: int, num_cpus: float, num_gpus: float) -> None:
        pass

    def share(self, value: Any) -> Any:
        return value


class _ProcessBackend(_LocalBackend):
    """One process per actor on this machine, forked from the fork server, talking over
    shared-memory rings (``process``, the default)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._warm: asyncio.Future[None] | None = None

    async def open(self) -> None:
        _live_runtimes.add(self.runtime)
        sweep_stale_segments()  # what drivers killed with -9 left in /dev/shm
        if self.runtime._options.start_method == "forkserver":
            global _fork_server_used
            _fork_server_used = True
            _kill_spare()  # the server it starts from is the one it keeps
            _unpin_early_servers()  # the driver's imports are over: what it forks gets every CPU
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(self.runtime._preload)
            # Warm the fork server in the background: its first child waits
            # for the preloaded imports, later ones fork in milliseconds.
            loop = asyncio.get_running_loop()
            self._warm = asyncio.ensure_future(loop.run_in_executor(None, _warm_forkserver))

    async def wait_ready(self) -> None:
        if self._warm is not None:
            await asyncio.shield(self._warm)

    async def settle(self) -> None:
        if self._warm is not None:
            await asyncio.wait([self._warm])
            if not self._warm.cancelled():
                self._warm.exception()  # retrieved: a failed warm-up surfaces at spawn

    async def transport(self, spec: _ActorSpec) -> TransportMaker:
        payload = spec.payload()
        await self.wait_ready()
        options, event_loop = self.runtime._options, actor_event_loop(spec.factory)
        return lambda handle: ProcessTransport(spec.name, payload, options, handle._on_exit, event_loop)


class _RayBackend(_LocalBackend):
    """Ray actors (``ray``, an optional extra): the same interface on more machines than one."""

    def __init__(self, runtime: Runtime) -> None:
        import_ray()  # a ConfigError naming the extra, before anything starts
        self.runtime = runtime
        self._attached = False

    async def open(self) -> None:
        from . import _ray_cluster

        _ray_cluster.attach(self.runtime._address, self.runtime._ray_init)
        self._attached = True

    async def close(self) -> None:
        if self._attached:
            from . import _ray_cluster

            self._attached = False
            _ray_cluster.detach()

    async def transport(self, spec: _ActorSpec) -> TransportMaker:
        from ._ray_cluster import check_feasible

        payload = spec.payload()
        check_feasible(spec.name, spec.num_cpus, spec.num_gpus)
        opts = self.runtime._options
        options = RayOptions(opts.torch_threads, opts.stop_timeout, float(spec.num_cpus), float(spec.num_gpus))
        return lambda handle: RayTransport(spec.name, payload, options, handle._on_exit)

    def check_fits(self, count: int, num_cpus: float, num_gpus: float) -> None:
        from ._ray_cluster import check_feasible

        check_feasible("", num_cpus, num_gpus, count)

    def share(self, value: Any) -> Any:
        from ._ray_cluster import share

        return share(value)


_BACKENDS: dict[str, type[_LocalBackend]] = {"process": _ProcessBackend, "local": _LocalBackend, "ray": _RayBackend}
"""The one place a backend is chosen by name: a new backend is a class here and its transport."""


@dataclass(frozen=True)
class _ActorSpec:
    """What ``spawn`` was given for one actor."""

    name: str
    type_name: str
    factory: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    num_cpus: float
    num_gpus: float

    def payload(self) -> bytes:
        """The constructor and its arguments, pickled for another process."""
        try:
            return dumps_by_value((self.factory, self.args, self.kwargs))
        except Exception as exc:
            raise SerializationError(
                f"cannot pickle the constructor of actor {self.name!r} ({self.type_name}): {exc}"
            ) from exc


class Runtime:
    """Spawns actors and owns them; use through :func:`open_runtime`."""

    def __init__(
        self,
        backend: Backend = "process",
        *,
        start_method: str = "forkserver",
        preload: Sequence[str] | None = None,
        torch_threads: int | None = 1,
        niceness: int = 15,
        ring_bytes: int = 8 << 20,
        stop_timeout: float = 2.0,
        address: str | None = None,
        ray_init: Mapping[str, Any] | None = None,
    ) -> None:
        if backend not in _BACKENDS:
            raise ConfigError(f"backend must be 'process', 'local' or 'ray', not {backend!r}")
        if backend != "ray" and (address is not None or ray_init is not None):
            raise ConfigError(f"address and ray_init are options of backend='ray', not of {backend!r}")
        if start_method not in ("forkserver", "spawn"):
            raise ConfigError(f"start_method must be 'forkserver' or 'spawn', not {start_method!r}")
        if isinstance(niceness, bool) or not isinstance(niceness, int) or not 0 <= niceness <= 19:
            raise ConfigError(f"niceness must be an int from 0 to 19, not {niceness!r}")
        if ring_bytes < 4096:
            raise ConfigError(f"ring_bytes must be at least 4096, not {ring_bytes}")
        self.backend = backend
        self._options = ProcessOptions(
            start_method, torch_threads, niceness=niceness, ring_bytes=ring_bytes, stop_timeout=stop_timeout
        )
        self._address, self._ray_init = address, ray_init
        self._preload = preload_with_quick_exit(default_preload() if preload is None else preload)
        self._handles: list[ActorHandle] = []
        self._closed = False
        self._backend = _BACKENDS[backend](self)

    # -- lifecycle -------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        await self._backend.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def wait_ready(self) -> None:
        """Wait until the fork server has preloaded its modules."""
        await self._backend.wait_ready()

    async def aclose(self) -> None:
        """Stop every actor and release everything. Idempotent."""
        if self._closed:
            return
        self._closed = True
        # Shielded from our caller's cancellation: a half-closed runtime would
        # leave processes behind. A second cancel still interrupts the wait,
        # and the atexit hook then kills what is left.
        closing = asyncio.ensure_future(self._close_all())
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await closing
            raise
        _live_runtimes.discard(self)

    async def _close_all(self) -> None:
        await self._backend.settle()
        handles, self._handles = self._handles, []
        if handles:
            await asyncio.gather(*(h.close() for h in handles), return_exceptions=True)
        await self._backend.close()

    def _kill_now(self) -> None:
        for handle in self._handles:
            handle._kill_now()

    # -- actors ----------------------------------------------------------

    async def spawn(
        self,
        factory: Callable[..., Any],
        /,
        *args: Any,
        name: str | None = None,
        max_restarts: int = 0,
        num_cpus: float = 0,
        num_gpus: float = 0,
        **kwargs: Any,
    ) -> ActorHandle:
        """Create an actor from a class (or any callable returning an object).

        Constructor arguments follow ``factory``; ``name``, ``max_restarts``,
        ``num_cpus`` and ``num_gpus`` are the runtime's own keywords. The last
        two are what the actor reserves on a Ray cluster (none by default), and
        are ignored by the other backends.
        """
        if self._closed:
            raise ClosedError("the runtime is closed")
        if not callable(factory):
            raise TypeError(f"spawn() needs a class or a callable, not {type(factory).__name__} {factory!r}")
        if not isinstance(max_restarts, int) or max_restarts < 0:
            raise ConfigError(f"max_restarts must be a non-negative int, not {max_restarts!r}")
        for key, amount in (("num_cpus", num_cpus), ("num_gpus", num_gpus)):
            if not isinstance(amount, int | float) or isinstance(amount, bool) or amount < 0:
                raise ConfigError(f"{key} must be a non-negative number, not {amount!r}")
        type_name = getattr(factory, "__qualname__", type(factory).__qualname__)
        if isinstance(factory, type):  # a class: its methods are known before any process starts
            check_method_names(type_name, (n for n in dir(factory) if not n.startswith("_")
                                           and callable(getattr(factory, n, None))))  # fmt: skip
        name = name or f"{type_name}-{next(_names)}"
        spec = _ActorSpec(name, type_name, factory, args, kwargs, num_cpus, num_gpus)
        handle = ActorHandle(name, type_name, await self._backend.transport(spec), max_restarts)
        self._handles.append(handle)
        try:
            await handle._start()
        except BaseException:
            # Listed until it is closed: a runtime closing meanwhile (a sibling spawn
            # failed first) waits for this close instead of leaving the process behind.
            await handle.close()
            if handle in self._handles:
                self._handles.remove(handle)
            raise
        return handle

    def statistics(self) -> RuntimeStatistics:
        """A snapshot: actors alive, calls in flight, bytes moved."""
        handles = self._handles
        return RuntimeStatistics(
            backend=self.backend,
            actors_alive=sum(h.alive for h in handles),
            actors_spawned=len(handles),
            restarts=sum(h.restarts for h in handles),
            calls_in_flight=sum(h._in_flight for h in handles),
            calls_completed=sum(h._calls_completed for h in handles),
            bytes_moved=sum(h._bytes_moved for h in handles),
        )

    def check_fits(self, count: int, *, num_cpus: float = 0, num_gpus: float = 0) -> None:
        """On Ray: a ``ConfigError`` when ``count`` actors of these resources can never all run
        on the cluster (they would wait forever); nothing on the other backends."""
        self._backend.check_fits(count, num_cpus, num_gpus)

    def share(self, value: Any) -> Any:
        """What to pass to many actors instead of ``value``: on Ray, one reference to one copy in
        the object store (an actor receives the value itself); on the other backends, ``value``."""
        return self._backend.share(value)

    @property
    def closed(self) -> bool:
        return self._closed


def start_fork_server(preload: Sequence[str] | None = None) -> None:
    """Start the fork server now, in the background, and return at once.

    Its preloaded imports (torch above all) then overlap with whatever this
    process does next, typically importing the same modules itself; a
    runtime opened later finds the server warm. Without this call the first
    runtime starts the server. Only the first start's ``preload`` counts.
    ``import asyncflow.algorithms`` calls it (see ``start_fork_server_early``).
    """
    multiprocessing.get_context("forkserver").set_forkserver_preload(
        preload_with_quick_exit(default_preload() if preload is None else preload)
    )
    main = threading.current_thread() is threading.main_thread()
    if main:
        # The tracker first: its start unblocks SIGINT when it is done.
        global _tracker_started_with_server
        if multiprocessing.resource_tracker._resource_tracker._fd is None:  # type: ignore[attr-defined]
            _tracker_started_with_server = True
        multiprocessing.resource_tracker.ensure_running()
    with _sigint_blocked():
        if main:
            multiprocessing.forkserver.ensure_running()
        # Listed before it starts, so that stopping the server finds it even when a
        # Ctrl-C is raised in Thread.start; it keeps SIGINT blocked for its life.
        warmup = threading.Thread(
            target=_warm_forkserver, args=(_fork_server_pid(),), name="asyncflow-forkserver-warmup", daemon=True
        )
        _warmups[:] = [*(t for t in _warmups if t.is_alive()), warmup]
        warmup.start()


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Started with SIGINT blocked (the signal mask survives fork and exec), a fork
    server stays quiet on a Ctrl-C while it imports torch, then ignores SIGINT itself
    (forkserver.main); its actors ignore it too (_worker.main): the driver stops them.
    Blocked, not ignored, in this thread, as the resource tracker's own start does: a
    Ctrl-C that comes in the meantime is not lost. Ignoring it for that moment lost it,
    and the driver trained on (1 CI run in several, since this runs while the driver
    imports torch). Another thread of this process may still take the signal (numpy's
    BLAS threads have it unblocked), and Python then raises it in the main thread at
    once: what is started here is listed first, so that stopping finds it."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def start_fork_server_early() -> None:
    """``start_fork_server()``, unless this process is not a driver or the user opted out.

    ``import asyncflow.algorithms`` calls this before it imports torch, so that
    the server's imports run on the other core while the driver's run on this
    one: a script's first result comes about 2.5 s sooner on two cores
    (``benchmarks/startup.py``). A spare server without torch starts beside it
    (``torch_free_preload()``, well under a second of imports): a run whose workers
    need no torch takes the spare, warm by then, and the torch server is killed
    (``prefer_torch_free_fork_server``); the first runtime that uses the torch
    server kills the spare. Bad input still gets its ``ConfigError`` before any
    actor starts; idle servers leave with the driver.
    ``ASYNCFLOW_EARLY_FORK_SERVER=0`` leaves the start to the first runtime.
    Nothing happens in an actor, in the fork server itself, off the main
    thread, or when a server already runs.
    """
    if os.environ.get("ASYNCFLOW_EARLY_FORK_SERVER", "1") == "0":
        return
    if multiprocessing.parent_process() is not None or threading.current_thread() is not threading.main_thread():
        return
    if _fork_server_pid() is not None or imported_by_the_fork_server():
        return
    start_fork_server()
    if "torch" in _preloaded_by(_main_server()):
        global _spare
        spare = multiprocessing.forkserver.ForkServer()
        spare.set_forkserver_preload(preload_with_quick_exit(torch_free_preload()))
        _spare = spare  # first: a Ctrl-C raised in its start still finds it to stop
        with _sigint_blocked():
            spare.ensure_running()
    _pin_early_servers()


SHARED_CORE_MAX_CPUS = 3
"""On a machine with at most this many CPUs the early fork servers import on one CPU."""

_pinning = threading.Lock()
_pinned: list[int] | None = None  # the early servers pinned to one CPU, until they are warm


def _pin_early_servers() -> None:
    """Keep the early fork servers' imports to one CPU where CPUs are few, so that the
    driver's own import of torch has a core to itself, until they are warm.

    Three processes import at once here: the driver (torch), the torch server and the
    spare. On two cores each got about two thirds of one, and the driver waited. With
    the servers on the last CPU, ``from asyncflow.algorithms import PPO`` took 1.69-1.74 s
    against 1.91-2.01 s (4 runs each, torch alone 1.34-1.50 s), ``startup.py`` gave the
    first PPO result 1.97 s after launch against 2.23 s in the same hour, and DQN's
    (whose workers come from the torch server) came 2.21-2.43 s against 2.24-2.35 s
    (2-core VM, 2026-12-04). The warm-up, or the first runtime, whichever comes first,
    gives the servers all the driver's CPUs back (``_unpin_early_servers``), so what they
    fork later (a gymnasium ``AsyncVectorEnv`` on the forkserver context) is not held to
    one; an actor forked before that takes the driver's CPUs itself as it starts
    (``Bootstrap.cpus``). Where the OS has no CPU affinity, nothing happens."""
    global _pinned
    if not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > SHARED_CORE_MAX_CPUS:
        return
    with _pinning:
        if _pinned is not None or not any(t.is_alive() for t in _warmups):
            return  # pinned already, or warm already: nothing to keep off the driver's core
        pids = [pid for pid in (_fork_server_pid(), None if _spare is None else _spare._forkserver_pid) if pid]  # type: ignore[attr-defined]
        _pinned = pids
        _set_affinity(pids, {cpus[-1]})


def _unpin_early_servers() -> None:
    """The servers ``_pin_early_servers`` held to one CPU get the driver's CPUs back."""
    global _pinned
    with _pinning:
        pids, _pinned = _pinned or [], []  # [] (not None): pinning is over for this process
        if pids:
            _set_affinity(pids, os.sched_getaffinity(0))


def _set_affinity(pids: list[int], cpus: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):  # gone already (killed for the spare), or a sandbox forbids it
            os.sched_setaffinity(pid, cpus)


def prefer_torch_free_fork_server() -> None:
    """Serve this process's actors from the spare fork server, which preloads
    ``torch_free_preload()``, if the early one preloads torch and no runtime has used it
    yet: an algorithm whose workers never import torch calls this once its config is
    checked. ``import asyncflow.algorithms`` started both servers, not yet knowing the
    config; the torch image (about 100 MB of the run's PSS) would sit unused, so that
    server is killed. Without a spare (it was killed, or the early start was off) the
    server is restarted with ``torch_free_preload()``. Afterwards an actor that needs torch
    still runs: it imports torch itself, in 1.5 s or so and its own memory. Nothing
    happens when a runtime of this process used the server."""
    global _spare
    if _fork_server_used or _live_runtimes or _fork_server_pid() is None:
        return  # used; or not started, and the first runtime starts it with its own preload
    if "torch" not in _preloaded_by(_main_server()):
        return
    _kill_main_server()
    spare, _spare = _spare, None
    if spare is None or spare._forkserver_pid is None:  # type: ignore[attr-defined]
        start_fork_server(torch_free_preload())
        return
    server = _main_server()
    for name in ("_forkserver_address", "_forkserver_alive_fd", "_forkserver_pid", "_preload_modules"):
        setattr(server, name, getattr(spare, name))


def stop_fork_server() -> None:
    """Stop the fork servers, and the resource tracker if it started with them, when no
    runtime of this process has used them: the CLI calls it when the input it started
    them for is bad, so that the error leaves no process behind."""
    global _tracker_started_with_server
    if _fork_server_used or _live_runtimes:
        return
    _kill_main_server()
    _kill_spare()
    if _tracker_started_with_server:
        _tracker_started_with_server = False
        multiprocessing.resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]


def _main_server() -> Any:
    return multiprocessing.forkserver._forkserver  # type: ignore[attr-defined]


def _preloaded_by(server: Any) -> list[str]:
    return server._preload_modules  # type: ignore[no-any-return]


def _kill_main_server() -> None:
    if _fork_server_pid() is None:
        return
    _stopping_server.set()
    try:
        while _fork_server_pid() is not None:  # again if a warm-up restarted it meanwhile
            _kill(_main_server())
            for warmup in _warmups:
                if warmup.is_alive():
                    warmup.join()  # it returns as soon as its connection breaks
    finally:
        _stopping_server.clear()
    _warmups.clear()


def _kill_spare() -> None:
    global _spare
    spare, _spare = _spare, None
    if spare is not None:
        _kill(spare)


def _kill(server: Any) -> None:
    """SIGKILL a fork server (it may be importing torch: no need to wait for that) and reap it."""
    if server._forkserver_pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server._forkserver_pid, signal.SIGKILL)
    server._stop()


def _fork_server_pid() -> int | None:
    return multiprocessing.forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined, no-any-return]


def _warm_forkserver(server_pid: int | None = None) -> None:
    """Start a no-op actor: it starts once the server has imported. ``server_pid``: the
    server already running when this was asked for; None starts one if none runs."""
    try:
        if _stopping_server.is_set():
            return  # stopped before this thread ran: starting an actor would restart the server
        process = ActorProcess(target=_noop, name="asyncflow:warmup")
        process.start()
    except (OSError, EOFError):
        if _stopping_server.is_set() or server_pid not in (None, _fork_server_pid()):
            return  # the server was stopped, or replaced, meanwhile
        raise
    finally:
        _unpin_early_servers()  # warm (the spare's imports are the shorter), or gone
    process.join()
    process.close()


@asynccontextmanager
async def open_runtime(backend: Backend = "process", **options: Any) -> AsyncIterator[Runtime]:
    """Open a runtime; every actor it spawned is gone when the block ends.

    ``backend`` is ``"process"`` (default: one process per actor) or
    ``"local"`` (objects in this process, for debugging and exact replay).
    Options: ``start_method`` ("forkserver" or "spawn"), ``preload`` (modules
    the fork server imports), ``torch_threads`` (per actor; None leaves torch
    alone), ``niceness`` (0-19, default 15 as Ray's workers: actor processes
    yield the CPU to the driver, whose loop stays responsive), ``ring_bytes``
    (size of each shared-memory ring), ``stop_timeout``.
    """
    runtime = Runtime(backend, **options)
    async with runtime:
        yield runtime


@atexit.register
def _kill_leftovers() -> None:
    for runtime in list(_live_runtimes):
        runtime._kill_now()
