"""Around a training run: logs, progress display, config files, the CLI's
checkpoint/resume, evaluation with video, and plots, all from real runs."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncflow import ConfigError
from asyncflow.algorithms import PPO, PPOConfig
from asyncflow.config_file import load_config_file
from asyncflow.experiment import Progress, Stop, make_run_dir, run_experiment

QUICK = ["--num-workers", "1", "--set", "num_envs_per_worker=2", "--set", "rollout_fragment_length=128",
         "--set", "train_batch_size=256"]  # fmt: skip


def _cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asyncflow.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


async def test_each_iteration_goes_to_csv_jsonl_and_tensorboard(tmp_path: Path) -> None:
    config = PPOConfig(num_workers=0, num_envs_per_worker=2, rollout_fragment_length=64, train_batch_size=128)
    run_dir = make_run_dir(tmp_path, "ppo", "CartPole-v1")
    last, reason = await run_experiment(PPO(config), Stop(timesteps=512), run_dir, tensorboard=True)
    assert reason == "num_env_steps_sampled >= 512" and last is not None
    lines = (run_dir / "result.jsonl").read_text().splitlines()
    results = [json.loads(line) for line in lines]  # strict JSON: NaN would not parse as null here
    assert [r["training_iteration"] for r in results] == [1, 2, 3, 4]
    assert {"learner", "timers", "counters", "episode_return_mean"} <= set(results[0])
    assert len((run_dir / "progress.csv").read_text().splitlines()) == 5
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    steps = [e.step for e in events.Scalars("episode_return_mean")]
    assert steps == [128, 256, 384, 512]
    assert "learner/policy_loss" in events.Tags()["scalars"]


def test_progress_is_a_live_bar_on_a_terminal_and_plain_lines_elsewhere() -> None:
    result = {"training_iteration": 3, "num_env_steps_sampled": 600, "num_env_steps_sampled_throughput_per_sec": 200.0,
              "episode_return_mean": 42.5, "time_total_s": 3.0}  # fmt: skip
    plain = io.StringIO()
    progress = Progress(Stop(timesteps=1000), plain)
    progress.update(result)
    assert plain.getvalue().startswith("iter    3  steps      600") and "return 42.5" in plain.getvalue()
    assert "2s left" in plain.getvalue()  # 400 steps at 200 steps/s
    live = io.StringIO()
    progress = Progress(Stop(timesteps=1000), live, live=True)
    progress.update(result)
    progress.close()
    assert "600/1.00k" in live.getvalue() and "return 42.5" in live.getvalue() and "\r" in live.getvalue()
    assert Stop(reward=100).seconds_left(result) is None
    assert Stop(seconds=10).seconds_left(result) == 7.0


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("ppo.yaml", "lr: 0.001\nhidden: [32, 32]\nnum_workers: 1\n"),
        ("ppo.toml", "lr = 0.001\nhidden = [32, 32]\nnum_workers = 1\n"),
        ("ppo.json", '{"lr": 0.001, "hidden": [32, 32], "num_workers": 1}'),
    ],
)
def test_config_files_in_three_formats(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    config = PPOConfig(**load_config_file(path))
    assert config.lr == 0.001 and config.hidden == (32, 32) and config.num_workers == 1


def test_config_file_errors_name_the_file_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("lrr: 0.1\n")
    out = _cli("train", "ppo", "--config", str(bad), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == f"asyncflow: error: {bad}: PPOConfig: unknown field 'lrr'; did you mean 'lr'?"
    wrong_type = tmp_path / "t.toml"
    wrong_type.write_text('lr = "fast"\n')
    out = _cli("train", "ppo", "--config", str(wrong_type), cwd=tmp_path)
    assert out.returncode == 2 and f"{wrong_type}: learner.lr: expected float" in out.stderr
    broken = tmp_path / "b.json"
    broken.write_text("{nope")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        load_config_file(broken)
    (tmp_path / "x.ini").write_text("[a]\n")
    with pytest.raises(ConfigError, match=r"use a \.yaml"):
        load_config_file(tmp_path / "x.ini")
    listed = tmp_path / "l.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config_file(listed)


@pytest.mark.timeout(240)
def test_cli_checkpoints_resumes_evaluates_and_plots(tmp_path: Path) -> None:
    config = tmp_path / "quick.yaml"
    config.write_text("num_envs_per_worker: 2\nrollout_fragment_length: 128\ntrain_batch_size: 256\n")
    out = _cli("train", "ppo", "--config", str(config), "--num-workers", "1", "--set", "lr=0.002",
               "--stop-timesteps", "1024", "--checkpoint-every", "2", "--logdir", "runs", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (run,) = (tmp_path / "runs").iterdir()
    assert json.loads((run / "params.json").read_text())["learner"]["lr"] == 0.002  # --set wins over the file
    saved = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert saved == ["checkpoint_000002.ckpt", "checkpoint_000004.ckpt"]

    out = _cli("train", "--resume", str(run), "--stop-timesteps", "2048", "--checkpoint-every", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in (run / "result.jsonl").read_text().splitlines()]
    assert [r["training_iteration"] for r in results] == list(range(1, 9))
    assert [r["num_env_steps_sampled"] for r in results] == [256 * i for i in range(1, 9)]
    assert (run / "checkpoints" / "checkpoint_000008.ckpt").exists()

    out = _cli("evaluate", str(run / "checkpoints" / "checkpoint_000008.ckpt"), "--episodes", "3",
               "--video", "ep.gif", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.splitlines()[0])
    assert summary["episodes"] == 3 and summary["return_mean"] > 0 and summary["return_std"] >= 0
    from PIL import Image

    with Image.open(tmp_path / "ep.gif") as gif:
        assert gif.size == (600, 400) and gif.n_frames > 5

    second = tmp_path / "runs2"
    out = _cli("train", "ppo", *QUICK, "--seed", "1", "--stop-timesteps", "1024", "--logdir", str(second), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    out = _cli("plot", str(run), *map(str, second.iterdir()), "-o", "curve.png", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    png = (tmp_path / "curve.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    out = _cli("plot", str(tmp_path / "nothing"), cwd=tmp_path)
    assert out.returncode == 2 and "is not a run folder" in out.stderr


def test_resume_needs_checkpoints_and_no_new_config(tmp_path: Path) -> None:
    out = _cli("train", "--resume", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2 and "has no checkpoints" in out.stderr
    out = _cli("train", "ppo", "--resume", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2 and "saved config" in out.stderr


@pytest.mark.timeout(240)
def test_resuming_after_kill_9_logs_each_iteration_once_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    import signal
    import time

    cmd = [sys.executable, "-m", "asyncflow.cli", "train", "ppo", *QUICK, "--stop-timesteps", "1000000",
           "--checkpoint-every", "1", "--logdir", "runs"]  # fmt: skip
    progress = None
    with subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          start_new_session=True) as proc:  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait (on the files, not a guess) until it has logged 4 iterations
            found = list((tmp_path / "runs").glob("*/progress.csv"))
            if found and len(found[0].read_text().splitlines()) >= 5:
                progress = found[0]
                break
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers, mid-run
        _, err = proc.communicate(timeout=30)
    assert progress is not None, err
    run = progress.parent
    # What a kill leaves behind at worst: a line cut short, and half a checkpoint.
    with open(run / "result.jsonl", "a") as f:
        f.write('{"training_iteration": 99, "num_env')
    (run / "checkpoints" / ".checkpoint_000099.ckpt.tmp-4242").write_bytes(b"half")
    out = _cli("train", "--resume", str(run), "--stop-timesteps", "3000", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    with open(progress, newline="") as f:
        iterations = [int(r["training_iteration"]) for r in csv.DictReader(f)]
    assert iterations == list(range(1, len(iterations) + 1)) and len(iterations) >= 12
    results = [json.loads(line) for line in (run / "result.jsonl").read_text().splitlines()]
    assert [r["training_iteration"] for r in results] == iterations
    assert [p.name for p in (run / "checkpoints").iterdir() if p.name.startswith(".")] == []


def _claim_run_dir(barrier: Any, logdir: str, out: Any) -> None:
    barrier.wait()  # every process calls make_run_dir at the same moment
    out.put(str(make_run_dir(Path(logdir), "ppo", "CartPole-v1")))


def test_runs_started_at_the_same_moment_get_their_own_folders(tmp_path: Path) -> None:
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    for _ in range(5):
        barrier, out = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_claim_run_dir, args=(barrier, str(tmp_path), out)) for _ in range(6)]
        for proc in procs:
            proc.start()
        claimed = [out.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
            assert proc.exitcode == 0
        assert len(set(claimed)) == 6
    assert len(list(tmp_path.iterdir())) == 30
