"""Operators on plain async iterables and on real workers (local backend)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

import asyncflow
from asyncflow import flow
from asyncflow.flow import FlowContext, GradientsItem
from asyncflow.rl import ActorCriticPolicy, RolloutWorker, SampleBatch
from asyncflow.rl.sampling.worker_set import WorkerSet


async def count(n: int, delay: float = 0.0, fail_at: int | None = None) -> AsyncIterator[int]:
    for i in range(n):
        if i == fail_at:
            raise KeyError(f"failed at {i}")
        if delay:
            await asyncio.sleep(delay)
        yield i


async def collect(it: AsyncIterator[object], limit: int | None = None) -> list[object]:
    out = []
    async for x in it:
        out.append(x)
        if limit is not None and len(out) == limit:
            break
    return out


def _batch(n: int, start: int = 0) -> SampleBatch:
    return SampleBatch({"x": np.arange(start, start + n, dtype=np.float32)})


async def test_generic_operators() -> None:
    doubled = flow.map(count(5), lambda x: x * 2)
    assert await collect(flow.filter(doubled, lambda x: x % 4 == 0)) == [0, 4, 8]

    async def slow_square(x: int) -> int:
        await asyncio.sleep(0)
        return x * x

    assert await collect(flow.map(count(4), slow_square)) == [0, 1, 4, 9]
    assert await collect(flow.batch(count(5), 2)) == [[0, 1], [2, 3], [4]]
    assert await collect(flow.flatten(flow.batch(count(5), 2))) == [0, 1, 2, 3, 4]


async def test_concat_batches_reaches_min_size_and_keeps_every_row() -> None:
    async def source() -> AsyncIterator[SampleBatch]:
        for i in range(7):
            yield _batch(3, 3 * i)

    out = await collect(flow.concat_batches(source(), 8))
    assert [len(b) for b in out] == [9, 9]  # 3 batches each; the 7th (3 rows) waits for more
    assert np.array_equal(np.concatenate([b["x"] for b in out]), np.arange(18, dtype=np.float32))


async def test_standardize_fields() -> None:
    async def source() -> AsyncIterator[SampleBatch]:
        yield SampleBatch({"a": np.array([1.0, 2.0, 3.0, 6.0]), "b": np.array([5.0, 5.0, 5.0, 5.0])})

    (out,) = await collect(flow.standardize_fields(source(), ["a"]))
    assert abs(out["a"].mean()) < 1e-6 and abs(out["a"].std() - 1) < 1e-5
    assert np.array_equal(out["b"], [5.0] * 4)


async def test_round_robin_is_deterministic_with_weights() -> None:
    async def letters(tag: str, delay: float) -> AsyncIterator[str]:
        for i in range(4):
            await asyncio.sleep(delay)
            yield f"{tag}{i}"

    runs = [
        await collect(
            flow.concurrently([letters("a", 0.002), letters("b", 0)], "round_robin", round_robin_weights=[1, 2])
        )
        for _ in range(2)
    ]
    assert runs[0] == runs[1] == ["a0", "b0", "b1", "a1", "b2", "b3", "a2", "a3"]
    only_b = await collect(flow.concurrently([letters("a", 0), letters("b", 0)], "round_robin", output_indexes=[1]))
    assert only_b == ["b0", "b1", "b2", "b3"]


async def test_async_mode_and_union_yield_everything() -> None:
    out = await collect(flow.concurrently([count(5, 0.001), count(3)], "async"))
    assert sorted(out) == [0, 0, 1, 1, 2, 2, 3, 4]  # type: ignore[type-var]
    assert sorted(await collect(flow.union(count(3), count(2, 0.001)))) == [0, 0, 1, 1, 2]  # type: ignore[type-var]


async def test_closing_the_outer_generator_cancels_every_task() -> None:
    before = asyncio.all_tasks()
    closed = []

    async def endless(tag: int) -> AsyncIterator[int]:
        try:
            while True:
                await asyncio.sleep(0.001)
                yield tag
        finally:
            closed.append(tag)

    plan = flow.map(flow.union(endless(1), endless(2), endless(3)), lambda x: x)
    assert len(await collect(plan, limit=10)) == 10
    await plan.aclose()
    await asyncio.sleep(0)
    assert sorted(closed) == [1, 2, 3]
    assert asyncio.all_tasks() - before == set()


async def test_exception_names_its_operator_and_keeps_traceback() -> None:
    plan = flow.report_metrics(flow.concurrently([flow.map(count(5, fail_at=3), lambda x: x)], "async"), FlowContext())
    with pytest.raises(KeyError, match="failed at 3") as info:
        await collect(plan)
    notes = info.value.__notes__
    assert notes == ["in asyncflow operator map()"]
    assert any(entry.name == "count" for entry in info.traceback)


async def test_duplicate_is_bounded_and_complete() -> None:
    pulled = []

    async def source() -> AsyncIterator[int]:
        for i in range(20):
            pulled.append(i)
            yield i

    fast, slow = flow.duplicate(source(), 2, maxsize=3)
    got_fast = []
    for _ in range(3):
        got_fast.append(await anext(fast))
    # The slow branch has read nothing, so the fast one may not run further ahead.
    ahead = asyncio.ensure_future(anext(fast))
    await asyncio.sleep(0.05)
    assert not ahead.done() and len(pulled) == 3
    assert await anext(slow) == 0  # the slow branch catches up by one: the fast one goes on
    got_fast.append(await ahead)
    rest_slow, rest_fast = await asyncio.gather(collect(slow), collect(fast))
    got_slow = [0, *rest_slow]
    got_fast += rest_fast
    assert got_fast == got_slow == list(range(20))


async def test_enqueue_and_dequeue() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize=2)
    passed = await collect(flow.enqueue(count(2), queue))
    assert passed == [0, 1]
    assert await collect(flow.dequeue(queue), limit=2) == [0, 1]


async def test_throttles_and_metrics() -> None:
    ctx = FlowContext()
    ctx.record_episodes([10.0, 20.0], [10, 20])

    async def steps() -> AsyncIterator[int]:
        for _ in range(6):
            ctx.add("num_env_steps_sampled", 100)
            yield 0

    passed = await collect(flow.once_per_steps(steps(), 250, ctx))
    assert len(passed) == 2  # at 300 and 600 steps
    (result,) = await collect(flow.report_metrics(count(1), ctx))
    assert result["episode_return_mean"] == 15.0 and result["episodes_this_iter"] == 2
    assert result["num_env_steps_sampled"] == 600
    assert len(await collect(flow.once_per_interval(count(5), 3600))) == 1


class Recorder:
    """A fake worker that records the weights it was sent."""

    def __init__(self) -> None:
        self.versions: list[int] = []

    def set_weights(self, weights: object) -> None:
        self.versions.append(weights.version)  # type: ignore[attr-defined]

    def get_versions(self) -> list[int]:
        return self.versions


async def test_apply_gradients_update_all_false_answers_only_the_source() -> None:
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    learner = ActorCriticPolicy(env.observation_space, env.action_space)
    async with asyncflow.open_runtime("local") as rt:
        a, b = await rt.spawn(Recorder), await rt.spawn(Recorder)
        workers = WorkerSet([a, b])
        zero = [np.zeros(p.shape, np.float32) for p in learner.model.parameters()]

        async def grads() -> AsyncIterator[GradientsItem]:
            yield GradientsItem(zero, {"loss": 1.0}, 10, b)
            yield GradientsItem(zero, {"loss": 2.0}, 10, b)
            yield GradientsItem(zero, {"loss": 3.0}, 10, a)

        ctx = FlowContext()
        await collect(flow.apply_gradients(grads(), learner, workers, update_all=False, ctx=ctx))
        assert await a.get_versions() == [3] and await b.get_versions() == [1, 2]
        assert ctx.get("num_env_steps_trained") == 30


async def test_average_gradients_is_a_true_mean() -> None:
    async def groups() -> AsyncIterator[list[GradientsItem]]:
        yield [
            GradientsItem([np.array([1.0, 2.0])], {"l": 1.0}, 5, None),
            GradientsItem([np.array([3.0, 6.0])], {"l": 3.0}, 7, None),
        ]

    (avg,) = await collect(flow.average_gradients(groups()))
    assert np.array_equal(avg.grads[0], [2.0, 4.0]) and avg.count == 12 and avg.info == {"l": 2.0}


@pytest.mark.parametrize("mode", ["bulk_sync", "async"])
async def test_parallel_rollouts_with_real_workers(backend: str, mode: str) -> None:
    async with asyncflow.open_runtime(backend) as rt:  # type: ignore[arg-type]
        handles = [
            await rt.spawn(RolloutWorker, "CartPole-v1", num_envs=2, rollout_fragment_length=16, worker_index=i)
            for i in (1, 2)
        ]
        ctx = FlowContext()
        batches = await collect(flow.parallel_rollouts(WorkerSet(handles), mode, ctx=ctx), limit=3)  # type: ignore[arg-type]
    sizes = {len(b) for b in batches}  # type: ignore[arg-type]
    assert sizes == ({64} if mode == "bulk_sync" else {32})
    assert ctx.get("num_env_steps_sampled") >= 3 * min(sizes)
    if mode == "async":
        assert all(b.source in handles for b in batches)  # type: ignore[attr-defined]


async def test_select_experiences_keeps_only_named_policies() -> None:
    from asyncflow.rl import MultiAgentBatch

    async def source() -> AsyncIterator[MultiAgentBatch]:
        yield MultiAgentBatch({"ppo": _batch(3), "dqn": _batch(5)}, env_steps=4)

    (out,) = await collect(flow.select_experiences(source(), ["ppo"]))
    assert list(out.policy_batches) == ["ppo"] and out.env_steps == 4 and out.agent_steps == 3


async def test_fan_in_is_bounded_under_a_slow_consumer() -> None:
    produced = 0

    async def fast() -> AsyncIterator[int]:
        nonlocal produced
        while True:
            produced += 1
            yield produced

    merged = flow.union(fast(), fast())
    for _ in range(10):
        await anext(merged)
        await asyncio.sleep(0.01)  # the consumer is slow; producers must wait, not pile up
    # Each producer holds at most one item it could not put, plus the queue's one slot.
    assert produced <= 10 + 3
    await merged.aclose()


async def test_closing_a_fan_in_ends_when_a_producer_outlives_a_cancellation() -> None:
    """A producer that loses one cancellation (code that catches it, or Python 3.11's
    ``wait_for``, gh-86296) went on to wait for ever to put into the full queue: closing
    hung. Ape-X hung so in 1 run in 10 once its replay shards' calls had deadlines."""
    swallowed = 0

    async def stubborn() -> AsyncIterator[int]:
        nonlocal swallowed
        i = 0
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1  # the first cancellation is lost
            i += 1
            yield i

    items = flow.union(stubborn(), stubborn())
    assert await anext(items) == 1
    async with asyncio.timeout(10):
        await items.aclose()  # type: ignore[attr-defined]
    assert swallowed == 1


class MeasuringWorker:
    """A sampler that measures something asyncflow has never heard of."""

    def __init__(self) -> None:
        self.calls = 0

    def sample(self) -> SampleBatch:
        self.calls += 1
        return SampleBatch({"x": np.zeros(4, np.float32)},
                           metrics={"num_widgets": self.calls, "widget_size": [float(self.calls)]})  # fmt: skip

    def set_weights(self, weights: object) -> None:
        pass


async def test_what_a_sampler_measures_reaches_results_by_its_name_alone() -> None:
    """``SampleBatch.metrics``: counts are summed, values averaged over the latest episodes'
    window, through pickling, concatenation, the context and its checkpoint state."""
    import pickle

    from asyncflow.rl.data.sample_batch import concat_samples

    first, second = MeasuringWorker().sample(), pickle.loads(pickle.dumps(MeasuringWorker().sample()))
    assert concat_samples([first, second]).metrics == {"num_widgets": 2, "widget_size": [1.0, 1.0]}
    async with asyncflow.open_runtime("local") as rt:
        workers = WorkerSet([await rt.spawn(MeasuringWorker), await rt.spawn(MeasuringWorker)])
        ctx = FlowContext()
        with flow.use_context(ctx):
            results = await collect(flow.report_metrics(flow.parallel_rollouts(workers, mode="bulk_sync")), 3)
    # Each round, both workers' i-th sample: counts 1+1, 2+2, 3+3; sizes 1, 1, 2, 2, 3, 3.
    assert [r.training_iteration for r in results] == [1, 2, 3]  # a Result: a mapping, main figures typed
    assert [r["num_widgets"] for r in results] == [2, 6, 12]
    assert [r["widget_size_mean"] for r in results] == [1.0, 1.5, 2.0]
    restored = FlowContext()
    restored.set_state(ctx.get_state())
    assert restored.measured == {"num_widgets"} and list(restored.values["widget_size"]) == [1, 1, 2, 2, 3, 3]
