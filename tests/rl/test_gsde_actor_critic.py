"""gSDE for the actor-critic algorithms (PG, A2C, A3C, PPO; ``use_sde``), as Stable-Baselines3's
PPO and A2C: each env keeps its noise matrix for ``sde_sample_freq`` steps (one rollout fragment
by default), the actions' spread is the Gaussian the log-probabilities are of, the learner trains
the noise's scale; PPO with it on MountainCarContinuous reaches the flag in the zoo's 20k steps;
bad input before any process starts."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from asyncflow.algorithms import A2C, PPO, A2CConfig, PPOConfig
from asyncflow.errors import ConfigError
from asyncflow.rl.models.builtin import ActorCriticNet
from asyncflow.rl.models.distributions import DiagGaussian
from asyncflow.rl.models.numpy_export import numpy_net
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACTIONS = gym.spaces.Box(-1, 1, (2,), np.float32)


def _policy(freq: int, log_std_init: float = -1.0) -> ActorCriticPolicy:
    return ActorCriticPolicy(OBS, ACTIONS, hidden=(32, 32), sde=True, sde_sample_freq=freq,
                             log_std_init=log_std_init, seed=3)  # fmt: skip


def test_each_env_keeps_its_noise_matrix_for_sde_sample_freq_steps() -> None:
    policy = _policy(4)
    assert isinstance(policy.model, ActorCriticNet) and policy.model.log_std.shape == (32, 2)
    obs = np.random.default_rng(0).uniform(-1, 1, (2, 3)).astype(np.float32)
    actions = np.stack([policy.compute_actions(obs)[0] for _ in range(8)])  # (steps, envs, d)
    mean = policy.greedy_actions(obs)
    assert np.allclose(actions[0], actions[1:4])  # the same state and matrix: the same action
    assert not np.allclose(actions[3], actions[4])  # a new matrix at step 5
    assert np.allclose(actions[4], actions[5:8])
    assert not np.allclose(actions[0] - mean, actions[0, ::-1] - mean[::-1])  # each env its own matrix
    assert not np.allclose(actions[0], mean)  # noise there is
    assert numpy_net(policy.model, OBS, ACTIONS) is None  # numpy workers cannot draw it


def test_the_actions_spread_is_the_gaussian_their_log_probabilities_are_of() -> None:
    policy = _policy(1)  # a new matrix at every step: independent draws at one state
    obs = np.float32([[0.3, -0.5, 0.8]])
    draws = [policy.compute_actions(obs) for _ in range(4000)]
    actions = np.concatenate([a for a, _, _ in draws])
    with torch.no_grad():
        inputs, _ = policy.model(torch.as_tensor(obs))
    dist = DiagGaussian(inputs, (2,))
    std = dist.log_std.exp().numpy()[0]
    assert np.allclose(actions.mean(0), dist.mean.numpy()[0], atol=4 * std / np.sqrt(4000))
    assert np.allclose(actions.std(0), std, rtol=0.05)
    logp = np.concatenate([lp for _, lp, _ in draws[:5]])
    expected = DiagGaussian(inputs.expand(5, -1), (2,)).log_prob(torch.as_tensor(actions[:5])).numpy()
    assert np.allclose(logp, expected, atol=1e-5)
    # the scale follows the state: another state, another spread
    with torch.no_grad():
        other, _ = policy.model(torch.as_tensor(np.float32([[-0.9, 0.9, -0.2]])))
    assert not np.allclose(other[0, 2:].numpy(), inputs[0, 2:].numpy(), atol=1e-3)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
async def test_the_learner_trains_the_noise_scale(algo: str) -> None:
    cls, config_cls = {"ppo": (PPO, PPOConfig), "a2c": (A2C, A2CConfig)}[algo]
    config = config_cls(env="Pendulum-v1", num_workers=1, num_envs_per_worker=2, rollout_fragment_length=32,
                        train_batch_size=64, use_sde=True, log_std_init=-2.0, hidden=(32, 32))  # fmt: skip
    assert config.actor_critic_options()["sde_sample_freq"] == 32  # by default one fragment, as SB3's -1
    async with cls(config) as algo_:
        log_std = algo_.learner.model.log_std.detach().clone()
        assert log_std.shape == (32, 1) and torch.all(log_std == -2.0)
        async for result in algo_.train():
            if result["num_env_steps_sampled"] >= 256:
                break
        assert not torch.equal(algo_.learner.model.log_std, log_std)
        assert np.isfinite(result["episode_return_mean"]) or result["episodes_total"] == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_ppo_with_gsde_reaches_the_flag_on_mountain_car_continuous() -> None:
    # The zoo's settings (examples/tuned/ppo-MountainCarContinuous-v0.yaml) at its budget of 20k steps.
    config = PPOConfig(env="MountainCarContinuous-v0", normalize_observations=True, normalize_rewards=True,
                       num_workers=0, num_envs_per_worker=1, rollout_fragment_length=8, train_batch_size=8,
                       minibatch_size=8, num_epochs=10, lam=0.9, gamma=0.9999, lr=7.77e-5, entropy_coeff=0.00429,
                       clip_param=0.1, vf_clip_param=None, vf_loss_coeff=0.19, max_grad_norm=5.0,
                       standardize_advantages="minibatch", hidden=(64, 64), use_sde=True, log_std_init=-3.29,
                       evaluation_interval=10**9, evaluation_episodes=10, seed=0)  # fmt: skip
    async with PPO(config) as algo:
        async for result in algo.train():
            if result["num_env_steps_sampled"] >= 20_000:
                break
        played = await algo.evaluate()
    assert played["episode_return_mean"] >= 80, played  # the flag gives 100, less the actions' cost


def test_gsde_bad_input_fails_before_any_process_starts() -> None:
    with pytest.raises(ConfigError, match="use_sde: gSDE explores in Box action spaces"):
        PPO(PPOConfig(env="CartPole-v1", use_sde=True))
    with pytest.raises(ConfigError, match="use_sde: the built-in feed-forward model's; not with use_lstm"):
        PPOConfig(env="Pendulum-v1", use_sde=True, use_lstm=True)
    with pytest.raises(ConfigError, match="log_std_init: the built-in model's; not with a model of your own"):
        PPOConfig(env="Pendulum-v1", log_std_init=-1.0, model=lambda o, a: torch.nn.Linear(3, 2))
    with pytest.raises(ConfigError, match="worker_inference: numpy cannot run gSDE's noise"):
        PPO(PPOConfig(env="Pendulum-v1", use_sde=True, worker_inference="numpy"))
    with pytest.raises(ConfigError, match="sde_sample_freq: must be >= 1"):
        A2CConfig(use_sde=True, sde_sample_freq=0)
