"""Learner operators for off-policy and asynchronous plans.

``learn_on_batches`` trains on each batch as it comes; ``train_async`` keeps
sampling going while it trains. Both yield ``Trained`` items that remember
where their batch came from, so the operators after them send messages back
to that place: ``sync_weights(to_source=True)`` sends new weights to the
worker that produced the batch, ``update_priorities`` sends TD errors to the
buffer or replay shard that held it, and ``update_target_network`` counts
what was trained.

A learner is a ``rl.policy.Learner``: ``learn_on_batch(batch)`` returns its stats,
or a ``ReplayUpdate`` whose TD errors become ``Trained.td_error``, and
``get_weights()``; ``update_target()`` where a target network exists.
``learn_on_batches`` is ``train_one_step``'s plain sibling: one update per batch
and no weights sent, for plans that send them with ``sync_weights``.

Why a thread and not a learner actor: the learner's weights are read by the
plan after every step (to broadcast them) and its state is checkpointed in
the driver; one dedicated thread with one torch thread keeps both as plain
attribute access, and torch releases the GIL for the heavy kernels, so the
event loop keeps dispatching samples while it trains. A learner process
would add a copy of every batch and of every weight vector, for no gain on
one machine's CPU.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..actors import ActorHandle
from ..errors import ConfigError
from ..rl.data.replay_buffer import BATCH_INDEXES, ReplayBuffer
from ..rl.data.sample_batch import SampleBatch
from ..rl.policy import Learner, ReplayUpdate, TargetLearner
from ..rl.sampling.protocols import ReplayShard
from ..rl.sampling.worker_set import WorkerSet
from ._context import NUM_ENV_STEPS_TRAINED, NUM_LEARNER_STEPS, FlowContext, current_context
from ._util import closing, named
from .concurrency import _fan_in
from .learner_thread import in_learner_thread

__all__ = [
    "Trained",
    "sync_weights",
    "train_async",
    "learn_on_batches",
    "update_priorities",
    "update_target_network",
    "update_worker_weights",
]

NUM_TARGET_UPDATES = "num_target_updates"


@dataclass
class Trained:
    """What one learner step did, and where its batch came from."""

    info: dict[str, float]
    count: int
    source: Any = None
    indexes: np.ndarray | None = None
    td_error: np.ndarray | None = None


def _learn(learner: Learner, batch: SampleBatch) -> Trained:
    result = learner.learn_on_batch(batch)
    indexes = batch.get(BATCH_INDEXES)
    if isinstance(result, ReplayUpdate):
        return Trained(dict(result.stats), len(batch), batch.source, indexes, result.td_error)
    return Trained(dict(result), len(batch), batch.source, indexes)


def _count_trained(ctx: FlowContext, item: Trained) -> None:
    ctx.add(NUM_ENV_STEPS_TRAINED, item.count)
    ctx.add(NUM_LEARNER_STEPS, 1)
    ctx.learner_info = item.info


async def learn_on_batches(
    source: AsyncIterable[SampleBatch], learner: Learner, ctx: FlowContext | None = None
) -> AsyncIterator[Trained]:
    """One learner update per batch, in the learner thread; yields what it trained.
    Unlike ``train_one_step`` it sends no weights (``sync_weights`` does)."""
    ctx = ctx or current_context()
    with named("learn_on_batches"):
        async with closing(source) as batches:
            async for batch in batches:
                with ctx.timer("learn"):
                    item = await ctx.learner_thread.run(_learn, learner, batch)
                _count_trained(ctx, item)
                yield item


async def train_async(
    source: AsyncIterable[SampleBatch], learner: Learner, *, queue_size: int = 4, ctx: FlowContext | None = None
) -> AsyncIterator[Trained]:
    """Train while sampling continues.

    The source runs in its own task and feeds a queue of ``queue_size``
    batches; the learner thread takes them one by one. A full queue makes
    the source wait (sampling slows to the learner's pace instead of piling
    up batches); closing this operator cancels the source and waits for the
    learner step in progress to end.
    """
    if queue_size < 1:
        raise ConfigError(f"train_async(): queue_size must be >= 1, not {queue_size}")
    ctx = ctx or current_context()
    with named("train_async"):
        async with closing(_fan_in([source], maxsize=queue_size)) as batches:
            async for _, batch in batches:
                with ctx.timer("learn"):
                    item = await ctx.learner_thread.run(_learn, learner, batch)
                _count_trained(ctx, item)
                yield item


async def update_priorities(source: AsyncIterable[Trained]) -> AsyncIterator[Trained]:
    """Send each item's TD errors back to the buffer or replay shard its batch came from."""
    with named("update_priorities"):
        async with closing(source) as items:
            async for item in items:
                if item.td_error is not None and item.indexes is not None:
                    if isinstance(item.source, ReplayBuffer):
                        item.source.update_priorities(item.indexes, item.td_error)
                    elif isinstance(item.source, ActorHandle):
                        item.source.notify(ReplayShard.update_priorities, item.indexes, item.td_error)
                yield item


async def sync_weights(
    source: AsyncIterable[Trained],
    learner: Learner,
    workers: WorkerSet,
    *,
    to_source: bool = False,
    every: int = 1,
) -> AsyncIterator[Trained]:
    """After every ``every`` items, send the learner's weights to all workers,
    or (``to_source=True``) only to the worker the item's batch came from."""
    if every < 1:
        raise ConfigError(f"sync_weights(): every must be >= 1, not {every}")
    with named("sync_weights"):
        async with closing(source) as items:
            count = 0
            async for item in items:
                count += 1
                if count % every == 0:
                    weights = await in_learner_thread(learner.get_weights)  # between two learner steps
                    if to_source and isinstance(item.source, ActorHandle) and item.source in workers.workers:
                        await workers.broadcast(weights, to=[item.source])
                    else:
                        await workers.broadcast(weights)
                yield item


async def update_target_network(
    source: AsyncIterable[Trained],
    learner: TargetLearner,
    freq: int,
    *,
    by_steps_trained: bool = True,
    ctx: FlowContext | None = None,
) -> AsyncIterator[Trained]:
    """Call ``learner.update_target()`` every ``freq`` rows trained
    (``by_steps_trained``) or every ``freq`` learner steps."""
    if freq < 1:
        raise ConfigError(f"update_target_network(): freq must be >= 1, not {freq}")
    ctx = ctx or current_context()
    counter = NUM_ENV_STEPS_TRAINED if by_steps_trained else NUM_LEARNER_STEPS
    mark = f"update_target_network:{counter}"
    with named("update_target_network"):
        async with closing(source) as items:
            async for item in items:
                progress = ctx.get(counter)
                if progress - ctx.marks.get(mark, 0) >= freq:
                    await ctx.learner_thread.run(learner.update_target)
                    ctx.add(NUM_TARGET_UPDATES, 1)
                    ctx.marks[mark] = progress
                yield item


async def update_worker_weights(
    source: AsyncIterable[SampleBatch],
    learner: Learner,
    workers: WorkerSet,
    *,
    max_delay_steps: int,
) -> AsyncIterator[SampleBatch]:
    """Pass batches on; once a worker has sampled ``max_delay_steps`` rows
    since its last update, send it the learner's current weights (Ape-X)."""
    with named("update_worker_weights"):
        since: dict[ActorHandle, int] = {}
        async with closing(source) as batches:
            async for batch in batches:
                worker = batch.source
                if isinstance(worker, ActorHandle):
                    since[worker] = since.get(worker, 0) + len(batch)
                    if since[worker] >= max_delay_steps:
                        weights = await in_learner_thread(learner.get_weights)
                        await workers.broadcast(weights, to=[worker])
                        since[worker] = 0
                yield batch
