"""Replay and learner operators: store, replay, mix-in, train_async and the
messages that go back to where a batch came from."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest

import asyncflow
from asyncflow import ActorDiedError, NoContextError, flow
from asyncflow.flow import FlowContext
from asyncflow.flow.learner import (
    Trained,
    learn_on_batches,
    sync_weights,
    train_async,
    update_priorities,
    update_target_network,
    update_worker_weights,
)
from asyncflow.flow.replay import mix_in_replay, replay, store_to_replay_buffer
from asyncflow.rl.data.replay_actor import ReplayActor
from asyncflow.rl.data.replay_buffer import BATCH_INDEXES, PrioritizedReplayBuffer, ReplayBuffer
from asyncflow.rl.data.sample_batch import SampleBatch
from asyncflow.rl.policy import FlatWeights, ReplayUpdate
from asyncflow.rl.sampling.worker_set import WorkerSet

from .test_operators import Recorder, collect


def _batch(n: int, start: int = 0) -> SampleBatch:
    return SampleBatch({"x": np.arange(start, start + n, dtype=np.float32)})


async def batches(n: int, size: int = 4, pulled: list[int] | None = None) -> AsyncIterator[SampleBatch]:
    for i in range(n):
        if pulled is not None:
            pulled.append(i)
        await asyncio.sleep(0)
        yield _batch(size, size * i)


class SlowLearner:
    """Sleeps in ``learn_on_batch`` (it runs in the learner thread) and counts."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.started = self.finished = self.target_updates = 0
        self.threads: set[str] = set()

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float] | ReplayUpdate:
        self.started += 1
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay)
        self.finished += 1
        stats = {"loss": float(self.finished)}
        if BATCH_INDEXES in batch:
            return ReplayUpdate(stats, np.full(len(batch), 10.0 * self.finished))
        return stats

    def get_weights(self) -> FlatWeights:
        return FlatWeights(np.zeros(1, np.float32), self.finished)

    def update_target(self) -> None:
        self.target_updates += 1


async def test_store_passes_nothing_on_before_learning_starts() -> None:
    buffer = ReplayBuffer(100)
    ctx = FlowContext()
    out = await collect(store_to_replay_buffer(batches(5), buffer, learning_starts=10, ctx=ctx))
    assert len(buffer) == 20 and ctx.get("num_rows_stored") == 20
    assert [b["x"][0] for b in out] == [8, 12, 16]  # from the batch that reached 10 rows on


async def test_replay_waits_for_rows_without_polling() -> None:
    buffer = ReplayBuffer(100)
    replayed = replay(buffer, 4, min_size=10)
    first = asyncio.ensure_future(anext(replayed))
    await asyncio.sleep(0.05)
    assert not first.done()
    buffer.add(_batch(6))
    await asyncio.sleep(0.01)
    assert not first.done()  # 6 < 10 rows: still waiting
    buffer.add(_batch(6, 6))
    batch = await asyncio.wait_for(first, 1)
    assert len(batch) == 4 and batch.source is buffer
    await replayed.aclose()


async def test_mix_in_replay_adds_the_asked_proportion() -> None:
    buffer = ReplayBuffer(1000, seed=1)
    out = await collect(mix_in_replay(batches(200, size=10), buffer, 1.5, seed=0))
    sizes = np.array([len(b) for b in out])
    assert set(sizes) <= {20, 30}  # the new batch plus one or two replayed ones
    assert abs(sizes.mean() / 10 - 2.5) < 0.1
    assert all(b["x"][0] == 10 * i for i, b in enumerate(out))  # each starts with its new rows


async def test_train_async_samples_while_it_trains_and_is_bounded() -> None:
    flow.set_context(FlowContext())  # this test's plan, as Algorithm.train installs one
    pulled: list[int] = []
    learner = SlowLearner(delay=0.05)
    trained = train_async(batches(100, pulled=pulled), learner, queue_size=3)
    items = await collect(trained, limit=4)
    assert [i.info["loss"] for i in items] == [1.0, 2.0, 3.0, 4.0]
    assert learner.threads == {"asyncflow-learner_0"}  # off the event loop
    # Sampling went on during training, up to the queue bound and no further.
    assert 4 + 2 <= len(pulled) <= 4 + 3 + 2
    await trained.aclose()


async def test_closing_train_async_mid_step_waits_for_the_step_and_leaves_no_task() -> None:
    learner = SlowLearner(delay=0.3)
    ctx = FlowContext()
    plan = flow.report_metrics(train_async(batches(100), learner, queue_size=2, ctx=ctx), ctx)
    task = asyncio.ensure_future(anext(plan))
    await asyncio.sleep(0.1)  # the first learner step is running in the thread
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await plan.aclose()
    assert learner.started == learner.finished == 1  # the step ended before the close returned
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_learn_on_batches_counts_and_records_learner_info() -> None:
    ctx = FlowContext()
    out = await collect(learn_on_batches(batches(3), SlowLearner(), ctx=ctx))
    assert [t.count for t in out] == [4, 4, 4]
    assert ctx.get("num_env_steps_trained") == 12 and ctx.learner_info == {"loss": 3.0}


async def test_update_priorities_reach_the_local_buffer() -> None:
    flow.set_context(FlowContext())  # this test's plan, as Algorithm.train installs one
    buffer = PrioritizedReplayBuffer(16, alpha=1.0, eps=0.0)
    buffer.add(_batch(16))
    learner = SlowLearner()
    trained = update_priorities(learn_on_batches(replay(buffer, 4), learner))
    item = await anext(trained)
    await trained.aclose()
    np.testing.assert_allclose(buffer.priorities(item.indexes), 10.0)  # type: ignore[arg-type]


async def test_update_priorities_reach_the_replay_shard_the_batch_came_from() -> None:
    flow.set_context(FlowContext())  # this test's plan, as Algorithm.train installs one
    async with asyncflow.open_runtime("process") as rt:
        shards = [await rt.spawn(ReplayActor, 32, alpha=1.0, learning_starts=8, seed=i) for i in range(2)]
        stored = store_to_replay_buffer(batches(4), shards)
        await collect(stored)  # two batches of 4 rows to each shard
        learner = SlowLearner()
        trained = update_priorities(learn_on_batches(replay(shards, 4), learner))
        items = await collect(trained, limit=4)
        for shard in shards:
            await shard.drain()
        assert all(item.source in shards for item in items)
        for shard in shards:
            touched = np.zeros(8, bool)
            for item in items:
                if item.source is shard:
                    touched[item.indexes] = True
            p = await shard.priorities(np.arange(8))
            # Rows a batch of this shard held got their new priority; the rest kept the initial 1.
            assert (p[touched] >= 10.0).all() and (p[~touched] == 1.0).all()
        await trained.aclose()


async def test_sync_weights_to_source_answers_only_that_worker() -> None:
    async with asyncflow.open_runtime("local") as rt:
        a, b = await rt.spawn(Recorder), await rt.spawn(Recorder)
        workers = WorkerSet([a, b])
        learner = SlowLearner()

        async def items() -> AsyncIterator[Trained]:
            for source in (b, b, a):
                learner.finished += 1
                yield Trained({}, 4, source)

        await collect(sync_weights(items(), learner, workers, to_source=True))
        assert await a.get_versions() == [3] and await b.get_versions() == [1, 2]
        await collect(sync_weights(items(), learner, workers, every=3))
        assert await a.get_versions() == [3, 6] and await b.get_versions() == [1, 2, 6]


async def test_update_worker_weights_after_max_delay() -> None:
    async with asyncflow.open_runtime("local") as rt:
        a = await rt.spawn(Recorder)
        workers = WorkerSet([a])

        async def sampled() -> AsyncIterator[SampleBatch]:
            for i in range(5):
                batch = _batch(4, i)
                batch.source = a
                yield batch

        await collect(update_worker_weights(sampled(), SlowLearner(), workers, max_delay_steps=8))
        assert len(await a.get_versions()) == 2  # after rows 8 and 16, not after 20


async def test_update_target_network_by_rows_and_by_steps() -> None:
    async def items(n: int) -> AsyncIterator[Trained]:
        for _ in range(n):
            ctx.add("num_env_steps_trained", 30)
            ctx.add("num_learner_steps", 1)
            yield Trained({}, 30)

    ctx = FlowContext()
    learner = SlowLearner()
    await collect(update_target_network(items(10), learner, 100, ctx=ctx))
    assert learner.target_updates == 2  # at 120 and 240 rows of 300
    ctx = FlowContext()
    learner = SlowLearner()
    await collect(update_target_network(items(10), learner, 3, by_steps_trained=False, ctx=ctx))
    assert learner.target_updates == 3


@pytest.mark.timeout(60)
async def test_a_killed_replay_shard_is_recreated_and_the_plan_goes_on() -> None:
    flow.set_context(FlowContext())  # this test's plan, as Algorithm.train installs one
    async with asyncflow.open_runtime("process") as rt:
        shard = await rt.spawn(ReplayActor, 64, learning_starts=8, max_restarts=1)
        await collect(store_to_replay_buffer(batches(3), [shard]))
        replayed = replay([shard], 4)
        assert len(await anext(replayed)) == 4
        assert shard.pid is not None
        os.kill(shard.pid, signal.SIGKILL)
        pending = asyncio.ensure_future(anext(replayed))  # waits: the new shard is empty
        await asyncio.sleep(0.3)
        assert not pending.done()
        await collect(store_to_replay_buffer(batches(3), [shard]))  # refill the restarted shard
        assert len(await asyncio.wait_for(pending, 10)) == 4
        assert shard.restarts == 1
        await replayed.aclose()


@pytest.mark.timeout(60)
async def test_a_dead_replay_shard_without_restarts_fails_the_plan_loudly() -> None:
    flow.set_context(FlowContext())  # this test's plan, as Algorithm.train installs one
    async with asyncflow.open_runtime("process") as rt:
        shard = await rt.spawn(ReplayActor, 64, learning_starts=8)
        await collect(store_to_replay_buffer(batches(3), [shard]))
        replayed = replay([shard], 4, num_async=2)
        await anext(replayed)
        assert shard.pid is not None
        os.kill(shard.pid, signal.SIGKILL)
        with pytest.raises(ActorDiedError):
            await asyncio.wait_for(collect(replayed), 10)


async def test_the_two_sided_rate_limit_keeps_replay_and_storage_in_step() -> None:
    flow.set_context(FlowContext())  # this test's plan, as Algorithm.train installs one
    buffer = ReplayBuffer(1000)
    ratio, starts = 2.0, 8
    stored = store_to_replay_buffer(batches(50), buffer, learning_starts=starts, min_replay_ratio=ratio)
    store_task = asyncio.ensure_future(collect(stored))
    await asyncio.sleep(0.05)
    assert buffer.added == 12  # 8 free rows, then one batch more; now it waits for replay
    replayed = replay(buffer, 4, min_size=starts, max_replay_ratio=ratio)
    for _ in range(10):
        await anext(replayed)
        await asyncio.sleep(0.01)
        # Both bounds hold at every point: replayed <= ratio * added, and
        # storage runs at most one batch ahead of ratio * (added - starts).
        assert buffer.sampled <= ratio * buffer.added
        assert buffer.sampled >= ratio * (buffer.added - starts - 4)
    assert buffer.added > 12
    store_task.cancel()
    await asyncio.gather(store_task, return_exceptions=True)
    allowed = int((ratio * buffer.added - buffer.sampled) // 4)
    for _ in range(allowed):  # what storage has paid for can still be replayed
        await asyncio.wait_for(anext(replayed), 1)
    blocked = asyncio.ensure_future(anext(replayed))
    await asyncio.sleep(0.05)
    assert not blocked.done()  # and no more: replay may not run ahead of storage either
    buffer.add(_batch(2))
    assert len(await asyncio.wait_for(blocked, 1)) == 4  # 2 rows more pay for 4 replayed
    await replayed.aclose()


async def test_an_operator_outside_any_context_says_how_to_give_it_one() -> None:
    plan = learn_on_batches(batches(3), SlowLearner())
    with pytest.raises(NoContextError, match="use_context"):
        await anext(plan)
    ctx = FlowContext()
    with flow.use_context(ctx):
        plan = learn_on_batches(batches(3), SlowLearner())
        assert (await anext(plan)).count == 4
        await plan.aclose()
    assert ctx.get("num_env_steps_trained") == 4  # counted in the context it was given


async def test_leaving_a_context_ends_what_its_plan_has_in_flight() -> None:
    """``async with FlowContext()``: a plan dropped mid-way, not closed, leaves no task behind
    (its fan-in producers and queued learner steps end with the block)."""

    async def forever() -> AsyncIterator[SampleBatch]:
        while True:
            yield _batch(4, 0)
            await asyncio.sleep(0)

    before = asyncio.all_tasks()
    async with FlowContext() as ctx:
        plan = train_async(forever(), SlowLearner(), queue_size=2)
        assert (await anext(plan)).count == 4
        assert len(ctx.tasks) > 0  # the producer filling the learner's queue
    assert len(ctx.tasks) == 0 and asyncio.all_tasks() == before
