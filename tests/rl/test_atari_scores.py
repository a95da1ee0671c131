"""Scores as published: whole games with real rewards, the learner's clipped lives aside."""

from __future__ import annotations

import pytest

from asyncflow.algorithms import PPO, PPOConfig
from asyncflow.rl.envs.atari import take_games

from ..toy_envs import ScriptedGame, scripted_atari


def test_the_wrappers_end_a_training_episode_per_life_and_keep_the_game() -> None:
    env = scripted_atari()
    env.reset(seed=0)
    lives: list[tuple[float, int]] = []
    total, steps = 0.0, 0
    while len(lives) < 3:
        _, reward, terminated, truncated, _ = env.step(1)
        total, steps = total + float(reward), steps + 1
        if terminated or truncated:
            lives.append((total, steps))
            total, steps = 0.0, 0
            env.reset()
    # The first life is 10 steps; each later one starts with the no-op step of the reset in between.
    assert lives == [(10.0, 10), (9.0, 9), (9.0, 9)]
    assert take_games(env) == [(150.0, 30)]
    assert take_games(env) == []


@pytest.mark.parametrize("num_workers", [0, 2])
async def test_results_report_game_scores_and_the_clipped_training_return(num_workers: int) -> None:
    config = PPOConfig(env=scripted_atari, num_workers=num_workers, num_envs_per_worker=2,
                       rollout_fragment_length=64, train_batch_size=128, minibatch_size=64, num_epochs=1)  # fmt: skip
    async with PPO(config) as algo:
        result = await anext(algo.train())
    game = ScriptedGame.LIFE_STEPS * ScriptedGame.LIVES
    assert result["episode_return_mean"] == game * ScriptedGame.POINTS
    assert result["episode_len_mean"] == game
    assert result["episodes_this_iter"] == 128 * max(num_workers, 1) // game
    assert result["training_return_mean"] == pytest.approx((10 + 9 + 9) / 3)


async def test_without_game_scores_there_is_no_training_return() -> None:
    config = PPOConfig(env="CartPole-v1", num_workers=0, rollout_fragment_length=64, train_batch_size=512)
    async with PPO(config) as algo:
        result = await anext(algo.train())
    assert "training_return_mean" not in result
