"""Atari end to end on real ALE frames: PPO, IMPALA and DQN on Pong, a checkpoint, a video of a game."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asyncflow import ConfigError
from asyncflow.algorithms import DQN, IMPALA, PPO, DQNConfig, IMPALAConfig, PPOConfig
from asyncflow.evaluate import evaluate
from asyncflow.rl.envs.atari import AtariEnv, take_games

pytest.importorskip("ale_py")

PONG = "ALE/Pong-v5"
SMALL: dict[str, Any] = {"env": PONG, "num_workers": 2, "num_envs_per_worker": 2, "hidden": (64,), "seed": 0}
CASES = [
    (PPO, PPOConfig(**SMALL, rollout_fragment_length=32, train_batch_size=128, minibatch_size=64, num_epochs=1,
                    learner_precision="bfloat16")),
    (IMPALA, IMPALAConfig(**SMALL, rollout_fragment_length=16, timesteps_per_iteration=128)),
    (DQN, DQNConfig(**SMALL, rollout_fragment_length=8, learning_starts=64, train_batch_size=16, buffer_size=500,
                    timesteps_per_iteration=128, training_intensity=2.0, learner_precision="bfloat16")),
]  # fmt: skip


def test_an_ale_id_gets_the_standard_preprocessing() -> None:
    env = PPOConfig(env=PONG).worker_env()
    assert isinstance(env, AtariEnv)
    game = env()
    try:
        assert game.observation_space.shape == (4, 84, 84) and game.observation_space.dtype == np.uint8
        obs, _ = game.reset(seed=0)
        frames = [obs]
        for _ in range(60):
            obs, *_ = game.step(game.action_space.sample())
            frames.append(obs)
        # Real pixels: the frames change, and each stack shifts by one frame per step.
        assert len({f.tobytes() for f in frames}) > 30
        np.testing.assert_array_equal(frames[-1][:3], frames[-2][1:])
        assert game.unwrapped.spec.kwargs["repeat_action_probability"] == 0.25  # v5's sticky actions stay
    finally:
        game.close()
    raw = PPOConfig(env=PONG, atari_preprocessing=False).worker_env()
    assert raw == PONG  # the env exactly as gymnasium makes it


@pytest.mark.parametrize(("cls", "config"), CASES, ids=[c.__name__ for c, _ in CASES])
async def test_two_iterations_on_pong(cls: Any, config: Any) -> None:
    async with cls(config) as algo:
        results = []
        async for result in algo.train():
            results.append(result)
            if len(results) == 2:
                break
        assert algo.observation_space.shape == (4, 84, 84)
    assert results[1]["num_env_steps_sampled"] > results[0]["num_env_steps_sampled"] >= 128
    learner = results[1]["learner"]
    assert learner and all(np.isfinite(v) for v in learner.values())


async def test_dqn_checkpoint_keeps_its_frame_replay_and_a_whole_game_video(tmp_path: Path) -> None:
    config = CASES[2][1]
    async with DQN(config) as algo:
        train = algo.train()
        await anext(train)
        await anext(train)
        held = algo.resources.state()
        assert 0 < held["frames"] < 2 * held["size"]  # frames stored once, not 8 times per row
        saved = await algo.save(tmp_path / "ckpt")
        await train.aclose()
    restored = DQN.restore(saved)
    async with restored:
        assert restored.resources.state() == held
        result = await anext(restored.train())
        assert result["num_env_steps_sampled"] > 256

    video = tmp_path / "game.gif"
    played = evaluate(saved, episodes=1, video=video, video_frames=5_000)
    (length,) = played.lengths
    assert played.returns[0] <= -5  # whole games with Pong's real score (a new agent loses many points)
    from PIL import Image

    with Image.open(video) as gif:
        assert gif.size == (160, 210)  # the real screen, not the 84x84 input
        # Every step of the game: Pillow merges a frame into the one before when they are identical.
        assert 0.95 * length <= gif.n_frames <= length
        gif.seek(gif.n_frames // 2)
        colours = np.asarray(gif.convert("RGB")).reshape(-1, 3)
        assert len(np.unique(colours, axis=0)) >= 3  # Pong's field, paddles and ball, in colour


def test_evaluation_envs_play_whole_games_with_real_rewards() -> None:
    env = PPOConfig(env=PONG).worker_env(training=False)()
    try:
        env.reset(seed=1)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total, done = total + float(reward), terminated or truncated
        ((score, _),) = take_games(env) or [(None, None)]
        assert score == total and score <= -15  # random play loses by most of Pong's 21 points
    finally:
        env.close()


def test_an_unknown_game_fails_before_any_process_starts() -> None:
    with pytest.raises(ConfigError, match="NoSuchGame"):
        PPO(PPOConfig(env="ALE/NoSuchGame-v5"))  # the constructor builds the env once, in the driver
    with pytest.raises(ConfigError, match="atari_screen_size"):
        PPOConfig(env=PONG, atari_screen_size=20)  # smaller than the CNN's 36


@pytest.mark.parametrize("name", ["ppo", "impala", "appo", "dqn", "apex"])
def test_the_shipped_atari_configs_load(name: str) -> None:
    from asyncflow.algorithms import ALGORITHMS
    from asyncflow.config_file import load_config_file

    path = Path(__file__).resolve().parents[2] / "examples" / "atari" / f"{name}.yaml"
    config = ALGORITHMS[name].config_class(**load_config_file(path))
    assert isinstance(config.worker_env(), AtariEnv) and config.hidden == (512,)
