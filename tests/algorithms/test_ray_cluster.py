"""Two Ray nodes on this machine (``ray.cluster_utils.Cluster``): PPO's workers land on both,
and PPO solves CartPole-v1 through them. The run attaches by address, as on a real cluster,
and leaves the cluster running."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from asyncflow.algorithms import PPO, PPOConfig

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    nodes.add_node(num_cpus=1)
    try:
        nodes.wait_for_nodes()
        yield nodes
    finally:
        if ray.is_initialized():
            ray.shutdown()
        nodes.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_ppo_workers_spread_over_two_nodes_and_solve_cartpole(cluster: Any) -> None:
    config = PPOConfig(env="CartPole-v1", backend="ray", address=cluster.address, num_workers=2,
                       num_cpus_per_worker=1, seed=0)  # fmt: skip
    best = 0.0
    async with PPO(config) as algo:
        nodes = {w.node_id for w in algo.workers.workers}
        assert len(nodes) == 2  # one CPU per node, one CPU per worker: one worker on each
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert nodes == alive
        async for result in algo.train():
            best = max(best, result["episode_return_mean"])
            if best >= 475 or result["num_env_steps_sampled"] >= 200_000:
                break
    assert best >= 475, result
    # The runtime attached by address: it disconnected, and the cluster runs on.
    assert not ray.is_initialized()
    ray.init(address=cluster.address)
    assert sum(n["Alive"] for n in ray.nodes()) == 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_sweep_runs_its_trials_workers_on_the_cluster(cluster: Any, tmp_path: Any) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    before = _hosts(cluster.address)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-m", "asyncflow.cli", "sweep", "ppo", "--env", "CartPole-v1",
                          "--seeds", "0-1", "--backend", "ray", "--address", cluster.address, "--num-workers", "2",
                          "--set", "num_cpus_per_worker=0.5", "--stop-timesteps", "4000", "--cores", "2"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    # each trial takes one core here, for its driver: both ran at once, their workers on the cluster
    assert "sweep of 2 trials on 2 cores" in out.stdout
    [folder] = (tmp_path / "runs").iterdir()
    for seed in (0, 1):
        trial = json.loads((folder / f"seed={seed}" / "trial.json").read_text())
        assert trial["status"] == "finished"
        params = json.loads((tmp_path / trial["run_dir"] / "params.json").read_text())  # relative to the sweep's cwd
        assert params["rollouts"]["backend"] == "ray" and params["rollouts"]["address"] == cluster.address
    after = _hosts(cluster.address)
    assert len(after - before) == 4, (before, after)  # 2 trials x 2 rollout workers, each a Ray actor
    assert all(state == "DEAD" for _, state in after - before)  # ended with their trials


def _hosts(address: str) -> set[tuple[str, str]]:
    """The cluster's asyncflow actors (``Host``), as (id, state), from its GCS (Ray's state API
    needs the dashboard, which is off here)."""
    if ray.is_initialized():  # the test above stays connected
        ray.shutdown()
    ray.init(address=address)
    try:
        actors = ray._private.state.actors()
    finally:
        ray.shutdown()
    return {(actor_id, a["State"]) for actor_id, a in actors.items() if a["ActorClassName"] == "Host"}
