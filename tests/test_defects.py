"""Defects a fresh read of the code found (issue "one shape"), each with the test that
failed before its fix."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import asyncflow
from asyncflow import ConfigError
from asyncflow.algorithms import PPO, SAC, PPOConfig, SACConfig
from asyncflow.algorithms.sac import SACLearner
from asyncflow.algorithms.td3 import TD3Learner
from asyncflow.rl.data.sample_batch import SampleBatch
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy
from asyncflow.rl.sampling.trajectory import Postprocessing, Segment

from .conftest import actor_children


def test_pg_advantages_are_plain_discounted_returns() -> None:
    """PG has no critic: its advantages used to be the returns minus an untrained value head."""
    rewards = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    dones = np.array([[False], [True], [False], [False]])
    values = np.array([[5.0], [-3.0], [0.7], [9.0]], np.float32)  # what the policy's head said
    seg = Segment(np.zeros((4, 1, 2), np.float32), np.zeros((4, 1), np.int64), rewards, dones, dones,
                  np.zeros((4, 1), np.float32), values, np.zeros((4, 1), np.int64), last_obs=np.ones((1, 2)),
                  truncations=[(1, 0, np.ones(2, np.float32))])  # fmt: skip
    columns = Postprocessing("gae", gamma=0.5, lam=1.0, use_critic=False)(seg, lambda obs: np.full(len(obs), 100.0))
    np.testing.assert_allclose(columns["advantages"], [1 + 0.5 * 2, 2, 3 + 0.5 * 4, 4])


def _batch(n: int = 32) -> SampleBatch:
    rng = np.random.default_rng(0)
    return SampleBatch({"obs": rng.normal(size=(n, 3)).astype(np.float32), "actions": rng.uniform(-1, 1, (n, 1)),
                        "rewards": 1e4 * rng.normal(size=n).astype(np.float32),
                        "next_obs": rng.normal(size=(n, 3)).astype(np.float32),
                        "discounts": np.full(n, 0.99, np.float32)})  # fmt: skip


@pytest.mark.parametrize("learner", [SACLearner, TD3Learner])
def test_sac_and_td3_honour_max_grad_norm(learner: type) -> None:
    """Both learners used to take no max_grad_norm: a config's was ignored without a word."""
    spaces = (gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-1, 1, (1,), np.float32))

    def first_gradient_norm(opt: object) -> float:  # after one Adam step, exp_avg is (1 - beta1) * gradient
        return float(torch.nn.utils.get_total_norm(opt.exp_avg)) / (1 - 0.9)  # type: ignore[attr-defined]

    clipped = learner(*spaces, hidden=(16,), max_grad_norm=0.25)
    clipped.learn_on_batch(_batch())  # rewards of 1e4: the critic's raw gradient is far above 0.25
    assert first_gradient_norm(clipped.critic_opt) <= 0.25 * 1.0001
    free = learner(*spaces, hidden=(16,))
    free.learn_on_batch(_batch())
    assert first_gradient_norm(free.critic_opt) > 10
    assert SACConfig(max_grad_norm=1.0).max_grad_norm == 1.0 and SACConfig().max_grad_norm is None


def test_gradients_applied_are_clipped_once_where_they_were_computed() -> None:
    """``apply_gradients`` clipped the gradients a second time (A3C's workers clip already)."""
    policy = ActorCriticPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), hidden=(8,), max_grad_norm=0.5)
    grads = [np.full(p.shape, 10.0, np.float32) for p in policy.model.parameters()]  # norm far above 0.5
    policy.apply_gradients(grads)
    beta1 = 0.9
    for moment, g in zip(policy.optimizer.exp_avg, grads, strict=True):
        np.testing.assert_allclose(moment.numpy(), (1 - beta1) * g, rtol=1e-6)


async def test_building_and_training_leave_the_host_applications_torch_generator_alone() -> None:
    """Five constructors called torch.manual_seed: an embedding application's own randomness
    changed when it built an algorithm."""
    for make in (lambda: PPO(PPOConfig(num_workers=0, num_envs_per_worker=2, rollout_fragment_length=32,
                                       train_batch_size=64, minibatch_size=32, seed=3)),
                 lambda: SAC(SACConfig(num_workers=0, learning_starts=16, timesteps_per_iteration=32,
                                       training_intensity=4.0, seed=3))):  # fmt: skip
        torch.manual_seed(1234)
        expected = torch.rand(3)
        torch.manual_seed(1234)
        async with make() as algo:
            async for _ in algo.train():
                break
        assert torch.equal(torch.rand(3), expected)


class HasAPid:
    def pid(self) -> int:
        return 7


def has_a_pid() -> HasAPid:
    return HasAPid()


async def test_an_actor_method_named_like_the_handles_own_is_refused() -> None:
    """``await handle.pid()`` was ``TypeError: 'int' object is not callable``."""
    async with asyncflow.open_runtime("process") as runtime:
        with pytest.raises(ConfigError, match=r"actor HasAPid has pid\(\), which an ActorHandle uses for itself"):
            await runtime.spawn(HasAPid)
        with pytest.raises(ConfigError, match=r"has pid\(\)"):
            await runtime.spawn(has_a_pid)  # a factory: found once the actor has started, and stopped
    assert actor_children() == []
