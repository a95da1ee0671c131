"""What an env's ``step`` and ``reset`` return: every kind of output either trains as it is
or stops the run with an ``EnvOutputError`` that names the field; never another exception,
never a silent cast. And the optional replacement of a gymnasium env that raises."""

from __future__ import annotations

import asyncio
import functools
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from asyncflow import EnvOutputError
from asyncflow.algorithms import PPO, PPOConfig
from asyncflow.rl import AsyncEnv, AsyncRolloutWorker, RolloutWorker
from asyncflow.rl.policies.random_policy import RandomPolicy


class Scripted(gym.Env):  # type: ignore[type-arg]
    """An env whose ``step`` returns ``out`` (the same each time) and ``reset`` a valid start."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, out: tuple[Any, ...] | None = None, reset_out: Any = None) -> None:
        self.out, self.reset_out = out, reset_out

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return self.reset_out if self.reset_out is not None else (np.zeros(4, np.float32), {})

    def step(self, action: Any) -> Any:
        return self.out if self.out is not None else (np.ones(4, np.float32), 1.0, False, False, {})


class Frames(gym.Env):  # type: ignore[type-arg]
    """uint8 frames in the space, returned as uint16 (holding ``value``)."""

    observation_space = gym.spaces.Box(0, 255, (2, 2), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, value: int) -> None:
        self.value = value

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return np.zeros((2, 2), np.uint8), {}

    def step(self, action: Any) -> Any:
        return np.full((2, 2), self.value, np.uint16), 0.0, False, False, {}


def _sample(env: Any, steps: int = 3, **options: Any) -> Any:
    worker = RolloutWorker(env, num_envs=1, rollout_fragment_length=steps, policy_factory=RandomPolicy, **options)
    return worker.sample()


def test_integer_frames_that_do_not_fit_the_space_are_not_wrapped() -> None:
    with pytest.raises(EnvOutputError, match=r"observation of dtype uint16 holding 300 to 300, outside uint8's "):
        _sample(functools.partial(Frames, 300))
    batch = _sample(functools.partial(Frames, 200))  # uint16 values that fit: taken as they are
    assert batch["obs"].dtype == np.uint8 and batch["obs"][1:].max() == 200


@pytest.mark.parametrize(
    ("out", "said"),
    [
        ((np.ones(4, np.float32), np.ones(1), False, False, {}), r"a reward that is a ndarray of shape \(1,\)"),
        ((np.ones(4, np.float32), "1.0", False, False, {}), r"a reward that is a str \('1.0'\), not a number"),
        ((np.ones(4, np.float32), None, False, False, {}), r"a reward that is a NoneType"),
        ((np.ones(4, np.float32), True, False, False, {}), r"a reward that is a bool"),
        ((np.ones(4, np.float32), 1.0, 1, False, {}), r"terminated=1, a int, not a bool"),
        ((np.ones(4, np.float32), 1.0, False, "no", {}), r"truncated='no', a str, not a bool"),
        ((np.ones(4, np.float32), 1.0, False, False, None), r"an info that is a NoneType, not a dict"),
        ((np.ones(4, np.float32), 1.0, False, {}), r"4 values from step\(\) .*: the old gym API"),
        ((np.ones(4, np.float32), 1.0), r"a tuple of 2 from step\(\)"),
    ],
)
def test_each_wrong_field_is_named(out: tuple[Any, ...], said: str) -> None:
    with pytest.raises(EnvOutputError, match=rf"env 'Scripted' \(worker 0, sub-env 0\) returned {said}"):
        _sample(functools.partial(Scripted, out))


def test_numpy_and_zero_dimensional_rewards_are_numbers() -> None:
    for reward in (np.float32(0.5), np.int64(2), np.array(1.5), np.array(3)):
        batch = _sample(functools.partial(Scripted, (np.ones(4, np.float32), reward, False, False, {})))
        assert batch["rewards"].tolist() == [float(reward)] * 3


def test_the_old_gym_api_is_named_for_gymnasium_and_async_envs() -> None:
    with pytest.raises(EnvOutputError, match=r"returned a ndarray from reset\(\).*the old gym API"):
        _sample(functools.partial(Scripted, None, np.zeros(4, np.float32)))

    class OldAsync(AsyncEnv):
        observation_space = Scripted.observation_space
        action_space = Scripted.action_space

        async def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return np.zeros(4, np.float32), {}

        async def step(self, action: Any) -> Any:
            return np.zeros(4, np.float32), 1.0, False, {}

        async def close(self) -> None:
            pass

    async def run() -> None:
        worker = await AsyncRolloutWorker.create(OldAsync, num_envs=1, rollout_fragment_length=4,
                                                 policy_factory=RandomPolicy)  # fmt: skip
        try:
            await worker.sample()
        finally:
            await worker.aclose()

    with pytest.raises(EnvOutputError, match=r"4 values from step\(\) .*the old gym API"):
        asyncio.run(run())


class FailsSometimes(gym.Wrapper):  # type: ignore[type-arg]
    """CartPole whose every ``every``-th step raises (a flaky simulator)."""

    made = 0

    def __init__(self, every: int = 25) -> None:
        super().__init__(gym.make("CartPole-v1"))
        FailsSometimes.made += 1
        self.every, self.steps = every, 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps % self.every == 0:
            raise ConnectionError("the simulator went away")
        return self.env.step(action)


def always_fails() -> FailsSometimes:
    return FailsSometimes(every=1)


def test_a_gymnasium_env_that_raises_is_replaced_when_asked() -> None:
    with pytest.raises(ConnectionError, match="the simulator went away"):  # by default: its own traceback
        _sample(FailsSometimes, steps=30)
    worker = RolloutWorker(FailsSometimes, num_envs=2, rollout_fragment_length=60, policy_factory=RandomPolicy,
                           restart_failed_envs=True, postprocess="transitions")  # fmt: skip
    batch = worker.sample()
    assert batch.metrics["num_env_errors"] == 4  # each env failed at its steps 25 and 50
    assert len(batch) == 2 * 60 - 4  # the failed steps are not rows
    assert np.isfinite(batch["obs"]).all() and not np.all(batch["obs"] == 0, axis=1).any()
    assert [worker.sample().metrics["num_env_errors"] for _ in range(4)] == [
        4,
        6,
        4,
        6,
    ]  # at steps 75, 100, ..., of each env
    with pytest.raises(ConnectionError) as caught:  # one that fails at once, again and again: given up on
        RolloutWorker(always_fails, num_envs=1, rollout_fragment_length=8, policy_factory=RandomPolicy,
                      restart_failed_envs=True).sample()  # fmt: skip
    assert "failed 3 times in a row" in "".join(getattr(caught.value, "__notes__", []))


@pytest.mark.timeout(120)
async def test_ppo_trains_on_through_a_flaky_env_and_counts_its_errors() -> None:
    config = PPOConfig(env=FailsSometimes, num_workers=1, num_envs_per_worker=2, rollout_fragment_length=64,
                       train_batch_size=128, minibatch_size=64, restart_failed_envs=True)  # fmt: skip
    async with PPO(config) as algo:
        async for result in algo.train():
            if result["training_iteration"] == 3:
                break
    assert result["num_env_errors"] >= 6 and result["episodes_total"] > 0


# -- every kind of output ------------------------------------------------------------------------------

_OBS_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int8, np.uint8, np.bool_, np.complex64]
observations = st.one_of(
    hnp.arrays(st.sampled_from(_OBS_DTYPES), st.sampled_from([(4,), (1,), (4, 1), (), (5,)])),
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=3, max_size=5),
    st.text(max_size=4),
    st.none(),
    st.integers(-5, 5),
)
rewards = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.text(max_size=4),
    st.none(),
    hnp.arrays(np.float64, st.sampled_from([(1,), (), (2,)])),
    st.builds(np.float32, st.floats(width=32, allow_nan=False, allow_infinity=False)),
)
flags = st.one_of(st.booleans(), st.builds(np.bool_, st.booleans()), st.integers(0, 1), st.none(), st.text(max_size=2))
infos = st.one_of(st.just({}), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.none(),
                  st.lists(st.integers(), max_size=2))  # fmt: skip


def _valid_observation(obs: Any) -> bool:
    try:
        array = np.asarray(obs)
    except Exception:  # noqa: BLE001 - anything numpy cannot take is not an observation
        return False
    if array.shape != (4,) or not np.can_cast(array.dtype, np.float32, "same_kind"):
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(array.astype(np.float32)).all())


def _valid_reward(reward: Any) -> bool:
    if isinstance(reward, bool | np.bool_) or reward is None or isinstance(reward, str):
        return False
    if isinstance(reward, np.ndarray) and reward.shape != ():
        return False
    with np.errstate(over="ignore"):
        return math.isfinite(float(np.float32(reward)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obs=observations, reward=rewards, terminated=flags, truncated=flags, info=infos)
def test_any_env_output_trains_as_it_is_or_is_an_error_naming_its_field(
    obs: Any, reward: Any, terminated: Any, truncated: Any, info: Any
) -> None:
    problems = {
        "observation": not _valid_observation(obs),
        "reward": not _valid_reward(reward),
        "terminated": type(terminated) not in (bool, np.bool_),
        "truncated": type(truncated) not in (bool, np.bool_),
        "info": not isinstance(info, dict),
    }
    env = functools.partial(Scripted, (obs, reward, terminated, truncated, info))
    if not any(problems.values()):
        batch = _sample(env, postprocess="transitions")  # next_obs: what each step returned
        np.testing.assert_array_equal(batch["next_obs"], np.broadcast_to(np.asarray(obs, np.float32), (3, 4)))
        assert batch["rewards"].tolist() == [float(np.float32(reward))] * 3
        assert batch["dones"].tolist() == [bool(terminated or truncated)] * 3
        return
    with pytest.raises(EnvOutputError) as caught:
        _sample(env)
    named = [field for field, wrong in problems.items() if wrong and field in str(caught.value)]
    assert named, (str(caught.value), problems)
