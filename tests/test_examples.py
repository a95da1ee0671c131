"""The examples run as written (with small budgets), and the embedding example
answers HTTP requests promptly while it trains."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.timeout(180)
def test_the_status_endpoint_answers_promptly_during_training() -> None:
    args = ["--port", "0", "--stop-timesteps", "40000", "--linger", "3"]
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "embed_in_app.py"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    with proc:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else url
        answers, latencies = [], []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            start = time.perf_counter()
            with urllib.request.urlopen(url, timeout=5) as response:
                answers.append(json.loads(response.read()))
            latencies.append(time.perf_counter() - start)
            if answers[-1]["state"] == "done":
                break
            time.sleep(0.2)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    training = [a for a in answers if a["state"] == "training"]
    assert len(training) >= 5  # queried again and again while it trained
    steps = [a["env_steps"] for a in training]
    assert steps == sorted(steps) and steps[-1] > steps[0]  # the answers follow the training
    assert answers[-1]["state"] == "done" and answers[-1]["env_steps"] >= 40000
    # Promptly: a loop blocked by training would hold requests for whole iterations.
    assert max(latencies) < 1.0, latencies


def _example(name: str, *args: str, cwd: Path) -> str:
    out = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=cwd, capture_output=True, text=True,
                         timeout=200)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.timeout(240)
def test_the_newcomer_examples_run_as_written(tmp_path: Path) -> None:
    out = _example("custom_env.py", "--stop-timesteps", "4096", cwd=tmp_path)
    assert out.count("iter") == 2
    out = _example("custom_plan.py", "--iterations", "2", cwd=tmp_path)
    assert "iter   2" in out and "kl" in out
    out = _example("multi_agent.py", "--stop-timesteps", "4096", cwd=tmp_path)
    assert "ppo_policy" in out and "dqn_policy" in out
    out = _example("sweep.py", "--stop-timesteps", "2048", "--lrs", "0.003", "--logdir", "sweep", cwd=tmp_path)
    assert out.count("seed") == 3
    png = (tmp_path / "sweep" / "sweep.png").read_bytes()
    assert png[:4] == b"\x89PNG" and len(png) > 10_000


@pytest.mark.timeout(180)
def test_the_remote_env_example_trains_over_tcp_and_closes_every_connection(tmp_path: Path) -> None:
    out = _example("remote_env.py", "--stop-timesteps", "4096", "--envs-per-worker", "8", cwd=tmp_path)
    assert out.count("iter") == 2
    assert out.rstrip().endswith("over 16 connections, 0 left open"), out
