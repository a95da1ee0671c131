"""Async envs (``AsyncEnv``): many per worker, stepped concurrently; sequences stay
whole and in order; a slow, hanging or failing env never stalls or poisons the run.

The network cases run against ``examples/remote_env.py``'s CartPole served over TCP."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter

import numpy as np
import pytest

from asyncflow import ConfigError, EnvStepTimeoutError
from asyncflow.algorithms import PPO, PPOConfig
from asyncflow.rl import AsyncEnvAdapter, AsyncRolloutWorker, RolloutWorker, is_async_env, probe_env
from asyncflow.rl.data.sample_batch import ACTIONS, DONES, EPS_ID, NEXT_OBS, OBS, REWARDS
from examples.remote_env import RemoteCartPole, RemoteSimulatorError, Simulator, serve_cartpole

from ..toy_envs import async_env

CARTPOLE = functools.partial(async_env, "CartPole-v1")


def _others() -> set[asyncio.Task[object]]:
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]


def test_an_async_env_is_told_apart_from_a_gymnasium_one() -> None:
    import gymnasium as gym

    assert is_async_env(RemoteCartPole(1)) and is_async_env(AsyncEnvAdapter(gym.make("CartPole-v1")))
    assert not is_async_env(gym.make("CartPole-v1"))
    probe = probe_env(functools.partial(RemoteCartPole, 1))  # no server: the probe never resets
    assert probe.is_async and probe.action_space == gym.spaces.Discrete(2)
    assert not probe_env("CartPole-v1").is_async


async def test_the_probe_works_inside_a_running_loop_too() -> None:
    assert probe_env(CARTPOLE).is_async


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"vector_env": True}, "vector_env: needs a gymnasium id"),
        ({"min_ready": 9}, "environment.min_ready: must be <= rollouts.num_envs_per_worker (8)"),
        ({"env": lambda: object()}, "neither a gymnasium.Env nor an AsyncEnv"),
    ],
)
def test_bad_async_settings_are_config_errors(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PPO(PPOConfig(**{"env": CARTPOLE, **fields}))  # type: ignore[arg-type]


@pytest.mark.parametrize("postprocess", ["gae", "transitions"])
async def test_lock_step_gives_the_blocking_workers_batches_row_for_row(postprocess: str) -> None:
    options = {"num_envs": 6, "rollout_fragment_length": 40, "seed": 4, "postprocess": postprocess}
    blocking = RolloutWorker("CartPole-v1", **options)  # type: ignore[arg-type]
    worker = await AsyncRolloutWorker.create(CARTPOLE, min_ready=6, **options)  # type: ignore[arg-type]
    try:
        for _ in range(4):
            a, b = blocking.sample(), await worker.sample()
            assert a.keys() == b.keys()
            for key in a:
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)
            assert a.episode_returns == b.episode_returns
    finally:
        await worker.aclose()


async def test_sequences_stay_whole_and_in_order_when_envs_step_out_of_lock_step() -> None:
    steps, lanes = 25, 8
    env = functools.partial(async_env, "CartPole-v1", (0.0, 0.003))
    worker = await AsyncRolloutWorker.create(env, num_envs=lanes, rollout_fragment_length=steps, min_ready=1,
                                             postprocess="transitions", seed=1)  # fmt: skip
    rows: dict[int, int] = {}
    ended: list[int] = []
    returns: list[float] = []
    try:
        for _ in range(6):
            b = await worker.sample()
            assert len(b) == lanes * steps
            for seq in range(lanes):
                part = slice(seq * steps, (seq + 1) * steps)
                obs, nxt, done, ids = b[OBS][part], b[NEXT_OBS][part], b[DONES][part], b[EPS_ID][part]
                # In order: each step starts where the one before it ended, unless an episode ended.
                going = ~done[:-1]
                np.testing.assert_array_equal(obs[1:][going], nxt[:-1][going])
                assert (ids[1:][going] == ids[:-1][going]).all() and (ids[1:][~going] != ids[:-1][~going]).all()
                for i in ids.tolist():
                    rows[i] = rows.get(i, 0) + 1
            ended += b[EPS_ID][b[DONES]].tolist()
            returns += b.episode_returns
        # Out of lock step for real: the envs have taken different numbers of steps.
        assert len({lane.steps for lane in worker.lanes}) > 1
    finally:
        await worker.aclose()
    # Whole: the finished episodes' rows (a lane's sequences come out in order, so all of an
    # ended episode's rows have come out) are the episodes the worker counted, one for one
    # (CartPole pays 1 per step; the rest of the counted ones end in sequences still filling).
    assert len(ended) > 10
    lengths, counted = Counter(rows[i] for i in ended), Counter(int(r) for r in returns)
    assert lengths - counted == Counter() and len(returns) - len(ended) <= lanes


class _SlowFirst(AsyncEnvAdapter):
    """Sub-env 0 answers after 0.2 s, the others at once."""

    made = 0

    def __init__(self) -> None:
        import gymnasium as gym

        type(self).made += 1
        super().__init__(gym.make("CartPole-v1"), delay_s=0.2 if type(self).made == 1 else 0.0)


async def test_a_slow_env_holds_back_nobody() -> None:
    _SlowFirst.made = 0
    worker = await AsyncRolloutWorker.create(_SlowFirst, num_envs=4, rollout_fragment_length=20, min_ready=1)
    try:
        for _ in range(3):
            assert len(await worker.sample()) == 80  # sequences from the fast envs
        slow, *fast = (lane.steps for lane in worker.lanes)
        assert slow <= 5 and min(fast) >= 60
    finally:
        await worker.aclose()


async def test_a_step_that_hangs_gets_its_env_replaced_and_counted() -> None:
    async with serve_cartpole(Simulator(hang_at={30})) as (sim, port):
        worker = await AsyncRolloutWorker.create(functools.partial(RemoteCartPole, port), num_envs=4,
                                                 rollout_fragment_length=20, env_step_timeout_s=0.5,
                                                 min_ready=4)  # fmt: skip  # lock step: the hung env is waited for
        try:
            batches = [await worker.sample() for _ in range(3)]
        finally:
            await worker.aclose()
        assert (
            sum(b.metrics["num_env_step_timeouts"] for b in batches) == 1
            and sum(b.metrics["num_env_errors"] for b in batches) == 0
        )
        assert sim.connections == 5  # four envs, and the one that replaced the hung env
        await asyncio.wait_for(sim.wait_all_closed(), 10)  # the server sees every client go
        assert sim.open_connections == 0
    assert not _others()


async def test_a_step_that_raises_gets_its_env_replaced_and_its_episode_dropped() -> None:
    async with serve_cartpole(Simulator(fail_at={10})) as (sim, port):
        worker = await AsyncRolloutWorker.create(functools.partial(RemoteCartPole, port), num_envs=2,
                                                 rollout_fragment_length=100, min_ready=2, seed=3)  # fmt: skip
        try:
            b = await worker.sample()
        finally:
            await worker.aclose()
        await asyncio.wait_for(sim.wait_all_closed(), 10)
        assert (b.metrics["num_env_errors"], b.metrics["num_env_step_timeouts"]) == (1, 0)
        # The failed env's unfinished episode (5 steps in) is in neither the rows nor the returns.
        assert all(r >= 8 for r in b.episode_returns)
        assert len(b) == 200 and (b[REWARDS] == 1.0).all()
    assert not _others()


@pytest.mark.parametrize("fault", ["fail_at", "hang_at"])
async def test_without_restarts_a_failing_env_fails_the_run_with_its_own_error(fault: str) -> None:
    async with serve_cartpole(Simulator(**{fault: {7}})) as (sim, port):
        worker = await AsyncRolloutWorker.create(functools.partial(RemoteCartPole, port), num_envs=3,
                                                 rollout_fragment_length=50, env_step_timeout_s=0.5,
                                                 restart_failed_envs=False, min_ready=3)  # fmt: skip  # lock step
        try:
            with pytest.raises(RemoteSimulatorError if fault == "fail_at" else EnvStepTimeoutError) as info:
                await worker.sample()
            if fault == "fail_at":
                assert "at step 7" in str(info.value)
                assert info.value.__traceback__ is not None  # the env's own traceback
            else:
                assert "sub-env" in str(info.value) and "env_step_timeout_s" in str(info.value)
        finally:
            await worker.aclose()
        await asyncio.wait_for(sim.wait_all_closed(), 10)
        assert sim.open_connections == 0
    assert not _others()


async def test_a_cancelled_sample_leaves_the_worker_usable_and_closing_leaves_nothing() -> None:
    async with serve_cartpole(Simulator(delay_s=(0.01, 0.01))) as (sim, port):
        worker = await AsyncRolloutWorker.create(functools.partial(RemoteCartPole, port), num_envs=4,
                                                 rollout_fragment_length=30)  # fmt: skip
        try:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(worker.sample(), 0.05)
            b = await worker.sample()  # steps in flight were kept, nothing was lost
            assert len(b) == 120
            assert np.isin(b[ACTIONS], [0, 1]).all()
        finally:
            await worker.aclose()
        assert all(lane.task is None or lane.task.done() for lane in worker.lanes)
        await asyncio.wait_for(sim.wait_all_closed(), 10)
        assert sim.open_connections == 0 and sim.connections == 4
    assert not _others()


@pytest.mark.parametrize(("num_workers", "connections"), [(2, 17), (0, 9)], ids=["processes", "in-driver"])
async def test_ppo_trains_against_the_tcp_simulator_and_closes_every_connection(
    num_workers: int, connections: int
) -> None:
    async with serve_cartpole(Simulator(delay_s=(0.0, 0.002), fail_at={300})) as (sim, port):
        config = PPOConfig(env=functools.partial(RemoteCartPole, port), num_workers=num_workers, num_envs_per_worker=8,
                           rollout_fragment_length=32, train_batch_size=512, num_epochs=2)  # fmt: skip
        async with PPO(config) as algo:
            results = []
            async for result in algo.train():
                results.append(result)
                if len(results) == 3:
                    break
        await asyncio.wait_for(sim.wait_all_closed(), 10)
        assert sim.open_connections == 0  # every worker awaited every env's close()
        assert sim.connections == connections  # 8 per worker, and the one replacing the env that failed
    assert results[-1]["num_env_errors"] == 1 and results[-1]["num_env_step_timeouts"] == 0
    assert results[-1]["num_env_steps_sampled"] >= 3 * 512
