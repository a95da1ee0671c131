"""``asyncflow sweep``: trials packed onto the cores (checked from the processes), nothing left
behind, a failing trial reported while the others go on, an interrupted sweep resumed without
running a finished trial again, and bad input refused before any trial starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asyncflow.compare import compare
from tests.conftest import alive, children, our_segments

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--num-workers", "0", "--stop-timesteps", "3000"]  # a trial samples in its driver: one core


def _sweep(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "asyncflow.cli", "sweep", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def _trials(folder: Path) -> dict[str, dict[str, object]]:
    return {p.parent.name: json.loads(p.read_text()) for p in folder.glob("*/trial.json")}


@pytest.mark.timeout(300)
def test_trials_run_in_parallel_on_the_cores_and_leave_nothing_behind(tmp_path: Path) -> None:
    proc = _sweep("ppo", "--env", "CartPole-v1", "--seeds", "0-1", "--grid", "lr=1e-3,3e-3", *SMALL, "--cores", "2",
                  cwd=tmp_path)  # fmt: skip
    most, seen = 0, set()
    while proc.poll() is None:
        trials = [pid for pid in children(proc.pid) if alive(pid)]
        seen.update(trials)
        most = max(most, len(trials))
        time.sleep(0.02)
    out, _ = proc.communicate()
    assert proc.returncode == 0, out
    assert most == 2, f"at most {most} trials ran at once on 2 cores"  # packed, never more
    assert len(seen) == 4
    assert not [pid for pid in seen if alive(pid)]
    assert all(our_segments(pid) == [] for pid in seen)
    [folder] = (tmp_path / "runs").iterdir()
    assert {name: t["status"] for name, t in _trials(folder).items()} == {
        "lr=0.001_seed=0": "finished", "lr=0.001_seed=1": "finished",
        "lr=0.003_seed=0": "finished", "lr=0.003_seed=1": "finished",
    }  # fmt: skip
    comparison = compare([folder], reps=1000)
    assert sorted((s.label, s.num_runs) for s in comparison.settings) == [
        ("learner.lr=0.001", 2),
        ("learner.lr=0.003", 2),
    ]
    assert "| lr=0.003_seed=1 | finished |" in (folder / "summary.md").read_text()


@pytest.mark.timeout(300)
def test_a_failing_trial_is_reported_and_the_others_go_on(tmp_path: Path) -> None:
    proc = _sweep("ppo", "--grid", "env=CartPole-v1,tests.toy_envs:breaks_after_200", *SMALL, cwd=tmp_path)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 1, out
    [folder] = (tmp_path / "runs").iterdir()
    trials = _trials(folder)
    assert trials["env=CartPole-v1_seed=0"]["status"] == "finished"
    broken = trials["env=tests.toy_envs-breaks_after_200_seed=0"]
    assert broken["status"] == "failed" and broken["returncode"] != 0
    assert "broken on purpose" in (folder / "env=tests.toy_envs-breaks_after_200_seed=0" / "trial.log").read_text()
    assert "1 of 2 trials finished" in out


@pytest.mark.timeout(300)
def test_an_interrupted_sweep_resumes_and_runs_no_finished_trial_again(tmp_path: Path) -> None:
    proc = _sweep("ppo", "--env", "CartPole-v1", "--seeds", "0-2", *SMALL, "--cores", "1", cwd=tmp_path)
    deadline = time.monotonic() + 200
    while not list((tmp_path / "runs").glob("*/*/trial.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # Ctrl-C while the second trial runs
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    [folder] = (tmp_path / "runs").iterdir()
    first = _trials(folder)
    assert first["seed=0"]["status"] == "finished"
    assert all(t["status"] == "failed" for name, t in first.items() if name != "seed=0"), first  # run again
    resumed = subprocess.run([sys.executable, "-m", "asyncflow.cli", "sweep", "--resume", str(folder)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=240)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _trials(folder)
    assert after["seed=0"] == first["seed=0"]  # not run again
    assert {name: t["status"] for name, t in after.items()} == {f"seed={s}": "finished" for s in range(3)}
    assert "seed=0" not in resumed.stdout.split("trials on", 1)[1].split("| trial |")[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ppo", "--seeds", "3-1"], "--seeds: the range 3-1 is empty"),
        (["ppo", "--grid", "lr"], "--grid: expected field=value"),
        (["ppo", "--grid", "no_such_field=1,2"], "no_such_field"),
        (["ppo", "--grid", "lr=-1,1e-3"], "learner.lr: must be > 0"),
        (["ppo", "--cores", "0"], "--cores must be >= 1"),
        (["ppo", "--env", "CartPole-v1", "--grid", "env=Acrobot-v1"], "not both"),
    ],
)
def test_bad_input_is_one_line_before_any_trial_starts(tmp_path: Path, args: list[str], message: str) -> None:
    proc = _sweep(*args, cwd=tmp_path)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out
    assert message in out and out.strip().count("\n") == 0, out
    assert not (tmp_path / "runs").exists()
