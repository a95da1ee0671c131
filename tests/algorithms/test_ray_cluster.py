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
