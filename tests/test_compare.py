"""``asyncflow compare``: settings grouped from run folders, the interquartile mean with its
stratified bootstrap interval as rliable computes them, scores at equal env steps, bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asyncflow.aggregate import iqm, iqm_interval
from asyncflow.compare import compare
from asyncflow.errors import ConfigError
from asyncflow.experiment import RunLogger


def _run(folder: Path, *, env: str, seed: int, lr: float, returns: list[float], evaluation: bool = False) -> Path:
    """A run folder as ``asyncflow train`` writes it (its own logger), with these returns at
    1,000, 2,000, ... env steps."""
    folder.mkdir(parents=True)
    (folder / "params.json").write_text(f'{{"env": "{env}", "seed": {seed}, "learner": {{"lr": {lr}}}}}\n')
    logger = RunLogger(folder)
    for i, value in enumerate(returns, start=1):
        result = {"training_iteration": i, "num_env_steps_sampled": 1000 * i, "num_env_steps_trained": 1000 * i,
                  "episode_return_mean": value, "time_total_s": float(i)}  # fmt: skip
        if evaluation:
            result["evaluation"] = {"episode_return_mean": value + 1.0, "training_iteration": i}
        logger.log(result)
    logger.close()
    return folder


def _rliable_iqm(scores: np.ndarray) -> tuple[float, float, float]:
    library = pytest.importorskip("rliable.library")
    metrics = pytest.importorskip("rliable.metrics")
    point, interval = library.get_interval_estimates(
        {"x": scores}, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=50_000
    )
    return float(point["x"][0]), float(interval["x"][0, 0]), float(interval["x"][1, 0])


@pytest.mark.timeout(300)
def test_iqm_and_intervals_are_rliables_for_the_same_numbers(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    finals = {3e-4: rng.normal(300, 80, 10), 1e-3: rng.normal(420, 40, 10)}
    for lr, values in finals.items():
        for seed, final in enumerate(values):
            _run(tmp_path / f"lr{lr}" / f"seed{seed}", env="CartPole-v1", seed=seed, lr=lr,
                 returns=[10.0, final / 2, float(final)])  # fmt: skip
    comparison = compare([tmp_path])
    assert sorted(s.label for s in comparison.settings) == ["learner.lr=0.0003", "learner.lr=0.001"]
    for setting in comparison.settings:
        lr = 1e-3 if setting.label.endswith("0.001") else 3e-4
        scores = np.sort(finals[lr]).reshape(-1, 1)
        assert np.allclose(np.sort(setting.scores, axis=0), scores)
        point, low, high = _rliable_iqm(scores)
        assert setting.iqm.point == pytest.approx(point, rel=1e-12)
        spread = scores.max() - scores.min()
        assert abs(setting.iqm.low - low) < 0.02 * spread and abs(setting.iqm.high - high) < 0.02 * spread
    table = comparison.markdown()
    assert "| learner.lr=0.001 | CartPole-v1 | 10 |" in table and "95% CI" in table


def test_several_envs_are_tasks_resampled_separately() -> None:
    rng = np.random.default_rng(1)
    scores = np.stack([rng.normal(0, 1, 6), rng.normal(100, 1, 6)], axis=1)  # (runs, tasks)
    got = iqm_interval(scores, reps=50_000)
    point, low, high = _rliable_iqm(scores)
    assert got.point == pytest.approx(point) and got.point == pytest.approx(float(iqm(scores)))
    # a stratified resample keeps 6 runs of each task: the IQM stays near the middle of the two
    assert abs(got.low - low) < 1.0 and abs(got.high - high) < 1.0


def test_scores_at_equal_steps_best_and_evaluation(tmp_path: Path) -> None:
    for seed in range(4):
        _run(tmp_path / f"s{seed}", env="CartPole-v1", seed=seed, lr=1e-3, returns=[10, 50 + seed, 20], evaluation=True)
    at = compare([tmp_path], at_steps=2500, reps=1000).settings[0]
    assert sorted(at.scores[:, 0]) == [51, 52, 53, 54]  # the evaluation return (+1) at 2,000 steps
    best = compare([tmp_path], score="best", reps=1000).settings[0]
    assert sorted(best.scores[:, 0]) == [51, 52, 53, 54]
    final = compare([tmp_path], reps=1000)
    assert final.evaluation and list(final.settings[0].scores[:, 0]) == [21, 21, 21, 21]


def test_the_command_prints_the_table_and_draws_the_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    for lr in (1e-3, 3e-3):
        for seed in range(3):
            _run(tmp_path / "sweep" / f"lr{lr}-s{seed}", env="CartPole-v1", seed=seed, lr=lr,
                 returns=[10, 100 * lr * 1000 + seed, 200])  # fmt: skip
    command = ["compare", str(tmp_path / "sweep"), "-o", str(tmp_path / "c.png"), "--reps", "2000"]
    out = subprocess.run([sys.executable, "-m", "asyncflow.cli", *command], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "| learner.lr=0.001 | CartPole-v1 | 3 | 200.00 |" in out.stdout
    assert (tmp_path / "c.png").stat().st_size > 10_000


def test_bad_input_is_one_line_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        compare([tmp_path / "nowhere"])
    with pytest.raises(ConfigError, match="no run folder"):
        compare([tmp_path])
    _run(tmp_path / "a", env="CartPole-v1", seed=0, lr=1e-3, returns=[1, 2])
    _run(tmp_path / "b", env="CartPole-v1", seed=1, lr=1e-3, returns=[1, 2])
    _run(tmp_path / "c", env="Acrobot-v1", seed=0, lr=1e-3, returns=[1, 2])
    with pytest.raises(ConfigError, match="different number of runs per env"):
        compare([tmp_path])
    with pytest.raises(ConfigError, match="no point by 500 env steps"):
        compare([tmp_path / "a"], at_steps=500)
    with pytest.raises(ConfigError, match="--score"):
        compare([tmp_path / "a"], score="median")
    out = subprocess.run([sys.executable, "-m", "asyncflow.cli", "compare", str(tmp_path / "nowhere")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode != 0 and out.stderr.strip().count("\n") == 0 and "does not exist" in out.stderr
