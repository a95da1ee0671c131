"""TD3's and DDPG's exploration noise: Gaussian (independent at each step) or
Ornstein-Uhlenbeck (correlated in time, from 0 again at each episode)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from asyncflow.algorithms import TD3, TD3Config
from asyncflow.errors import ConfigError
from asyncflow.rl.policies.continuous import DeterministicPolicy

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACTIONS = gym.spaces.Box(-2, 2, (2,), np.float32)


def _noise(policy: DeterministicPolicy, obs: np.ndarray, steps: int) -> np.ndarray:
    """What the policy adds to its actor's action at each of ``steps`` steps, (steps, envs, 2)."""
    greedy = policy.greedy_actions(obs)
    return np.stack([policy.compute_actions(obs)[0] - greedy for _ in range(steps)])


def _lag1(x: np.ndarray) -> float:
    return float(np.corrcoef(x[:-1], x[1:])[0, 1])


def test_ou_noise_is_correlated_in_time_and_gaussian_noise_is_not() -> None:
    obs = np.zeros((2, 3), np.float32)  # two envs
    ou = DeterministicPolicy(OBS, ACTIONS, hidden=(16,), exploration_noise=0.2, noise_type="ou", seed=1)
    gaussian = DeterministicPolicy(OBS, ACTIONS, hidden=(16,), exploration_noise=0.2, seed=1)
    ou_noise, gaussian_noise = _noise(ou, obs, 400), _noise(gaussian, obs, 400)
    assert _lag1(ou_noise[:, 0, 0]) > 0.9
    assert abs(_lag1(gaussian_noise[:, 0, 0])) < 0.2
    assert abs(_lag1(ou_noise[:, 0, 0] - ou_noise[:, 1, 0])) > 0.5  # each env has its own process
    assert not np.allclose(ou_noise[:, 0], ou_noise[:, 1])
    assert gaussian_noise.std() == pytest.approx(0.2, rel=0.15)


def test_an_ended_episode_starts_its_noise_from_zero() -> None:
    obs = np.zeros((2, 3), np.float32)
    policy = DeterministicPolicy(OBS, ACTIONS, hidden=(16,), exploration_noise=0.5, noise_type="ou", seed=0)
    before = _noise(policy, obs, 300)[-1]
    assert np.abs(before).max() > 0.15  # the process wandered off 0 (its stationary std is 0.9)
    policy.episodes_ended([1])
    after = _noise(policy, obs, 1)[0]
    assert np.abs(after[1]).max() < 0.2  # one step from 0: sigma * sqrt(dt) * N(0, 1) = 0.05 N(0, 1)
    assert np.abs(after[0] - before[0]).max() < 0.2  # env 0's process goes on


def test_a_bad_noise_type_fails_before_any_process_starts() -> None:
    with pytest.raises(ConfigError, match="exploration_noise_type: expected 'gaussian' or 'ou', got 'pink'"):
        TD3(TD3Config(env="Pendulum-v1", exploration_noise_type="pink"))
