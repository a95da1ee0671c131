"""MLflow and Weights & Biases beside the run folder: the real libraries write their local stores
(MLflow's SQLite store, W&B's offline run files), and what they hold is what progress.csv holds;
a resumed run goes on in the same tracker runs; a missing package is one line before any start."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _train(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}  # offline by default
    return subprocess.run([sys.executable, "-m", "asyncflow.cli", "train", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)  # fmt: skip


def _progress(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "progress.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.timeout(300)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # SQLAlchemy's, inside MLflow's client
def test_mlflow_and_wandb_hold_what_the_run_folder_holds_and_resume_their_runs(tmp_path: Path) -> None:
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    first = _train("ppo", "--env", "CartPole-v1", "--num-workers", "0", "--stop-timesteps", "4000",
                   "--checkpoint-every", "1", "--mlflow", "--wandb", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    [run_dir] = (tmp_path / "runs").iterdir()
    ids = json.loads((run_dir / "trackers.json").read_text())
    resumed = _train("--resume", str(run_dir), "--stop-timesteps", "8000", "--mlflow", "--wandb", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "trackers.json").read_text()) == ids  # the same tracker runs, gone on
    rows = _progress(run_dir)
    assert len(rows) == 4

    client = mlflow.tracking.MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    history = client.get_metric_history(ids["mlflow"], "episode_return_mean")
    assert [(m.step, m.value) for m in history] == [
        (int(r["num_env_steps_sampled"]), float(r["episode_return_mean"])) for r in rows
    ]
    assert client.get_metric_history(ids["mlflow"], "learner/kl")  # nested numbers too
    params = client.get_run(ids["mlflow"]).data.params
    assert float(params["learner.lr"]) == json.loads((run_dir / "params.json").read_text())["learner"]["lr"]

    logs = sorted((run_dir / "wandb").glob(f"offline-run-*-{ids['wandb']}/run-{ids['wandb']}.wandb"))
    assert len(logs) == 2  # the first run and its resumption, one W&B run id
    written = b"".join(p.read_bytes() for p in logs)
    assert b"episode_return_mean" in written and b"learner.lr" in written
    for row in rows:  # every value, as W&B's record log encodes it (JSON)
        assert json.dumps(float(row["episode_return_mean"])).encode() in written


def test_a_missing_tracker_package_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['wandb'] = None; from asyncflow.cli import main; "
            "sys.exit(main(['train', 'ppo', '--num-workers', '0', '--wandb', '--stop-timesteps', '100']))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--wandb needs the wandb package (pip install 'asyncflow[wandb]')" in out.stderr
    assert not (tmp_path / "runs").exists()
