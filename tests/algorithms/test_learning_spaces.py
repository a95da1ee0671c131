"""Learning beyond vectors, for real: a Discrete observation (FrozenLake), pixels
(the tests' Catch, with the CNN), a Dict observation with MultiDiscrete actions
(the tests' GoalGrid), and a user's model defined in a script's ``__main__``.
Fixed seeds and step budgets, 2 worker processes; what seeds 0/1/2 needed when
the budgets were set (2-core VM) is beside each.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from asyncflow.algorithms import DQN, PPO, Algorithm, DQNConfig, PPOConfig
from asyncflow.rl import ModelConfig

from ..toy_envs import Catch, GoalGrid, frozen_lake
from .test_learning import _train_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("algo", "threshold", "budget"),
    [
        # FrozenLake-v1 (is_slippery=False), success rate over the last 100 episodes.
        # Seeds 0/1/2: 14.3k / 14.3k / 14.3k steps (5 s).
        (PPO(PPOConfig(env=frozen_lake, num_workers=2, seed=0)), 0.9, 60_000),
        # 10.2k / 10.2k / 10.2k steps (21-22 s).
        (DQN(DQNConfig(env=frozen_lake, num_workers=2, seed=0)), 0.9, 50_000),
        # Catch from 16x16x3 uint8 frames with the built-in CNN: mean return (catch +1, miss -1).
        # 18.4k / 22.5k / 18.4k steps (24-28 s).
        (PPO(PPOConfig(env=Catch, num_workers=2, seed=0, lr=1e-3)), 0.8, 100_000),
        # 9.2k / 10.2k / 10.2k steps (50-58 s).
        (DQN(DQNConfig(env=Catch, num_workers=2, seed=0, model=ModelConfig(hidden=(128,)))), 0.8, 50_000),
        # GoalGrid: a Dict of a 1x16x16 uint8 image and a position vector, MultiDiscrete([3, 3]) actions.
        # 63.5k / 71.7k / 75.8k steps (94-112 s).
        (PPO(PPOConfig(env=GoalGrid, num_workers=2, seed=0, lr=1e-3)), 0.8, 200_000),
    ],
    ids=["ppo_frozen_lake", "dqn_frozen_lake", "ppo_catch_pixels", "dqn_catch_pixels", "ppo_dict_multi_discrete"],
)
async def test_reaches_threshold_beyond_vectors(algo: Algorithm, threshold: float, budget: int) -> None:
    result = await _train_until(algo, threshold, budget)
    assert result["episode_return_mean"] >= threshold, result
    assert result["num_env_steps_sampled"] <= budget + 2048


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_model_defined_in_a_scripts_main_trains_on_workers_and_evaluates_elsewhere(tmp_path: Path) -> None:
    """examples/own_model.py defines its model in ``__main__``: it travels to the worker
    processes and into the checkpoint by value (a pickle), and a fresh process evaluates
    it when told to trust the file: loading a pickle runs code."""
    checkpoint = tmp_path / "own.ckpt"
    train = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "own_model.py"), "--stop-reward", "475",
         "--stop-timesteps", "200000", "--checkpoint", str(checkpoint)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr
    match = re.search(r"final return ([\d.]+) after (\d+) env steps", train.stdout)
    assert match, train.stdout
    assert float(match.group(1)) >= 475, train.stdout[-2000:]
    evaluate = [sys.executable, "-m", "asyncflow.cli", "evaluate", str(checkpoint), "--episodes", "5"]
    refused = subprocess.run(evaluate, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    message = "config field model.custom: a class with no import path (MyNet)"
    assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    assert "--trust-code" in refused.stderr
    out = subprocess.run([*evaluate, "--trust-code"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert float(re.search(r"return ([\d.]+)", out.stdout.splitlines()[-1]).group(1)) >= 400  # type: ignore[union-attr]
