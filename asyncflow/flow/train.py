"""Transformation operators on experience: batching, selecting, normalizing,
training and gradient handling. The learner's torch work runs off the event
loop in one dedicated thread (``learner_thread``), so the loop stays responsive
while it trains."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence
from typing import TypeVar

import numpy as np

from ..errors import ConfigError
from ..rl.data.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from ..rl.policies.actor_critic import ActorCriticPolicy
from ..rl.policy import MinibatchLearner
from ..rl.sampling.worker_set import WorkerSet
from ._context import NUM_ENV_STEPS_TRAINED, NUM_LEARNER_STEPS, FlowContext, current_context
from ._util import closing, named
from .rollouts import GradientsItem

R = TypeVar("R")


__all__ = [
    "apply_gradients",
    "average_gradients",
    "compute_gradients",
    "concat_batches",
    "select_experiences",
    "select_policy",
    "standardize_fields",
    "train_one_step",
]


async def concat_batches(source: AsyncIterable[SampleBatch], min_batch_size: int) -> AsyncIterator[SampleBatch]:
    """Concatenate incoming batches until at least ``min_batch_size`` rows are buffered.

    The remainder policy: nothing is dropped or carried over. A batch is
    yielded as soon as the buffer reaches ``min_batch_size``, so it can exceed
    it by less than one incoming batch; size ``min_batch_size`` as a multiple
    of the rollout size to get exact sizes.
    """
    if min_batch_size < 1:
        raise ConfigError(f"concat_batches(): min_batch_size must be >= 1, not {min_batch_size}")
    with named("concat_batches"):
        buffer: list[SampleBatch] = []
        count = 0
        async with closing(source) as batches:
            async for batch in batches:
                buffer.append(batch)
                count += len(batch)
                if count >= min_batch_size:
                    yield concat_samples(buffer)
                    buffer, count = [], 0


async def select_experiences(
    source: AsyncIterable[MultiAgentBatch], policy_ids: Sequence[str]
) -> AsyncIterator[MultiAgentBatch]:
    """Keep only the given policies' experiences of each multi-agent batch."""
    with named("select_experiences"):
        async with closing(source) as batches:
            async for batch in batches:
                yield batch.select(policy_ids)


async def select_policy(source: AsyncIterable[MultiAgentBatch], policy_id: str) -> AsyncIterator[SampleBatch]:
    """One policy's experiences of each multi-agent batch (an empty batch when it has none)."""
    with named("select_policy"):
        async with closing(source) as batches:
            async for batch in batches:
                yield batch.policy_batches.get(policy_id, SampleBatch())


async def standardize_fields(source: AsyncIterable[SampleBatch], fields: Sequence[str]) -> AsyncIterator[SampleBatch]:
    """Shift and scale the named columns to mean 0, std 1 (per batch)."""
    with named("standardize_fields"):
        async with closing(source) as batches:
            async for batch in batches:
                for field in fields:
                    column = batch[field].astype(np.float32)
                    batch[field] = (column - column.mean()) / max(float(column.std()), 1e-8)
                yield batch


async def train_one_step(
    source: AsyncIterable[SampleBatch],
    learner: MinibatchLearner,
    workers: WorkerSet,
    *,
    num_epochs: int = 1,
    minibatch_size: int | None = None,
    seed: int = 0,
    ctx: FlowContext | None = None,
) -> AsyncIterator[dict[str, float]]:
    """Train the learner on each batch (epochs of shuffled minibatches), then
    send the new weights to every worker; yields the learner stats."""
    ctx = ctx or current_context()
    with named("train_one_step"):
        async with closing(source) as batches:
            async for batch in batches:
                step = ctx.get(NUM_LEARNER_STEPS)  # in the context: a restored plan goes on with the next seed
                with ctx.timer("learn"):
                    info = await ctx.learner_thread.run(
                        learner.learn_on_batch, batch, num_epochs, minibatch_size, seed + step
                    )
                ctx.add(NUM_LEARNER_STEPS, 1)
                ctx.add(NUM_ENV_STEPS_TRAINED, len(batch))
                ctx.learner_info = dict(info)
                with ctx.timer("sync_weights"):
                    await workers.broadcast(learner.get_weights())
                yield dict(info)


async def compute_gradients(
    source: AsyncIterable[SampleBatch], learner: ActorCriticPolicy, ctx: FlowContext | None = None
) -> AsyncIterator[GradientsItem]:
    """Gradients of the learner's loss on each batch (in the learner thread)."""
    ctx = ctx or current_context()
    with named("compute_gradients"):
        async with closing(source) as batches:
            async for batch in batches:
                grads, info = await ctx.learner_thread.run(learner.compute_gradients, batch)
                yield GradientsItem(grads, info, len(batch), batch.source)


async def average_gradients(source: AsyncIterable[Sequence[GradientsItem]]) -> AsyncIterator[GradientsItem]:
    """The element-wise mean of a group of gradients (weighted equally), summed counts."""
    with named("average_gradients"):
        async with closing(source) as groups:
            async for group in groups:
                if not group:
                    continue
                grads = [np.mean(np.stack(parts), axis=0) for parts in zip(*(g.grads for g in group), strict=True)]
                info = {k: float(np.mean([g.info[k] for g in group])) for k in group[0].info}
                yield GradientsItem(grads, info, sum(g.count for g in group), None)


async def apply_gradients(
    source: AsyncIterable[GradientsItem],
    learner: ActorCriticPolicy,
    workers: WorkerSet,
    *,
    update_all: bool = True,
    ctx: FlowContext | None = None,
) -> AsyncIterator[dict[str, float]]:
    """Apply each gradient to the learner and send the new weights back.

    ``update_all=False`` sends them only to the worker the gradients came
    from (A3C), so the other workers keep sampling undisturbed.
    """
    ctx = ctx or current_context()
    with named("apply_gradients"):
        async with closing(source) as items:
            async for item in items:
                with ctx.timer("apply"):
                    await ctx.learner_thread.run(learner.apply_gradients, item.grads)
                ctx.add(NUM_ENV_STEPS_TRAINED, item.count)
                ctx.learner_info = item.info
                weights = learner.get_weights()
                if update_all or item.source is None:
                    await workers.broadcast(weights)
                else:
                    await workers.broadcast(weights, to=[item.source])
                yield item.info
