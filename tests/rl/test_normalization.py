"""Observation and reward normalization: statistics merged from every worker equal one pass
over all the data, travel with the weights and checkpoints, stay frozen in evaluation and
export, and make a badly conditioned task learnable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from asyncflow import ConfigError
from asyncflow.algorithms import PPO, PPOConfig, TwoTrainer, TwoTrainerConfig
from asyncflow.evaluate import load_policy, saved_normalizer
from asyncflow.export import export_policy
from asyncflow.rl.sampling.episodes import act_once
from asyncflow.rl.sampling.normalization import NormalizerState, RunningStats, WorkerNormalizer

from ..toy_envs import FarPoint, frozen_lake


def test_merged_statistics_equal_one_pass_over_all_the_data() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal([3.0, -200.0, 0.01], [1.0, 50.0, 0.001], (5_000, 3))
    cuts = np.sort(rng.choice(np.arange(1, len(data)), 40, replace=False))
    parts = []
    for chunk in np.split(data, cuts):  # 41 workers' worth, of uneven sizes
        stats = RunningStats((3,))
        for piece in np.array_split(chunk, 3):  # each counted in a few updates
            stats.update(piece)
        parts.append(stats)
    merged = RunningStats((3,))
    for i in rng.permutation(len(parts)):  # merged in any order
        merged.merge(parts[i])
    assert merged.count == len(data)
    np.testing.assert_allclose(merged.mean, data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(merged.var, data.var(0), rtol=1e-9)


def test_observations_are_centred_scaled_clipped_and_keep_their_dtype() -> None:
    state = NormalizerState.empty((2,), False, clip=5.0)
    state.obs.update(np.array([[0.0, 10.0], [2.0, 30.0]]))  # type: ignore[union-attr]
    out = state.normalize(np.array([[1.0, 20.0], [3.0, 1e6]], np.float32))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.0, 0.0], [2.0, 5.0]], atol=1e-6)  # std 1 and 10; the last one clipped


def test_rewards_are_divided_by_the_std_of_the_discounted_return() -> None:
    state = NormalizerState.empty(None, True, clip=10.0)
    worker = WorkerNormalizer(state, num_envs=2, gamma=0.5)
    rewards = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]], np.float32)
    dones = np.array([[False, False], [True, False], [False, False]])
    worker.rewards(rewards, dones)
    delta = worker.sync(state)
    # env 0: 1, 1.5 (episode ends), 1; env 1: 2, 3, 3.5
    returns = np.array([1.0, 2.0, 1.5, 3.0, 1.0, 3.5])
    assert delta.ret is not None and delta.ret.count == 6
    np.testing.assert_allclose(delta.ret.var, returns.var())
    state.merge(delta)
    scaled = state.scale_rewards(np.array([1.0], np.float32))
    np.testing.assert_allclose(scaled, 1.0 / np.sqrt(returns.var() + 1e-8), rtol=1e-6)


SMALL = {"num_workers": 2, "num_envs_per_worker": 2, "rollout_fragment_length": 64, "train_batch_size": 256}


async def test_every_observation_is_counted_once_and_checkpoints_keep_the_statistics(tmp_path: Path) -> None:
    config = PPOConfig(**SMALL, normalize_observations=True, normalize_rewards=True, evaluation_interval=100)
    async with PPO(config) as algo:
        async for result in algo.train():
            if result["training_iteration"] == 3:
                break
        state = algo.workers.normalizer
        assert state is not None and state.obs is not None and state.ret is not None
        # PPO's workers are idle after sampling, and the broadcast synced them all: each env
        # showed its reset observation, then one per step, and one more per reset.
        assert state.obs.count == result["num_env_steps_sampled"] + result["episodes_total"] + 4
        assert state.ret.count == result["num_env_steps_sampled"]
        counted = state.obs.count
        await algo.evaluate()  # frozen: evaluation counts nothing
        assert state.obs.count == counted
        saved = state.copy()
        path = await algo.save(tmp_path / "norm.ckpt")
    async with PPO.restore(path) as restored:
        again = restored.workers.normalizer
        assert again is not None and again.obs is not None and saved.obs is not None
        assert again.obs.count == saved.obs.count
        np.testing.assert_array_equal(again.obs.mean, saved.obs.mean)
        async for _ in restored.train():
            break
        assert again.obs.count > saved.obs.count  # it goes on counting from there


LOAD = """
import sys
import numpy as np
import torch
policy = torch.jit.load(sys.argv[1])
np.save(sys.argv[3], policy(torch.as_tensor(np.load(sys.argv[2]))).numpy())
assert not any(name.startswith("asyncflow") for name in sys.modules)
"""


async def test_export_folds_the_normalization_in(tmp_path: Path) -> None:
    config = PPOConfig(env=FarPoint, **SMALL, normalize_observations=True)
    async with PPO(config) as algo:
        async for _ in algo.train():
            break
        ckpt = await algo.save(tmp_path / "far.ckpt")
    algo, policy = load_policy(ckpt)
    normalizer = saved_normalizer(algo)
    assert normalizer is not None
    raw = np.linspace(1500, 4500, 1000, dtype=np.float32)[:, None]  # raw observations, as the env shows them
    want = np.stack([act_once(policy, o, normalizer=normalizer) for o in raw])
    export_policy(ckpt, tmp_path / "far.pt")
    np.save(tmp_path / "obs.npy", raw)
    run = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path / "far.pt"), str(tmp_path / "obs.npy"),
                          str(tmp_path / "out.npy")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = np.load(tmp_path / "out.npy")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got.std() > 0  # not constant: the comparison means something


def test_normalization_that_cannot_apply_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="float Box"):
        PPO(PPOConfig(env=frozen_lake, normalize_observations=True))
    with pytest.raises(ConfigError, match="vector_env"):
        PPO(PPOConfig(vector_env=True, normalize_rewards=True))
    with pytest.raises(ConfigError, match="multi-agent"):
        TwoTrainer(TwoTrainerConfig(normalize_observations=True))
    with pytest.raises(ConfigError, match="normalize_clip"):
        PPOConfig(normalize_clip=0)


async def _best_return(**fields: Any) -> float:
    config = PPOConfig(env=FarPoint, num_workers=2, num_envs_per_worker=4, rollout_fragment_length=64,
                       train_batch_size=1024, seed=0, **fields)  # fmt: skip
    best = -np.inf
    async with PPO(config) as algo:
        async for result in algo.train():
            best = max(best, result["episode_return_mean"])
            if best >= -1500 or result["num_env_steps_sampled"] >= BUDGET:
                break
    print(f"FarPoint {fields}: best {best:.0f} after {result['num_env_steps_sampled']} steps")
    return best


BUDGET = 60_000


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_badly_conditioned_task_learns_with_normalization_and_not_without() -> None:
    assert await _best_return(normalize_observations=True, normalize_rewards=True) >= -1500
    assert await _best_return() < -1500  # the same budget and seed, raw


def test_far_point_is_as_described() -> None:
    env = FarPoint()
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and 2000 <= obs[0] <= 4000
    still = []
    for seed in range(200):
        env.reset(seed=seed)
        still.append(sum(env.step(np.zeros(1, np.float32))[1] for _ in range(20)))
    assert -7500 < np.mean(still) < -6000
    assert isinstance(env.action_space, gym.spaces.Box)
