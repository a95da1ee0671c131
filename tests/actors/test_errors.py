"""Errors: remote exceptions, serialization failures, bad input."""

from __future__ import annotations

import pytest

import asyncflow
from asyncflow import ClosedError, ConfigError, RemoteError, RemoteTraceback, SerializationError

from .helpers import Broken, Counter


async def test_remote_exception_keeps_type_and_traceback(remote_runtime: asyncflow.Runtime) -> None:
    c = await remote_runtime.spawn(Counter)
    with pytest.raises(ValueError, match="boom") as info:
        await c.fail("boom")
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "in fail" in cause.tb and "ValueError: boom" in cause.tb
    assert await c.add(1) == 1  # the actor is still usable


async def test_exception_that_cannot_be_rebuilt_is_a_remote_error(remote_runtime: asyncflow.Runtime) -> None:
    c = await remote_runtime.spawn(Counter)
    with pytest.raises(RemoteError, match="Unpicklable: custom:1") as info:
        await c.fail_custom()
    assert info.value.type_name.endswith("helpers.Unpicklable")
    assert isinstance(info.value.__cause__, RemoteTraceback)


async def test_unpicklable_argument_fails_at_the_call(remote_runtime: asyncflow.Runtime) -> None:
    import threading

    c = await remote_runtime.spawn(Counter)
    with pytest.raises(SerializationError, match=r"echo\(\).*lock"):
        c.echo(threading.Lock())
    assert await c.add(2) == 2


async def test_unpicklable_result_names_type_and_method(remote_runtime: asyncflow.Runtime) -> None:
    c = await remote_runtime.spawn(Counter)
    with pytest.raises(SerializationError, match=r"return_lock\(\).*lock"):
        await c.return_lock()
    assert await c.add(3) == 3


async def test_constructor_error_reaches_spawn(runtime: asyncflow.Runtime) -> None:
    with pytest.raises(RuntimeError, match="constructor failed on purpose"):
        await runtime.spawn(Broken)
    assert runtime.statistics().actors_spawned == 0


async def test_unknown_method_fails_at_access(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter)
    with pytest.raises(AttributeError, match=r"no method 'nope'.*add"):
        c.nope  # noqa: B018
    with pytest.raises(AttributeError, match="no method 'nope'"):
        c.call("nope")


async def test_spawn_needs_a_callable(runtime: asyncflow.Runtime) -> None:
    with pytest.raises(TypeError, match="class or a callable"):
        await runtime.spawn(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_restarts"):
        await runtime.spawn(Counter, max_restarts=-1)


async def test_closed_runtime_and_closed_actor(backend: str) -> None:
    async with asyncflow.open_runtime(backend) as rt:  # type: ignore[arg-type]
        c = await rt.spawn(Counter)
        await c.close()
        with pytest.raises(ClosedError):
            await c.add(1)
        d = await rt.spawn(Counter)
    with pytest.raises(ClosedError):
        await rt.spawn(Counter)
    with pytest.raises(ClosedError):
        await d.add(1)


def test_bad_runtime_options_fail_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match="backend"):
        asyncflow.Runtime("threads")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ring_bytes"):
        asyncflow.Runtime(ring_bytes=10)
    for niceness in (-1, 20, 1.5, True):
        with pytest.raises(ConfigError, match="niceness"):
            asyncflow.Runtime(niceness=niceness)  # type: ignore[arg-type]
