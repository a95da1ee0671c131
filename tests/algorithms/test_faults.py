"""The fault matrix: a worker killed with SIGKILL mid-run is replaced and the run
goes on, for every kind of plan (bulk-sync, asynchronous, replay, replay actors);
for Ape-X a replay shard too. And a soak: kills every few seconds for minutes,
with nothing left behind and resources where they started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncflow.actors import ActorHandle
from asyncflow.algorithms import ALGORITHMS, Algorithm

from ..conftest import actor_children, our_segments

ROOT = Path(__file__).resolve().parents[2]

FAST: dict[str, dict[str, Any]] = {
    "ppo": {"train_batch_size": 512, "num_envs_per_worker": 2},
    "impala": {"timesteps_per_iteration": 512},
    "dqn": {"learning_starts": 64, "timesteps_per_iteration": 256},
    "apex": {"learning_starts": 64, "timesteps_per_iteration": 256},
    "sac": {"learning_starts": 64, "timesteps_per_iteration": 64},
}


async def _until(algo: Algorithm, done: Any) -> dict[str, Any]:
    async for result in algo.train():
        if done(result):
            return result
    raise AssertionError("the plan ended")


def _kill(actor: ActorHandle) -> int:
    assert actor.pid is not None
    os.kill(actor.pid, signal.SIGKILL)
    return actor.pid


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("name", "target"), [(n, "worker") for n in FAST] + [("apex", "replay shard")])
async def test_a_killed_actor_is_replaced_and_the_run_goes_on(name: str, target: str) -> None:
    cls = ALGORITHMS[name]
    algo = cls(cls.config_class(num_workers=2, **FAST[name]))
    async with algo:
        first = await _until(algo, lambda r: r["num_env_steps_trained"] > 0)
        victim = algo.resources.workers[0] if target == "replay shard" else algo.workers.workers[0]
        old_pid = _kill(victim)
        sampled, trained = first["num_env_steps_sampled"], first["num_env_steps_trained"]
        # A result counts the restart once the new process has its weights (its first call);
        # the other worker's samples can make results before that, the more so when the new
        # process imports torch itself (a fork server without torch, after a numpy run).
        counted = (lambda r: r["num_workers_restarted"] >= 1) if target == "worker" else (lambda r: True)
        last = await _until(
            algo,
            lambda r: r["num_env_steps_sampled"] >= sampled + 2_000 and r["num_env_steps_trained"] > trained
            and victim.restarts == 1 and counted(r),
        )  # fmt: skip
        assert victim.pid != old_pid and victim.alive
        if target == "worker":
            assert last["num_workers_restarted"] == 1
    assert actor_children() == [] and our_segments(os.getpid()) == []


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_two_minute_soak_with_kills_and_freezes_leaves_everything_where_it_started(tmp_path: Path) -> None:
    """benchmarks/soak.py, short: PPO and Ape-X for 2 minutes, a SIGKILL or a SIGSTOP every 20 s (the
    benchmark's own runs are longer)."""
    out = tmp_path / "soak.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--minutes", "2", "--kill-every",
                          "20", "--faults", "kill,freeze", "--deadline", "5", "--sample-every", "5", "--json",
                          str(out)], capture_output=True, text=True, timeout=360,
                         env={**os.environ, "ASYNCFLOW_BENCH_SAVE": "0"})  # not a saved run  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(out.read_text())
    faults = seen["kills"]
    assert len(faults) >= 3, faults
    end = seen["samples"][-1]["t"]
    freezes = [f for f in faults if f["fault"] == "freeze"]
    for freeze in freezes:  # each found by a missed deadline (5 s), unless it came at the very end
        assert "detected_s" in freeze or freeze["t"] > end - 15, freeze
    restarts = seen["restarts"]
    replaced = sum(1 for f in faults if f["fault"] == "kill" or "detected_s" in f)
    assert restarts["ppo"] + restarts["apex"] + restarts["apex_shards"] >= replaced
    steps_after_last_fault = {name: n for t, name, n in seen["steps"] if t > faults[-1]["t"]}
    assert set(steps_after_last_fault) == {"ppo", "apex"}  # both trained on after every fault
    samples = seen["samples"]
    start, end = samples[2], seen["inside_end"]  # start: every actor up and warm
    for key in ("segments", "processes", "threads"):
        assert end[key] == start[key], (key, start[key], end[key])
    assert abs(end["fds"] - start["fds"]) <= 2, (start["fds"], end["fds"])  # a pipe in flight at a sample
    before, after = seen["before"], seen["after"]
    assert after["segments"] == before["segments"] == 0
    assert after["processes"] <= before["processes"] + 2  # this driver, and the fork server it keeps
