"""Env output checks: a wrong shape or dtype, or a NaN or inf in an observation or
reward, stops the run with an error that names the env, worker, field and step."""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from asyncflow import EnvOutputError
from asyncflow.algorithms import DQN, PPO, DQNConfig, PPOConfig
from asyncflow.rl import RolloutWorker
from asyncflow.rl.envs.multi_agent import MultiAgentCartPole
from asyncflow.rl.policies.random_policy import RandomPolicy
from asyncflow.rl.sampling.multi_agent_worker import MappedPolicy, MultiAgentRolloutWorker

from ..conftest import actor_children
from ..toy_envs import GoalGrid


class OneNumber(gym.ObservationWrapper):  # type: ignore[type-arg]
    """CartPole returning shape (1,) where its space says (4,): broadcast, it would train on garbage."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[:1]


class NaNAfter(gym.Wrapper):  # type: ignore[type-arg]
    """CartPole whose observations turn to NaN after ``after`` steps of the worker."""

    def __init__(self, after: int = 40, where: str = "obs") -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.after, self.where, self.steps = after, where, 0

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps > self.after:
            if self.where == "obs":
                obs = np.full_like(obs, np.nan)
            else:
                reward = float("inf")
        return obs, reward, terminated, truncated, info


def nan_reward() -> NaNAfter:
    return NaNAfter(where="reward")


class FloatPixels(gym.ObservationWrapper):  # type: ignore[type-arg]
    """GoalGrid whose image comes back as floats in [0, 1] although the space says uint8."""

    def __init__(self) -> None:
        super().__init__(GoalGrid())

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**observation, "image": observation["image"] / 255.0}


@pytest.mark.timeout(60)
async def test_a_wrong_shape_fails_the_run_naming_env_worker_field_and_step() -> None:
    with pytest.raises(EnvOutputError) as caught:
        async with PPO(PPOConfig(env=OneNumber, num_workers=2, train_batch_size=256)) as algo:
            async for _ in algo.train():
                pass
    message = str(caught.value)
    # Both workers fail as they start; whichever reports first is the error.
    assert "env 'OneNumber'" in message and re.search(r"worker [12], sub-env 0\)", message)
    assert "an observation of shape (1,), not (4,)" in message and "step 0" in message
    assert "check_env_output=False" in message
    assert actor_children() == []


@pytest.mark.timeout(60)
async def test_nan_observations_later_in_a_run_stop_dqn_with_the_step() -> None:
    config = DQNConfig(env=NaNAfter, num_workers=2, learning_starts=32, timesteps_per_iteration=64)
    seen = 0
    with pytest.raises(
        EnvOutputError, match=r"worker \d, sub-env \d\) returned a NaN or inf in observation at its step 41;"
    ):
        async with DQN(config) as algo:
            async for _ in algo.train():
                seen += 1
    assert seen >= 1  # it trained until the env went bad, then stopped


def test_inf_rewards_float_pixels_and_agents_are_caught() -> None:
    with pytest.raises(EnvOutputError, match=r"sub-env 0\) returned a reward of inf at its step 41;"):
        worker = RolloutWorker(nan_reward, num_envs=1, rollout_fragment_length=100, policy_factory=RandomPolicy)
        for _ in range(5):
            worker.sample()
    with pytest.raises(EnvOutputError, match=r"observation\['image'\] of dtype float64, which does not fit uint8"):
        RolloutWorker(FloatPixels)
    broken = MultiAgentCartPole(num_agents=2)
    broken.envs["agent_1"] = OneNumber()

    def env() -> MultiAgentCartPole:
        return broken

    with pytest.raises(EnvOutputError, match=r"agent 'agent_1'\) returned an observation of shape \(1,\)"):
        MultiAgentRolloutWorker(env, policies={"p": MappedPolicy(RandomPolicy)}, policy_mapping_fn=lambda a: "p")


def test_the_checks_can_be_turned_off_for_an_env_you_trust() -> None:
    worker = RolloutWorker(OneNumber, num_envs=2, rollout_fragment_length=8, check_env_output=False)
    batch = worker.sample()  # broadcast into the (4,) buffer: exactly what the checks exist for
    assert batch["obs"].shape == (16, 4)
    assert np.all(batch["obs"] == batch["obs"][:, :1])
