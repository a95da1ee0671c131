"""The event loop an actor process runs: uvloop by default, asyncio's on
``PreciseEpollSelector`` for an actor class that asks for precise timers
(``AsyncRolloutWorker``); the selector itself against real descriptors."""

from __future__ import annotations

import asyncio
import os
import selectors

import pytest

import asyncflow
from asyncflow.actors._loop import PreciseEpollSelector, actor_event_loop, new_actor_loop
from asyncflow.rl import AsyncRolloutWorker, RolloutWorker


class LoopReporter:
    """Says which loop and selector its process runs."""

    def describe(self) -> tuple[str, str]:
        loop = asyncio.get_running_loop()
        selector = getattr(loop, "_selector", None)
        return type(loop).__module__, type(selector).__name__


class PreciseLoopReporter(LoopReporter):
    actor_event_loop = "precise"

    @classmethod
    def create(cls) -> PreciseLoopReporter:
        return cls()


def test_the_loop_follows_the_factory() -> None:
    assert actor_event_loop(AsyncRolloutWorker.create) == "precise"
    assert actor_event_loop(AsyncRolloutWorker) == "precise"
    assert actor_event_loop(PreciseLoopReporter.create) == "precise"
    assert actor_event_loop(RolloutWorker) == "uvloop"
    assert actor_event_loop(LoopReporter) == "uvloop"
    assert actor_event_loop(lambda: None) == "uvloop"


async def test_actor_processes_run_the_loop_their_class_asks_for(process_runtime: asyncflow.Runtime) -> None:
    uvloop = pytest.importorskip("uvloop", reason="uvloop is the default loop only where it is installed")
    default, precise, bound = await asyncio.gather(
        process_runtime.spawn(LoopReporter),
        process_runtime.spawn(PreciseLoopReporter),
        process_runtime.spawn(PreciseLoopReporter.create),
    )
    module, _ = await default.describe()
    assert module == uvloop.Loop.__module__
    for actor in (precise, bound):
        assert await actor.describe() == ("asyncio.unix_events", "PreciseEpollSelector")


def test_precise_selector_reports_ready_descriptors_and_times_out_empty() -> None:
    read_fd, write_fd = os.pipe()
    selector = PreciseEpollSelector()
    try:
        selector.register(read_fd, selectors.EVENT_READ, "pipe")
        assert selector.select(0.002) == []  # nothing written: the timeout passes, no event
        assert selector.select(0) == []
        os.write(write_fd, b"x")
        for timeout in (30.0, 0.0005, 0, None):  # ready now: every wait returns the event at once
            events = selector.select(timeout)
            assert [(key.fd, key.data, mask) for key, mask in events] == [(read_fd, "pipe", selectors.EVENT_READ)]
        os.read(read_fd, 1)
        selector.unregister(read_fd)
        assert selector.select(0.001) == []
    finally:
        selector.close()
        os.close(read_fd)
        os.close(write_fd)


def test_precise_loop_runs_timers_and_io() -> None:
    loop = new_actor_loop("precise")
    read_fd, write_fd = os.pipe()
    try:

        async def main() -> tuple[float, bytes]:
            start = loop.time()
            await asyncio.sleep(0.0005)
            slept = loop.time() - start
            got: asyncio.Future[bytes] = loop.create_future()
            loop.add_reader(read_fd, lambda: got.set_result(os.read(read_fd, 1)))
            loop.call_later(0.001, os.write, write_fd, b"y")
            try:
                return slept, await asyncio.wait_for(got, 30)
            finally:
                loop.remove_reader(read_fd)

        slept, data = loop.run_until_complete(main())
        assert slept >= 0.0005 - 1e-6  # a sub-millisecond timer never fires early
        assert data == b"y"
    finally:
        loop.close()
        os.close(read_fd)
        os.close(write_fd)
