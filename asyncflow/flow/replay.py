"""Replay operators: ``store_to_replay_buffer``, ``replay``, ``mix_in_replay``.

A buffer is either local (a ``ReplayBuffer`` in the driver) or a list of
replay actors (``ReplayActor`` shards in their own processes, as Ape-X uses).
Replayed batches carry ``source`` (the buffer or shard they came from) and
``batch_indexes``, so priorities can go back to where the rows live.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Iterator, Sequence

import numpy as np

from ..actors import ActorHandle
from ..errors import ConfigError
from ..rl.data.replay_buffer import ReplayBuffer
from ..rl.data.sample_batch import SampleBatch, concat_samples
from ..rl.sampling.protocols import ReplayShard
from ..rl.sampling.worker_set import WorkerSet
from ._context import FlowContext, current_context
from ._util import closing, named
from .rollouts import _as_completed

__all__ = ["mix_in_replay", "replay", "store_to_replay_buffer"]

NUM_ROWS_STORED = "num_rows_stored"

Buffers = ReplayBuffer | WorkerSet | Sequence[ActorHandle]
"""A local buffer, or replay actors: handles, or a ``WorkerSet`` of them (which gives each call
its deadline and waits for a restarted shard)."""


@contextlib.contextmanager
def _changes(buffer: ReplayBuffer | None) -> Iterator[asyncio.Event]:
    """An event set whenever ``buffer`` changes, for as long as the block runs
    (the listener goes when the operator is closed, not with the buffer)."""
    event = asyncio.Event()
    if buffer is None:
        yield event
        return
    buffer.on_change(event.set)
    try:
        yield event
    finally:
        buffer.remove_listener(event.set)


def _shards(buffer: Buffers) -> WorkerSet | None:
    if isinstance(buffer, ReplayBuffer):
        return None
    if isinstance(buffer, WorkerSet):
        return buffer
    shards = list(buffer)
    if not shards or not all(isinstance(s, ActorHandle) for s in shards):
        raise TypeError("expected a ReplayBuffer, a WorkerSet or a non-empty list of replay actor handles")
    return WorkerSet(shards)


async def store_to_replay_buffer(
    source: AsyncIterable[SampleBatch],
    buffer: Buffers,
    *,
    learning_starts: int = 0,
    min_replay_ratio: float | None = None,
    ctx: FlowContext | None = None,
) -> AsyncIterator[SampleBatch]:
    """Add each batch to the buffer (to the shards in turn), then pass it on.

    Nothing is passed on until ``learning_starts`` rows are stored: in a
    round robin with a replay branch, the replay branch then never waits on
    an empty buffer (RLlib signals "not ready" with a sentinel instead).

    ``min_replay_ratio`` (local buffer) holds a batch back until the rows
    replayed reach that many times the rows added beyond
    ``learning_starts``: with ``replay(max_replay_ratio=...)`` on the other
    side, sampling and training keep a fixed ratio while running freely in
    an ``async`` plan (Reverb's sample-to-insert rate limiter). Pick
    ``learning_starts >= batch_size / ratio`` so both sides can always move.
    """
    ctx = ctx or current_context()
    shards = _shards(buffer)  # a WorkerSet: retries on a shard that was restarted
    local = buffer if isinstance(buffer, ReplayBuffer) and min_replay_ratio is not None else None
    with named("store_to_replay_buffer"), _changes(local) as replayed:
        turn = 0

        def behind() -> bool:
            assert isinstance(buffer, ReplayBuffer) and min_replay_ratio is not None
            return buffer.sampled < min_replay_ratio * (buffer.added - learning_starts)

        async with closing(source) as batches:
            async for batch in batches:
                rows = SampleBatch(batch)  # the columns only: episode records stay with the flow
                if shards is None:
                    assert isinstance(buffer, ReplayBuffer)
                    while min_replay_ratio is not None and behind():
                        replayed.clear()
                        await replayed.wait()
                    buffer.add(rows)
                else:
                    await shards.call(shards.workers[turn % len(shards)], ReplayShard.add, rows)
                    turn += 1
                ctx.add(NUM_ROWS_STORED, len(rows))
                if ctx.get(NUM_ROWS_STORED) >= learning_starts:
                    yield batch


async def replay(
    buffer: Buffers,
    batch_size: int,
    *,
    num_async: int = 1,
    min_size: int = 1,
    max_replay_ratio: float | None = None,
) -> AsyncIterator[SampleBatch]:
    """Sampled batches of ``batch_size`` rows, forever.

    From a local buffer: waits (on the buffer's add notification, not by
    polling) until it holds ``min_size`` rows, and, with
    ``max_replay_ratio``, until replaying one more batch keeps the rows
    replayed at most that many times the rows added (a rate limiter for
    plans whose branches run freely). From replay actors: keeps
    ``num_async`` requests in flight per shard; each shard answers once it
    holds enough rows, and batches come out as they arrive.
    """
    if batch_size < 1:
        raise ConfigError(f"replay(): batch_size must be >= 1, not {batch_size}")
    shards = _shards(buffer)
    with named("replay"):
        if shards is None:
            assert isinstance(buffer, ReplayBuffer)

            def allowed() -> bool:
                if len(buffer) < min_size:
                    return False
                return max_replay_ratio is None or buffer.sampled + batch_size <= max_replay_ratio * buffer.added

            with _changes(buffer) as grown:
                while True:
                    while not allowed():
                        grown.clear()
                        await grown.wait()
                    batch = buffer.sample(batch_size)
                    batch.source = buffer
                    yield batch
        else:
            replayed = _as_completed(shards, ReplayShard.replay, num_async, batch_size, deadline=False)
            async with closing(replayed) as results:
                async for shard, batch in results:
                    batch.source = shard
                    yield batch


async def mix_in_replay(
    source: AsyncIterable[SampleBatch], buffer: ReplayBuffer, replay_proportion: float, *, seed: int = 0
) -> AsyncIterator[SampleBatch]:
    """Store each new batch and yield it together with replayed rows.

    On average ``replay_proportion`` batches of the same size are replayed per
    new batch (the fractional part is drawn at random): IMPALA's replay mixing.
    """
    if replay_proportion < 0:
        raise ConfigError(f"mix_in_replay(): replay_proportion must be >= 0, not {replay_proportion}")
    rng = np.random.default_rng(seed)
    with named("mix_in_replay"):
        async with closing(source) as batches:
            async for batch in batches:
                buffer.add(SampleBatch(batch))
                k = int(replay_proportion) + int(rng.random() < replay_proportion % 1)
                replayed = [buffer.sample(len(batch)) for _ in range(k)]
                keys = batch.keys()
                mixed = concat_samples([batch, *(SampleBatch({c: r[c] for c in keys}) for r in replayed)])
                mixed.source = batch.source
                yield mixed
