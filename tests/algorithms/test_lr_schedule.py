"""``learner.lr_schedule`` (the rate over env steps sampled) and ``learner.optimizer`` (Adam or
RMSprop), on real training runs; bad input before any process starts."""

from __future__ import annotations

import re

import pytest
import torch

from asyncflow.algorithms import A2C, DQN, PPO, SAC, A2CConfig, DQNConfig, PPOConfig, SACConfig
from asyncflow.errors import ConfigError
from asyncflow.rl.learners.optim import Adam, RMSprop
from asyncflow.rl.learners.schedule import scheduled

SCHEDULE = ((0, 1e-3), (1_000, 5e-4), (2_000, 0.0))


def test_a_schedule_is_linear_between_its_points_and_flat_outside() -> None:
    assert scheduled(SCHEDULE, 0) == 1e-3
    assert scheduled(SCHEDULE, 500) == pytest.approx(7.5e-4)
    assert scheduled(SCHEDULE, 1_500) == pytest.approx(2.5e-4)
    assert scheduled(SCHEDULE, 10_000) == 0.0
    assert scheduled(((100, 2.0), (200, 1.0)), 50) == 2.0  # the first point's value before it


def _weights(algo: PPO) -> torch.Tensor:
    return torch.nn.utils.parameters_to_vector(algo.learner.model.parameters()).detach().clone()


async def test_the_learner_follows_the_schedule_over_the_env_steps_sampled() -> None:
    config = PPOConfig(env="CartPole-v1", num_workers=0, train_batch_size=256, minibatch_size=64,
                       num_epochs=2, lr_schedule=SCHEDULE)  # fmt: skip
    rates, steps_before = [], 0
    async with PPO(config) as algo:
        async for result in algo.train():
            rates.append((steps_before, algo.learner.optimizer.lr))
            steps_before = result["num_env_steps_sampled"]
            if steps_before >= 2_000:
                break
        for steps, lr in rates:  # each iteration trained at the rate for the steps sampled before it
            assert lr == pytest.approx(scheduled(SCHEDULE, steps)), rates
        assert len({lr for _, lr in rates}) == len(rates)  # a new rate each iteration
        before = _weights(algo)
        async for _ in algo.train():  # past the last point the rate is 0: the weights stay
            break
        assert algo.learner.optimizer.lr == 0.0
        assert torch.equal(_weights(algo), before)
        with pytest.raises(ConfigError, match=r"follows learner\.lr_schedule"):
            await algo.change_config(lr=1e-4)


async def test_ppo_s_clip_range_follows_its_schedule_into_the_loss() -> None:
    schedule = ((0, 0.3), (1_024, 0.1))
    config = PPOConfig(env="CartPole-v1", num_workers=0, train_batch_size=256, minibatch_size=64, num_epochs=1,
                       clip_param_schedule=schedule)  # fmt: skip
    clips, steps_before = [], 0
    async with PPO(config) as algo:
        async for result in algo.train():
            clips.append((steps_before, algo.learner.loss_config.clip_param, algo.config.clip_param))
            steps_before = result["num_env_steps_sampled"]
            if steps_before >= 1_280:
                break
        for steps, in_loss, in_config in clips:  # each iteration's loss clipped at the value for its steps
            assert in_loss == in_config == pytest.approx(scheduled(schedule, steps)), clips
        assert clips[0][1] == 0.3 and clips[-1][1] == pytest.approx(0.1)
        with pytest.raises(ConfigError, match="clip_param follows clip_param_schedule"):
            await algo.change_config(clip_param=0.2)
        await algo.change_config(entropy_coeff=0.01)  # another live change keeps the scheduled clip
        assert algo.learner.loss_config.clip_param == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="clip_param_schedule: env steps must start"):
        PPOConfig(clip_param_schedule=((10, 0.2), (5, 0.1)))


async def test_every_optimizer_of_an_off_policy_learner_follows_it() -> None:
    schedule = ((0, 1e-3), (400, 1e-4))
    config = SACConfig(env="Pendulum-v1", num_workers=0, learning_starts=100, lr_schedule=schedule,
                       timesteps_per_iteration=200)  # fmt: skip
    async with SAC(config) as algo:
        async for result in algo.train():
            if result["num_env_steps_sampled"] >= 400:
                break
        async for _ in algo.train():
            break
        rates = [algo.learner.actor_opt.lr, algo.learner.critic_opt.lr, algo.learner.alpha_opt.lr]
        assert rates == [pytest.approx(1e-4)] * 3


async def test_a2c_steps_with_rmsprop_when_told() -> None:
    config = A2CConfig(env="CartPole-v1", num_workers=0, optimizer="rmsprop", lr=7e-4)
    async with A2C(config) as algo:
        before = _weights(algo)  # type: ignore[arg-type]
        async for _ in algo.train():
            break
        optimizer = algo.learner.optimizer
        assert isinstance(optimizer, RMSprop) and optimizer.steps >= 1
        assert float(optimizer.exp_avg_sq[0].abs().sum()) > 0
        assert not torch.equal(_weights(algo), before)  # type: ignore[arg-type]
    async with A2C(A2CConfig(env="CartPole-v1", num_workers=0)) as algo:
        async for _ in algo.train():
            break
        assert isinstance(algo.learner.optimizer, Adam)


def test_bad_optimizer_or_schedule_fails_before_any_process_starts() -> None:
    with pytest.raises(ConfigError, match=re.escape("learner.optimizer: expected one of ['adam', 'rmsprop']")):
        PPOConfig(optimizer="sgd")
    with pytest.raises(ConfigError, match="DQN steps with Adam only"):
        DQN(DQNConfig(env="CartPole-v1", optimizer="rmsprop"))
    with pytest.raises(ConfigError, match="lr_schedule: env steps must start at >= 0 and increase"):
        PPOConfig(lr_schedule=((0, 1e-3), (0, 0.0)))
    with pytest.raises(ConfigError, match="lr_schedule: values must be >= 0"):
        PPOConfig(lr_schedule=((0, -1e-3),))
    with pytest.raises(ConfigError, match=re.escape("lr_schedule: expected ((env_steps, value), ...) pairs")):
        PPOConfig(lr_schedule=((0, 1e-3, 5),))
