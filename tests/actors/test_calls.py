"""Calls, results and concurrency, on both backends."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import asyncflow

from .helpers import Counter


async def test_calls_return_results(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter, 10, name="counter")
    assert c.name == "counter"
    assert await c.add(5) == 15
    results = await asyncio.gather(*(c.add(1) for _ in range(100)))
    assert sorted(results) == list(range(16, 116))
    assert await c.call("add", 0) == 115


async def test_sync_calls_run_in_call_order(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter)
    await asyncio.gather(*(c.add(i) for i in range(200)))
    assert await c.get_log() == list(range(200))


async def test_async_methods_overlap(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter)
    results = await asyncio.gather(*(c.add_together(1, 10) for _ in range(10)))
    assert sorted(results) == list(range(1, 11))
    assert (await c.stats())["max_running"] == 10


async def test_arrays_round_trip(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter)
    rng = np.random.default_rng(0)
    for shape, dtype in [((0,), np.float32), ((7,), np.int64), ((1024, 1024), np.float32), ((3, 5, 2), np.uint8)]:
        x = (rng.random(shape) * 100).astype(dtype)
        y = await c.echo(x)
        assert y.dtype == x.dtype and y.shape == x.shape
        np.testing.assert_array_equal(y, x)
    view = np.arange(20.0).reshape(4, 5)[:, 1]  # not contiguous: goes in band
    np.testing.assert_array_equal(await c.echo(view), view)


async def test_received_arrays_are_writable_copies(remote_runtime: asyncflow.Runtime) -> None:
    c = await remote_runtime.spawn(Counter)
    for size in (1000, 1 << 20):  # Ray: small values travel inline, large ones through its object store
        x = np.zeros(size, np.float64)
        y = await c.echo({"a": [x, (x, 1)]})
        for got in (y["a"][0], y["a"][1][0]):
            got[0] = 1.0
            assert x[0] == 0.0
        assert await c.write_into({"w": x}) == 1.0  # arguments too, on the actor's side


async def test_torch_tensors_round_trip(runtime: asyncflow.Runtime) -> None:
    torch = pytest.importorskip("torch")
    c = await runtime.spawn(Counter)
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    out = await c.echo({"w": t, "p": torch.nn.Parameter(torch.ones(2))})
    assert torch.equal(out["w"], t)
    assert out["p"].requires_grad and torch.equal(out["p"].detach(), torch.ones(2))


async def test_ten_thousand_concurrent_calls(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter)
    results = await asyncio.gather(*(c.add(1) for _ in range(10_000)))
    assert sorted(results) == list(range(1, 10_001))


async def test_notify_runs_without_reply(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter)
    for _ in range(50):
        c.add.notify(2)
    assert await c.add(0) == 100


async def test_drain_waits_for_the_backlog(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter)
    await c.drain()  # nothing sent: done at once
    await c.add(0)


async def test_drain_gives_backpressure_through_a_small_ring(tmp_path: Path) -> None:
    """Each 1 MiB notify overflows a 64 KiB ring: it waits in the sender's
    backlog until the actor reads, and drain() returns only once it is written.

    The actor is held (blocked in a method, reading nothing) while we notify, so
    that the backlog does not depend on how fast the other core reads."""
    async with asyncflow.open_runtime(ring_bytes=64 << 10) as rt:
        c = await rt.spawn(Counter)
        payload = np.arange(1 << 18, dtype=np.float32)  # 1 MiB
        for i in range(5):
            started, release = tmp_path / f"started{i}", tmp_path / f"release{i}"
            held = asyncio.ensure_future(c.hold(str(started), str(release)))
            while not started.exists():
                await asyncio.sleep(0.005)
            c.notify("echo", payload)
            assert c._transport.backlogged  # 64 KiB in the ring, the rest waits
            drained = asyncio.ensure_future(c.drain())
            await asyncio.sleep(0.05)
            assert not drained.done()  # nobody reads: drain() waits
            release.touch()
            await drained
            assert not c._transport.backlogged
            await held
        assert await c.add(1) == 1  # the actor took all five before this call
        assert rt.statistics().bytes_moved > 5 << 20


async def test_notify_failure_surfaces_at_next_call(remote_runtime: asyncflow.Runtime) -> None:
    c = await remote_runtime.spawn(Counter)
    c.notify("fail", "from notify")
    await c.add(0)  # round trip: the error report has arrived by now
    with pytest.raises(ValueError, match="from notify"):
        await c.add(0)
    assert await c.add(1) == 1


async def test_statistics_is_a_frozen_snapshot(runtime: asyncflow.Runtime) -> None:
    c = await runtime.spawn(Counter)
    await asyncio.gather(*(c.echo(np.zeros(1000)) for _ in range(10)))
    stats = runtime.statistics()
    assert stats.actors_alive == 1 and stats.calls_in_flight == 0
    assert stats.calls_completed >= 10
    if runtime.backend != "local":  # nothing moves in-process
        assert stats.bytes_moved >= 10 * 8000 * 2  # ten 8 kB arrays, there and back
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.actors_alive = 3  # type: ignore[misc]


async def test_pid_and_name_are_visible(remote_runtime: asyncflow.Runtime) -> None:
    import os

    c = await remote_runtime.spawn(Counter, name="visible")
    assert c.pid == await c.getpid() != os.getpid()
    assert "visible" in repr(c)


async def test_local_backend_runs_sync_methods_inline() -> None:
    async with asyncflow.open_runtime("local") as rt:
        c = await rt.spawn(Counter)
        first = c.add(1)
        second = c.add(2)
        assert first.done() and second.done()  # type: ignore[attr-defined]
        assert await first == 1 and await second == 3


async def test_local_backend_raises_the_original_exception() -> None:
    async with asyncflow.open_runtime("local") as rt:
        c = await rt.spawn(Counter)
        with pytest.raises(ValueError, match="plain") as info:
            await c.fail("plain")
        assert info.value.__cause__ is None
        assert any(entry.name == "fail" for entry in info.traceback)


async def test_spawn_a_factory_function(runtime: asyncflow.Runtime) -> None:
    def make() -> Counter:
        return Counter(41)

    c = await runtime.spawn(make)
    assert await c.add(1) == 42


async def test_class_defined_in_a_closure(runtime: asyncflow.Runtime) -> None:
    offset = 7

    class Local:
        def shift(self, x: int) -> int:
            return x + offset

    c = await runtime.spawn(Local)
    assert await c.shift(1) == 8
    assert await c.call("shift", 2) == 9
    square = await c.shift.__call__(3)
    assert square == 10


async def test_lambda_as_argument(remote_runtime: asyncflow.Runtime) -> None:
    class Apply:
        def apply(self, fn, x):  # type: ignore[no-untyped-def]
            return fn(x)

    c = await remote_runtime.spawn(Apply)
    assert await c.apply(lambda v: v * 3, 5) == 15
