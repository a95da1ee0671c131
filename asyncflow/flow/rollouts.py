"""Creation operators: ``parallel_rollouts`` and ``async_gradients``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..actors import ActorHandle
from ..errors import ConfigError
from ..rl.data.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from ..rl.sampling.protocols import SamplingWorker
from ..rl.sampling.worker_set import WorkerSet
from ._context import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED,
    FlowContext,
    current_context,
    spawn,
)
from ._util import closing, named

__all__ = ["GradientsItem", "async_gradients", "parallel_rollouts"]


def _count_sampled(ctx: FlowContext, batch: SampleBatch | MultiAgentBatch, workers: WorkerSet) -> None:
    ctx.add(NUM_ENV_STEPS_SAMPLED, len(batch))
    ctx.record_episodes(batch.episode_returns, batch.episode_lengths)
    if isinstance(batch, SampleBatch) and batch.metrics:
        ctx.record_metrics(batch.metrics)
    if isinstance(batch, MultiAgentBatch):
        ctx.add(NUM_AGENT_STEPS_SAMPLED, batch.agent_steps)
        ctx.record_policy_returns(batch.policy_returns)
    ctx.workers_restarted = workers.restarted


def _concat(parts: list[Any]) -> Any:
    if parts and isinstance(parts[0], MultiAgentBatch):
        return MultiAgentBatch.concat(parts)
    return concat_samples(parts)


async def parallel_rollouts(
    workers: WorkerSet,
    mode: Literal["bulk_sync", "async"] = "bulk_sync",
    num_async: int = 1,
    ctx: FlowContext | None = None,
) -> AsyncIterator[SampleBatch]:
    """Sample from every worker.

    ``bulk_sync``: one round asks each worker for a batch and yields their
    concatenation, in worker order (deterministic). ``async``: keeps
    ``num_async`` requests in flight per worker and yields each batch as it
    arrives, with ``batch.source`` set to the worker it came from.
    """
    ctx = ctx or current_context()
    if mode not in ("bulk_sync", "async"):
        raise ConfigError(f"parallel_rollouts(): mode must be 'bulk_sync' or 'async', not {mode!r}")
    with named("parallel_rollouts"):
        if hasattr(workers, "policy_rollouts"):  # one policy's view of multi-agent workers (_multi_agent.py)
            async with closing(workers.policy_rollouts(mode, num_async)) as batches:
                async for batch in batches:
                    yield batch
        elif mode == "bulk_sync":
            while True:
                with ctx.timer("sample"):
                    parts = await asyncio.gather(*(workers.sample(w) for w in workers.workers))
                batch = _concat(parts)
                _count_sampled(ctx, batch, workers)
                yield batch
        else:
            async with closing(_as_completed(workers, SamplingWorker.sample, num_async)) as results:
                async for worker, batch in results:
                    batch.source = worker
                    _count_sampled(ctx, batch, workers)
                    yield batch


async def _as_completed(
    workers: WorkerSet, method: Callable[..., Any], num_async: int, *args: Any, deadline: bool = True
) -> AsyncIterator[tuple[ActorHandle, Any]]:
    """Keep ``num_async`` calls of ``method(*args)`` in flight per actor; yield results as they land.
    Each call has the set's deadline (``WorkerSet.call``), unless ``deadline=False``: replay
    shards wait for rows by design (a frozen shard misses the deadline of its ``add``)."""
    pending: dict[asyncio.Future[Any], ActorHandle] = {}

    def submit(worker: ActorHandle) -> None:
        call = workers.call_within(workers.timeout_s if deadline else None, worker, method, *args)
        pending[spawn(call)] = worker

    try:
        for worker in workers.workers:
            for _ in range(num_async):
                submit(worker)
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            # Ordered by worker, so that simultaneous arrivals come out the same way each run.
            for future in sorted(done, key=lambda f: workers.workers.index(pending[f])):
                worker = pending.pop(future)
                result = future.result()
                submit(worker)
                yield worker, result
    finally:
        # Closing the generator (or an error) cancels every call still in flight.
        for future in pending:
            future.cancel()
        if pending:
            await asyncio.wait(pending)


@dataclass
class GradientsItem:
    """Gradients computed by one worker on its own sample (A3C)."""

    grads: list[np.ndarray]
    info: dict[str, float]
    count: int
    source: ActorHandle | None


async def async_gradients(workers: WorkerSet, ctx: FlowContext | None = None) -> AsyncIterator[GradientsItem]:
    """Each worker samples and computes gradients locally; yield them as they arrive."""
    ctx = ctx or current_context()
    with named("async_gradients"):
        async with closing(_as_completed(workers, SamplingWorker.sample_with_gradients, 1)) as results:
            async for worker, (grads, info, summary) in results:
                _count_sampled(ctx, summary, workers)
                yield GradientsItem(grads, info, len(summary), worker)
