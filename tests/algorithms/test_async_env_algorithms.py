"""Every algorithm takes async envs (``AsyncEnv``) through real worker processes;
checkpoints say what they cannot keep; ``asyncflow evaluate`` plays them; and PPO
and DQN learn CartPole behind a random 0-5 ms delay per step."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from asyncflow.algorithms import ALGORITHMS, DQN, PPO, Algorithm, DQNConfig, PPOConfig, ResumeWarning
from asyncflow.evaluate import evaluate

from ..toy_envs import async_env

CONTINUOUS = ("sac", "ddpg", "td3")


async def _iterations(algo: Algorithm, n: int) -> list[dict[str, Any]]:
    results = []
    async with algo:
        async for result in algo.train():
            results.append(result)
            if len(results) == n:
                break
    return results


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "name", sorted(n for n, c in ALGORITHMS.items() if c.recipe.samples and c.recipe.capabilities.async_env)
)
async def test_every_algorithm_trains_on_async_envs(name: str) -> None:
    cls = ALGORITHMS[name]
    env_id = "Pendulum-v1" if name in CONTINUOUS else "CartPole-v1"
    fields: dict[str, Any] = {"env": functools.partial(async_env, env_id, (0.0, 0.001)), "num_workers": 1,
                              "num_envs_per_worker": 4, "rollout_fragment_length": 16}  # fmt: skip
    names = {f.name for f in cls.config_class.__dataclass_fields__.values()}
    for key, value in (("timesteps_per_iteration", 128), ("learning_starts", 64), ("train_batch_size", 64)):
        if key in names and (name, key) != ("a3c", "train_batch_size"):  # A3C has no training batch to size
            fields[key] = value
    results = await _iterations(cls(cls.config_class(**fields)), 2)
    assert results[-1]["num_env_steps_sampled"] >= 128
    assert results[-1]["num_env_steps_trained"] > 0 or name == "a3c"
    assert results[-1]["num_env_errors"] == 0 and results[-1]["num_env_step_timeouts"] == 0


@pytest.mark.timeout(180)
async def test_a_checkpoint_of_an_async_env_run_resumes_with_fresh_episodes_and_says_so(tmp_path: Path) -> None:
    config = PPOConfig(env=functools.partial(async_env, "CartPole-v1"), num_workers=1, num_envs_per_worker=4,
                       rollout_fragment_length=32, train_batch_size=128, num_epochs=1)  # fmt: skip
    async with PPO(config) as again:
        async for _ in again.train():
            path = await again.save(tmp_path / "async.ckpt")
            break
    restored = Algorithm.restore(path)
    with pytest.warns(ResumeWarning, match="starts fresh episodes"):
        after = await _iterations(restored, 1)
    assert after[0]["training_iteration"] == 2
    played = evaluate(path, episodes=2)
    assert len(played.returns) == 2 and all(n >= 8 for n in played.lengths)


# Budgets, and what seed 0 needed when they were set (2-core VM): see the closing note of
# the async-env issue.
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("algo", "threshold", "budget"),
    [
        (PPO(PPOConfig(env=functools.partial(async_env, "CartPole-v1", (0.0, 0.005)), num_workers=2,
                       num_envs_per_worker=32, rollout_fragment_length=32, seed=0)), 475, 200_000),
        (DQN(DQNConfig(env=functools.partial(async_env, "CartPole-v1", (0.0, 0.005)), num_workers=2,
                       seed=0)), 150, 100_000),
    ],
    ids=["ppo", "dqn"],
)  # fmt: skip
async def test_learns_cartpole_behind_a_random_delay(algo: Algorithm, threshold: float, budget: int) -> None:
    async with algo:
        async for result in algo.train():
            if result["episode_return_mean"] >= threshold or result["num_env_steps_sampled"] >= budget:
                break
    print(f"{algo.name}: {result['num_env_steps_sampled']} steps, {result['time_total_s']:.1f} s, "
          f"return {result['episode_return_mean']:.1f}")  # fmt: skip
    assert result["episode_return_mean"] >= threshold, result
