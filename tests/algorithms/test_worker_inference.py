"""``worker_inference``: which workers run their policy in numpy, and that a run whose
workers all do loads torch in no process but the driver."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from asyncflow import ConfigError
from asyncflow.algorithms import A3C, DQN, PPO, A3CConfig, DQNConfig, PPOConfig
from asyncflow.rl.models import ModelConfig
from asyncflow.rl.policies.numpy_policy import NumpyActorCriticPolicy


class OwnModel(nn.Module):
    def __init__(self, observation_space, action_space) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.pi, self.vf = nn.Linear(4, 2), nn.Linear(4, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.pi(obs), self.vf(obs).squeeze(-1)


def test_ppo_workers_run_the_built_in_mlp_in_numpy_unless_told_torch() -> None:
    assert PPO(PPOConfig()).numpy_net is not None
    assert PPO(PPOConfig(model=ModelConfig(hidden=(32,), activation="relu"))).numpy_net is not None
    assert PPO(PPOConfig(worker_inference="torch")).numpy_net is None
    assert PPO(PPOConfig(model=OwnModel)).numpy_net is None  # auto: torch for a model of one's own
    assert A3C(A3CConfig()).numpy_net is None  # its workers compute gradients
    assert DQN(DQNConfig()).numpy_net is None


@pytest.mark.parametrize(
    ("algo", "config", "message"),
    [
        (PPO, PPOConfig(model=OwnModel, worker_inference="numpy"), "numpy cannot run a model of your own"),
        (PPO, PPOConfig(env="ALE/Pong-v5", worker_inference="numpy"), "numpy cannot run the built-in model on Box"),
        (A3C, A3CConfig(worker_inference="numpy"), "A3C's workers, which compute gradients"),
        (DQN, DQNConfig(worker_inference="numpy"), "DQN's worker policy"),
    ],
    ids=["own model", "atari", "a3c", "dqn"],
)
def test_numpy_inference_asked_for_where_it_cannot_run_is_a_config_error(algo, config, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=message):
        algo(config)


def test_worker_inference_takes_only_its_three_values() -> None:
    with pytest.raises(ConfigError, match=r"rollouts\.inference: must be 'auto', 'torch' or 'numpy', got 'jax'"):
        PPOConfig(worker_inference="jax")


async def test_a_numpy_policy_worker_samples_the_same_batches_in_a_process_as_in_the_driver() -> None:
    """The policy travels to the worker process by value (its network and seed) and samples there."""
    config = PPOConfig(num_workers=1, num_envs_per_worker=2, rollout_fragment_length=16, seed=5)
    batches = []
    for c in (config, config.replace(num_workers=0)):
        async with PPO(c) as algo:
            policy = algo.worker_policy()(algo.observation_space, algo.action_space, seed=0, worker_index=1)
            assert isinstance(policy, NumpyActorCriticPolicy)
            batches.append(await algo.workers.workers[0].call("sample"))
    remote, local = batches
    for key in ("obs", "actions", "action_logp", "advantages"):
        assert (remote[key] == local[key]).all(), key


_RUN = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from asyncflow.algorithms import PPO, PPOConfig

    def descendants(root):
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    pass
        found, frontier = [], {root}
        while frontier:
            frontier = {pid for pid, parent in parents.items() if parent in frontier}
            found += frontier
        return found

    def async_cartpole():
        import gymnasium as gym
        from asyncflow.rl import AsyncEnvAdapter
        return AsyncEnvAdapter(gym.make("CartPole-v1"), delay_s=0.001)

    async def main():
        env = async_cartpole if sys.argv[2] == "async" else "CartPole-v1"
        config = PPOConfig(env=env, num_workers=2, num_envs_per_worker=2, rollout_fragment_length=16,
                           train_batch_size=64, minibatch_size=32, worker_inference=sys.argv[1])
        async with PPO(config) as algo:
            async for result in algo.train():
                break
            maps = {pid: "libtorch" in open(f"/proc/{pid}/maps").read() for pid in descendants(os.getpid())}
            workers = [w.pid for w in algo.workers.workers]
            print(json.dumps({"workers": [maps.pop(p) for p in workers], "others": list(maps.values()),
                              "steps": result["num_env_steps_sampled"]}))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("env", ["gymnasium", "async"])
@pytest.mark.parametrize(("inference", "torch_loaded"), [("auto", False), ("torch", True)])
def test_a_run_of_numpy_workers_loads_torch_only_in_the_driver(inference: str, torch_loaded: bool, env: str) -> None:
    """A fresh driver: ``import asyncflow.algorithms`` starts the fork server with torch, and
    PPO's config restarts it without (auto); the workers it forks never map libtorch, whether
    they step gymnasium envs or async envs (``AsyncRolloutWorker``)."""
    command = [sys.executable, "-c", _RUN, inference, env]
    out = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["steps"] >= 64
    assert seen["workers"] == [torch_loaded, torch_loaded]
    assert len(seen["others"]) >= 1  # the fork server (and the resource tracker, without torch)
    assert any(seen["others"]) is torch_loaded  # the fork server holds torch only when the workers need it
