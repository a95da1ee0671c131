"""gSDE (generalized state-dependent exploration) for SAC: the noise is smooth in time (each env
keeps its matrix for ``sde_sample_freq`` steps) and a function of the state; the learner trains
the noise's scale; a fixed temperature stays fixed; bad input before any process starts."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from asyncflow.algorithms import SAC, SACConfig
from asyncflow.errors import ConfigError
from asyncflow.rl.models.builtin import SDEActor
from asyncflow.rl.policies.continuous import SquashedGaussianPolicy

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACTIONS = gym.spaces.Box(-1, 1, (2,), np.float32)


def _policy(freq: int) -> SquashedGaussianPolicy:
    return SquashedGaussianPolicy(OBS, ACTIONS, hidden=(32, 32), sde_sample_freq=freq, log_std_init=-1.0, seed=3)


def test_each_env_keeps_its_noise_matrix_for_sde_sample_freq_steps() -> None:
    policy = _policy(4)
    assert isinstance(policy.actor, SDEActor)
    obs = np.random.default_rng(0).uniform(-1, 1, (2, 3)).astype(np.float32)
    actions = np.stack([policy.compute_actions(obs)[0] for _ in range(8)])  # (steps, envs, d)
    greedy = policy.greedy_actions(obs)
    assert np.allclose(actions[0], actions[1:4])  # the same state and matrix: the same action
    assert not np.allclose(actions[3], actions[4])  # a new matrix at step 5
    assert np.allclose(actions[4], actions[5:8])
    assert not np.allclose(actions[0, 0], actions[0, 1])  # each env its own matrix (and state)
    assert not np.allclose(actions[0], greedy)  # noise there is


def test_the_noise_depends_on_the_state_smoothly() -> None:
    policy = _policy(1000)
    base = np.zeros((1, 3), np.float32)
    near, far = base + 1e-3, base + np.float32([[0.9, -0.8, 0.7]])
    deviation = [policy.compute_actions(o)[0] - policy.greedy_actions(o) for o in (base, near, far)]
    assert np.abs(deviation[1] - deviation[0]).max() < 1e-2  # a nearby state: nearly the same noise
    assert np.abs(deviation[2] - deviation[0]).max() > 1e-2  # another state: other noise


async def test_the_learner_trains_the_noise_scale_and_a_fixed_temperature_stays() -> None:
    config = SACConfig(env="Pendulum-v1", num_workers=0, use_sde=True, sde_sample_freq=8, log_std_init=-2.0,
                       learn_alpha=False, initial_alpha=0.1, learning_starts=256, timesteps_per_iteration=256,
                       hidden=(32, 32))  # fmt: skip
    async with SAC(config) as algo:
        log_std = algo.learner.actor.log_std.detach().clone()
        assert torch.all(log_std == -2.0)
        async for result in algo.train():
            if result["num_env_steps_sampled"] >= 768:
                break
        assert not torch.equal(algo.learner.actor.log_std, log_std)
        assert float(algo.learner.log_alpha.detach().exp()) == pytest.approx(0.1)
        assert result["learner"]["alpha"] == pytest.approx(0.1)
        sent = algo.learner.get_weights().vector  # what the workers get holds the noise's scale (first)
        log_std = algo.learner.actor.log_std.detach().numpy().ravel()
        assert sent.size == sum(p.numel() for p in algo.learner.actor.parameters())
        assert np.array_equal(sent[: log_std.size], log_std)


def test_gsde_with_a_model_of_ones_own_fails_before_any_process_starts() -> None:
    class Mine(torch.nn.Module):
        def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
            super().__init__()

    with pytest.raises(ConfigError, match="use_sde: gSDE takes the built-in model"):
        SAC(SACConfig(env="Pendulum-v1", use_sde=True, model=Mine))
    with pytest.raises(ConfigError, match="sde_sample_freq: must be >= 1"):
        SACConfig(use_sde=True, sde_sample_freq=0)
