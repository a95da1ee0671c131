"""Evaluation during training (``evaluation_interval``): separate worker actors play whole
episodes with the learner's weights while training goes on; results, logs, plots and the
stop condition see them; training itself is unchanged by them."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncflow import ConfigError
from asyncflow.algorithms import IMPALA, PPO, IMPALAConfig, PPOConfig
from asyncflow.experiment import Stop, make_run_dir, run_experiment
from asyncflow.plot import load_run, plot_runs

SMALL = {"num_workers": 2, "num_envs_per_worker": 2, "rollout_fragment_length": 64, "train_batch_size": 256}


async def _results(algo: Any, n: int) -> list[dict[str, Any]]:
    out = []
    async with algo:
        async for result in algo.train():
            out.append(result)
            if len(out) == n:
                break
        if algo.evaluation_workers is not None:
            out.append(await algo.evaluate())  # one more, waited for
    return out


async def test_evaluations_run_on_their_own_workers_and_leave_training_unchanged() -> None:
    plain = await _results(PPO(PPOConfig(**SMALL, seed=3)), 6)
    algo = PPO(PPOConfig(**SMALL, seed=3, evaluation_interval=2, evaluation_episodes=5, evaluation_num_workers=2))
    evaluated = await _results(algo, 6)
    final = evaluated.pop()
    # Training saw the same steps and episodes: evaluation took nothing from it.
    for a, b in zip(plain, evaluated, strict=True):
        assert a["episode_return_mean"] == b["episode_return_mean"]
        assert a["num_env_steps_sampled"] == b["num_env_steps_sampled"]
    reported = [r["evaluation"] for r in evaluated if "evaluation" in r]
    assert reported, "no evaluation finished within six iterations"
    for e in reported:
        assert e["episodes"] == 5 and e["training_iteration"] % 2 == 0
        assert e["episode_return_min"] <= e["episode_return_mean"] <= e["episode_return_max"]
        assert e["episode_len_mean"] == e["episode_return_mean"]  # CartPole: one point per step
    assert final["training_iteration"] == 6 and final["episodes"] == 5
    assert algo.evaluation_workers is not None and len(algo.evaluation_workers) == 2
    training_pids = {w.pid for w in algo.workers.workers}
    assert not training_pids & {w.pid for w in algo.evaluation_workers.workers}


async def test_the_same_weights_give_the_same_greedy_evaluation() -> None:
    config = PPOConfig(**SMALL, evaluation_interval=100, evaluation_episodes=4, evaluation_num_workers=2)
    async with PPO(config) as algo:
        async for _ in algo.train():
            break
        first, second = await algo.evaluate(), await algo.evaluate()
    assert first == second  # greedy actions on the same seeds: evaluations differ by their weights only


@pytest.mark.timeout(120)
async def test_evaluation_does_not_block_an_async_plan() -> None:
    # Long evaluations (300 episodes each): IMPALA keeps training while one runs.
    config = IMPALAConfig(num_workers=2, num_envs_per_worker=2, timesteps_per_iteration=256,
                          evaluation_interval=1, evaluation_episodes=300)  # fmt: skip
    while_evaluating = 0
    async with IMPALA(config) as algo:
        async for result in algo.train():
            running = algo._evaluating is not None and not algo._evaluating.done()
            while_evaluating += running and result["training_iteration"] > 1
            if "evaluation" in result:
                break
    assert while_evaluating >= 2, while_evaluating


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_ppo_stops_on_its_greedy_evaluation_return(tmp_path: Path) -> None:
    config = PPOConfig(num_workers=2, seed=0, evaluation_interval=1, evaluation_episodes=10)
    run_dir = make_run_dir(tmp_path, "ppo", "CartPole-v1")
    last, reason = await run_experiment(PPO(config), Stop(reward=475, timesteps=150_000, on_evaluation=True),
                                        run_dir, tensorboard=True)  # fmt: skip
    assert last is not None and reason.startswith("evaluation/episode_return_mean"), reason
    assert last["evaluation"]["episode_return_mean"] >= 475
    print(f"greedy evaluation reached 475 after {last['num_env_steps_sampled']} steps")
    with open(run_dir / "progress.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["evaluation/episode_return_mean"] == str(last["evaluation"]["episode_return_mean"])
    assert rows[0]["evaluation/episode_return_mean"] == ""  # none had finished yet
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert "evaluation/episode_return_mean" in events.Tags()["scalars"]
    run = load_run(run_dir)
    assert len(run.evaluations) >= 1 and run.evaluations[-1, 2] >= 475
    assert plot_runs([run_dir], tmp_path / "curve.png").stat().st_size > 0


def test_the_cli_stops_on_evaluation_only_with_an_interval(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "asyncflow.cli", "train", "ppo", "--num-workers", "1", "--logdir", str(tmp_path),
            "--stop-reward", "1", "--stop-on-evaluation"]  # fmt: skip
    missing = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert missing.returncode != 0 and "--stop-on-evaluation needs evaluation_interval" in missing.stderr
    ok = subprocess.run([*base, "--set", "evaluation_interval=1", "--set", "evaluation_episodes=2",
                         "--set", "train_batch_size=256"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "evaluation/episode_return_mean" in ok.stdout + ok.stderr


def test_evaluation_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="evaluation_episodes"):
        PPOConfig(evaluation_episodes=0)
    with pytest.raises(ConfigError, match="evaluation_interval"):
        PPOConfig(evaluation_interval=0)
