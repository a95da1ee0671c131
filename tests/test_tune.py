"""``asyncflow tune``: an Optuna study whose pruner stops bad trials early (asserted from the
study), which goes on after a kill without running an ended trial again and leaves no trial
running, whose best config ``--config`` takes, and bad input refused before any trial starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from asyncflow.algorithms import PPOConfig
from asyncflow.config_file import load_config_file
from asyncflow.errors import ConfigError
from asyncflow.search_space import parse_space
from tests.conftest import alive, children, our_segments

ROOT = Path(__file__).resolve().parents[1]
PPO_CARTPOLE = ["ppo", "--env", "CartPole-v1", "--num-workers", "0"]  # a trial samples in its driver: one core
Pruned, Complete, Fail = optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL


def _tune(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "asyncflow.cli", "tune", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def _study(folder: Path) -> optuna.Study:
    return optuna.load_study(study_name="asyncflow", storage=f"sqlite:///{folder / 'study.db'}")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_median_pruner_stops_bad_trials_early_and_the_best_config_trains(tmp_path: Path) -> None:
    # one core: trials run one after another, so the trials each report is compared with are known
    proc = _tune(*PPO_CARTPOLE, "--space", "lr=loguniform(1e-6,1e-2)", "--trials", "8", "--stop-timesteps", "20000",
                 "--cores", "1", "--prune", "median", cwd=tmp_path)  # fmt: skip
    out, _ = proc.communicate(timeout=280)
    assert proc.returncode == 0, out
    [folder] = (tmp_path / "runs").iterdir()
    trials = _study(folder).trials
    assert len(trials) == 8
    pruned = [t for t in trials if t.state == Pruned]
    complete = [t for t in trials if t.state == Complete]
    assert pruned and len(pruned) + len(complete) == 8, [t.state for t in trials]
    for t in complete:  # each ran its whole budget: 10 reports, the last at 20,000 env steps or more
        assert t.last_step == 10 and t.user_attrs["env_steps"] >= 20_000
    for t in pruned:  # stopped at a report before its last, behind the median of the trials that ended before it
        assert t.last_step is not None and t.last_step < 10
        assert t.number >= 3  # the pruner waits for 3 ended trials
    best = max(complete, key=lambda t: t.value or 0.0)
    assert all(t.value is not None and t.value < best.value for t in pruned)
    fields = load_config_file(folder / "best.yaml")
    assert fields == {"env": "CartPole-v1", "num_workers": 0, "lr": best.params["lr"]}
    assert PPOConfig(**fields).learner.lr == best.params["lr"]
    assert f"| {best.number} | " in (folder / "summary.md").read_text()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_killed_study_resumes_and_no_trial_outlives_it(tmp_path: Path) -> None:
    args = [*PPO_CARTPOLE, "--space", "lr=loguniform(1e-4,1e-2)", "--trials", "4", "--stop-timesteps", "8000",
            "--cores", "1", "--prune", "none"]  # fmt: skip
    proc = _tune(*args, cwd=tmp_path)
    deadline = time.monotonic() + 200
    trial_pids: list[int] = []
    while not trial_pids and time.monotonic() < deadline:  # two trials ended, the third running
        if len(list((tmp_path / "runs").glob("*/trial_*/trial.json"))) >= 2:
            trial_pids = [pid for pid in children(proc.pid) if alive(pid)]
        time.sleep(0.05)
    assert trial_pids, "the third trial should be running"
    proc.send_signal(signal.SIGKILL)  # no handler runs: the trial learns of it from the kernel
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 60
    while any(alive(pid) for pid in trial_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in trial_pids if alive(pid)], "a trial outlived its killed study"
    assert all(our_segments(pid) == [] for pid in trial_pids)
    [folder] = (tmp_path / "runs").iterdir()
    before = {t.number: t for t in _study(folder).trials}
    ended = {n: t for n, t in before.items() if t.state == Complete}
    cut = [t for t in before.values() if t.state == optuna.trial.TrialState.RUNNING]
    assert len(ended) >= 2 and len(cut) == 1, before
    resumed = subprocess.run([sys.executable, "-m", "asyncflow.cli", "tune", "--resume", str(folder)], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _study(folder).trials
    for number, t in ended.items():  # kept as they were, not run again
        assert after[number].value == t.value and after[number].params == t.params
    interrupted = [t for t in after if t.user_attrs.get("interrupted")]
    assert [t.number for t in interrupted] == [cut[0].number] and interrupted[0].state == Fail
    counted = [t for t in after if not t.user_attrs.get("interrupted")]
    assert len(counted) == 4 and all(t.state == Complete for t in counted)
    assert any(t.params == cut[0].params for t in counted if t.number > cut[0].number)  # run again, same values
    assert not (folder / f"trial_{cut[0].number:04d}").exists()
    assert (folder / "best.yaml").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--space", "lr=loguniform(1e-4"], "--space: expected field=kind(...)"),
        (["--space", "lr=gaussian(0,1)"], "unknown kind 'gaussian'"),
        (["--space", "lr=uniform(a,b)"], "does not parse"),
        (["--space", "lr=loguniform(0,1)"], "needs a positive low bound"),
        (["--space", "lr=uniform(1,1)"], "is empty"),
        (["--space", "no_such_field=uniform(0,1)"], "no_such_field"),
        (["--space", "lr=uniform(-1,1)"], "learner.lr: must be > 0"),
        (["--space", "lr=uniform(1e-4,1e-3)", "--metric", "no_such_metric"], "no run reports 'no_such_metric'"),
        (["--space", "lr=uniform(1e-4,1e-3)", "--metric", "evaluation/episode_return_mean"], "evaluation_interval"),
        ([], "give what to search with --space"),
        (["--space", "lr=uniform(1e-4,1e-3)", "--trials", "0"], "--trials must be >= 1"),
    ],
)
def test_bad_input_is_one_line_before_any_trial_starts(tmp_path: Path, args: list[str], message: str) -> None:
    proc = _tune(*PPO_CARTPOLE, "--stop-timesteps", "1000", *args, cwd=tmp_path)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out
    assert message in out and out.strip().count("\n") == 0, out
    assert not (tmp_path / "runs").exists()


def test_a_study_needs_a_budget_per_trial(tmp_path: Path) -> None:
    proc = _tune(*PPO_CARTPOLE, "--space", "lr=uniform(1e-4,1e-3)", cwd=tmp_path)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "--stop-timesteps" in out, out


def test_search_spaces_parse_and_draw_inside_their_ranges() -> None:
    import numpy as np

    dims = parse_space(["lr=loguniform(1e-4,1e-2)", "n=int(3,5)", "b=logint(32,1024)", "h=choice([64],[64,64])"])
    rng = np.random.default_rng(0)
    draws = [{d.name: d.sample(rng) for d in dims} for _ in range(300)]
    assert all(1e-4 <= d["lr"] <= 1e-2 for d in draws)
    assert {d["n"] for d in draws} == {3, 4, 5}
    assert all(32 <= d["b"] <= 1024 and isinstance(d["b"], int) for d in draws)
    assert {tuple(d["h"]) for d in draws} == {(64,), (64, 64)}
    assert str(dims[0]) == "lr=loguniform(0.0001,0.01)"
    with pytest.raises(ConfigError, match="given twice"):
        parse_space(["lr=uniform(0,1)", "lr=uniform(0,2)"])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    assert dims[3].suggest(trial) in ([64], [64, 64])  # a choice that is not a plain value goes through its repr
