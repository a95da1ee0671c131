"""The ring and channel, in one process over real shared memory, and large messages."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import asyncflow
from asyncflow.actors._channel import Message, Receiver, Sender
from asyncflow.actors._doorbell import Doorbell
from asyncflow.actors._ring import Ring, RingReader, RingWriter

from .helpers import Counter

_arrays = st.builds(
    lambda n, dtype, seed: np.random.default_rng(seed).integers(0, 255, n).astype(dtype),
    st.integers(0, 3000),
    st.sampled_from([np.uint8, np.int32, np.float64]),
    st.integers(0, 2**16),
)
_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(), st.binary(max_size=5000), _arrays
)
_payloads = st.recursive(
    _leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=10,
)


def _equal(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=60, deadline=None)
@given(st.lists(_payloads, min_size=1, max_size=12), st.sampled_from([4096, 6000, 65536]))
def test_random_payloads_survive_a_small_ring(payloads: list[object], capacity: int) -> None:
    """Wrap-around, streaming of messages larger than the ring, and backlog."""
    ring = Ring(capacity=capacity)
    bell = Doorbell()
    try:
        sender = Sender(RingWriter(ring, bell))
        receiver = Receiver(RingReader(ring, bell))
        received: list[Message] = []
        for i, payload in enumerate(payloads):
            sender.send(i, 6, payload)
            while sender.backlogged:
                receiver.receive(received)
                sender.flush()
        receiver.receive(received)
        assert [tag for tag, _, _ in received] == list(range(len(payloads)))
        for (_, _, got), want in zip(received, payloads, strict=True):
            assert _equal(got, want)
    finally:
        ring.close()
        ring.unlink()
        bell.close()


@pytest.mark.parametrize("size", [0, 64, 4096, 1 << 20])
def test_received_arrays_are_writable_and_outlive_the_ring_bytes(size: int) -> None:
    """Small arrays come out as bytearray-backed copies, large ones as numpy
    memory: either way the receiver owns a writable array, and what the
    producer writes over those ring bytes later does not reach it."""
    ring = Ring(capacity=1 << 21)
    bell = Doorbell()
    try:
        sender = Sender(RingWriter(ring, bell))
        receiver = Receiver(RingReader(ring, bell))
        sent = np.arange(size, dtype=np.uint8)
        received: list[Message] = []

        def send(tag: int, payload: object) -> None:
            sender.send(tag, 6, payload)
            while sender.backlogged:  # larger than the ring: it streams through
                receiver.receive(received)
                sender.flush()
            receiver.receive(received)

        send(1, ("take", (sent, sent.astype(np.float32)), {}))
        [(_, _, (_, (a, b), _))] = received
        for _ in range(12):  # 3 MiB through a 2 MiB ring: every byte of it is overwritten
            send(2, np.full(256 << 10, 255, np.uint8))
        assert len(received) == 13
        np.testing.assert_array_equal(a, sent)
        np.testing.assert_array_equal(b, sent.astype(np.float32))
        for got in (a, b):
            assert got.flags.writeable
            got[...] = 1
        np.testing.assert_array_equal(a, np.ones(size, np.uint8))
    finally:
        ring.close()
        ring.unlink()
        bell.close()


def test_a_receive_budget_hands_a_flood_over_in_parts() -> None:
    """With a budget, messages come out a few at a time (each batch is handled,
    and its arrays freed, before the next is read), and none is lost."""
    ring = Ring(capacity=16 << 20)
    bell = Doorbell()
    try:
        sender = Sender(RingWriter(ring, bell))
        receiver = Receiver(RingReader(ring, bell))
        for i in range(5):
            sender.send(i, 6, np.full(1 << 20, i, np.uint8))
        parts: list[list[Message]] = []
        more = True
        while more:
            got: list[Message] = []
            more = receiver.receive(got, budget=2 << 20)
            parts.append(got)
        assert [len(p) for p in parts] == [2, 2, 1]
        received = [m for p in parts for m in p]
        assert [tag for tag, _, _ in received] == [0, 1, 2, 3, 4]
        assert all(int(payload[0]) == tag for tag, _, payload in received)
    finally:
        ring.close()
        ring.unlink()
        bell.close()


@pytest.mark.parametrize("size", [0, 1, 4096, 1 << 20, 9 << 20, 64 << 20])
async def test_messages_from_0_bytes_to_64_mib(process_runtime: asyncflow.Runtime, size: int) -> None:
    c = await process_runtime.spawn(Counter)
    payload = np.frombuffer(np.random.default_rng(size).bytes(size), np.uint8)
    echoed = await c.echo(payload)
    assert echoed.nbytes == size and np.array_equal(echoed, payload)
    blob = bytes(payload[: min(size, 1 << 20)])
    assert await c.echo(blob) == blob


@pytest.mark.timeout(60)
async def test_many_large_messages_in_flight(process_runtime: asyncflow.Runtime) -> None:
    """More data in flight than both rings hold: backlogs and streaming on both sides.

    This once lost a wake-up when a streamed frame's reader counted bytes it
    had not consumed as seen; it hung in about half of the runs.
    """
    import asyncio

    c = await process_runtime.spawn(Counter)
    arrays = [np.full(1 << 20, i, np.float32) for i in range(12)]  # 48 MiB
    results = await asyncio.gather(*(c.echo(a) for a in arrays))
    for i, r in enumerate(results):
        assert r.shape == (1 << 20,) and r[0] == i and r[-1] == i


@pytest.mark.timeout(60)
async def test_replies_landing_at_random_moments_are_never_lost(process_runtime: asyncflow.Runtime) -> None:
    """Replies published while the driver is between "look at the ring" and
    "say I sleep" must still wake it: a lost wake-up hangs here."""
    import asyncio
    import threading

    from .helpers import Jitter

    a, b = await process_runtime.spawn(Jitter, 1), await process_runtime.spawn(Jitter, 2)
    # A thread that competes for the GIL, as a learner thread does: the loop
    # thread then pauses at arbitrary points, which widens any race window.
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        for round_ in range(250):
            calls = [actor.later(round_ * 100 + i) for i in range(25) for actor in (a, b)]
            results = await asyncio.wait_for(asyncio.gather(*calls), timeout=10)
            assert sorted(results) == sorted(round_ * 100 + i for i in range(25) for _ in (a, b))
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (2, 3, 4), (1, 70_000)])
@pytest.mark.parametrize("dtype", [np.bool_, np.int16, np.float64, np.complex64])
def test_arrays_keep_shape_and_dtype(shape: tuple[int, ...], dtype: type) -> None:
    ring = Ring(capacity=1 << 20)
    bell = Doorbell()
    try:
        sender = Sender(RingWriter(ring, bell))
        receiver = Receiver(RingReader(ring, bell))
        sent = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
        sender.send(1, 6, {"x": sent, "t": (sent,)})
        received: list[Message] = []
        receiver.receive(received)
        [(_, _, got)] = received
        for array in (got["x"], got["t"][0]):
            assert array.shape == shape and array.dtype == dtype
            np.testing.assert_array_equal(array, sent)
    finally:
        ring.close()
        ring.unlink()
        bell.close()
