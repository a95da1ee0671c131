"""Multi-agent environments, the PettingZoo adapter and the multi-agent worker."""

from __future__ import annotations

import asyncio
import functools
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import asyncflow
from asyncflow import flow
from asyncflow.rl.data.sample_batch import ADVANTAGES, DISCOUNTS, EPS_ID, NEXT_OBS, OBS, MultiAgentBatch
from asyncflow.rl.envs.multi_agent import ALL, MultiAgentCartPole, PettingZooEnv, make_multi_agent_env
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy
from asyncflow.rl.policies.epsilon_greedy import EpsilonGreedyPolicy
from asyncflow.rl.sampling.multi_agent_worker import MappedPolicy, MultiAgentRolloutWorker
from asyncflow.rl.sampling.worker_set import WorkerSet

pettingzoo = pytest.importorskip("pettingzoo")


class TwoCartPoles(pettingzoo.ParallelEnv):  # type: ignore[misc,name-defined]
    """A real PettingZoo ParallelEnv: two CartPoles, agents leave when they finish."""

    metadata = {"name": "two_cartpoles_v0"}  # noqa: RUF012

    def __init__(self) -> None:
        self.possible_agents = ["left", "right"]
        self._envs = {a: gym.make("CartPole-v1") for a in self.possible_agents}
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> gym.Space[Any]:
        return self._envs[agent].observation_space

    def action_space(self, agent: str) -> gym.Space[Any]:
        return self._envs[agent].action_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:  # type: ignore[type-arg]
        self.agents = list(self.possible_agents)
        obs = {a: self._envs[a].reset(seed=None if seed is None else seed + i)[0] for i, a in enumerate(self.agents)}
        return obs, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:  # type: ignore[type-arg]
        obs, rew, term, trunc, info = {}, {}, {}, {}, {}
        for a in self.agents:
            obs[a], rew[a], term[a], trunc[a], info[a] = self._envs[a].step(actions[a])
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, info


def _specs(n_step: int = 1) -> dict[str, MappedPolicy]:
    return {
        "ppo": MappedPolicy(functools.partial(ActorCriticPolicy, hidden=(16,)), "gae"),
        "dqn": MappedPolicy(functools.partial(EpsilonGreedyPolicy, hidden=(16,), epsilon=0.5), "transitions", n_step),
    }


def by_parity(agent: str) -> str:
    return "ppo" if agent.endswith(("0", "left")) else "dqn"


def test_multi_agent_cartpole_ends_when_every_agent_has() -> None:
    env = MultiAgentCartPole(num_agents=3)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"agent_0", "agent_1", "agent_2"}
    returns = dict.fromkeys(obs, 0.0)
    alive = set(obs)
    for _ in range(2000):
        obs, rew, term, trunc, _ = env.step({a: 0 for a in alive})  # always push left: each falls soon
        for a, r in rew.items():
            returns[a] += r
        finished = {a for a in alive if term[a] or trunc[a]}
        alive -= finished
        assert term[ALL] == (not alive)
        if term[ALL]:
            break
    assert not alive and all(8 <= r <= 20 for r in returns.values())
    with pytest.raises(ValueError, match="finished"):
        env.step({"agent_0": 0})


def test_the_pettingzoo_adapter_passes_pettingzoo_s_api_test_and_wraps() -> None:
    with warnings.catch_warnings():  # pettingzoo.test imports its classic envs, which warn about their own API
        warnings.simplefilter("ignore", DeprecationWarning)
        from pettingzoo.test import parallel_api_test

    parallel_api_test(TwoCartPoles(), num_cycles=200)
    env = make_multi_agent_env(TwoCartPoles)
    assert isinstance(env, PettingZooEnv) and env.possible_agents == ["left", "right"]
    obs, _ = env.reset(seed=1)
    assert set(obs) == {"left", "right"}
    done = False
    while not done:
        _, _, term, trunc, _ = env.step({a: 1 for a in env.env.agents})
        done = term[ALL] or trunc[ALL]
    assert not env.env.agents
    with pytest.raises(asyncflow.ConfigError, match="ParallelEnv"):
        PettingZooEnv(object())


def test_the_multi_agent_worker_postprocesses_each_policy_its_own_way() -> None:
    worker = MultiAgentRolloutWorker(
        TwoCartPoles, policies=_specs(n_step=3), policy_mapping_fn=by_parity, rollout_fragment_length=300, seed=0
    )
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch) and batch.env_steps == 300
    ppo, dqn = batch.policy_batches["ppo"], batch.policy_batches["dqn"]
    assert ADVANTAGES in ppo and NEXT_OBS not in ppo
    assert NEXT_OBS in dqn and DISCOUNTS in dqn and ADVANTAGES not in dqn
    assert batch.agent_steps == len(ppo) + len(dqn) <= 600
    # Each agent's own returns are recorded under its policy, and an episode's
    # return is the sum over its agents.
    assert batch.policy_returns["ppo"] and batch.policy_returns["dqn"]
    n = min(len(batch.episode_returns), len(batch.policy_returns["ppo"]), len(batch.policy_returns["dqn"]))
    np.testing.assert_allclose(
        batch.episode_returns[:n],
        np.array(batch.policy_returns["ppo"][:n]) + np.array(batch.policy_returns["dqn"][:n]),
    )
    # Inside one agent's episode the rows follow each other.
    same = dqn[EPS_ID][1:] == dqn[EPS_ID][:-1]
    assert same.any()
    allowed = np.array([0.0, 0.99, 0.99**2, 0.99**3])  # 3-step returns, shorter at the ends
    assert np.isclose(dqn[DISCOUNTS][:, None], allowed[None, :]).any(axis=1).all()
    weights = worker.get_weights()
    assert set(weights) == {"ppo", "dqn"}
    worker.set_weights({"dqn": weights["dqn"]})  # a subset is fine


def test_a_bad_policy_mapping_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not a policy"):
        MultiAgentRolloutWorker(TwoCartPoles, policies=_specs(), policy_mapping_fn=lambda a: "sac")


async def test_select_experiences_on_real_multi_agent_rollouts() -> None:
    async with asyncflow.open_runtime("process") as rt:
        env = functools.partial(MultiAgentCartPole, 2)
        options = {"policies": _specs(), "policy_mapping_fn": by_parity, "rollout_fragment_length": 50, "seed": 0}
        spawns = [rt.spawn(MultiAgentRolloutWorker, env, worker_index=i + 1, **options) for i in range(2)]
        workers = WorkerSet(await asyncio.gather(*spawns))
        ctx = flow.FlowContext()
        rollouts = flow.parallel_rollouts(workers, ctx=ctx)
        selected = await anext(flow.select_experiences(rollouts, ["dqn"]))
        assert set(selected.policy_batches) == {"dqn"} and selected.env_steps == 100
        assert ctx.get("num_env_steps_sampled") == 100 and ctx.get("num_agent_steps_sampled") >= 100
        assert all(len(v) == len(selected.policy_batches["dqn"][OBS]) for v in selected.policy_batches["dqn"].values())
        await rollouts.aclose()


async def test_worker_set_keeps_the_latest_weights_of_every_policy() -> None:
    from asyncflow.rl.policy import FlatWeights

    workers = WorkerSet([])
    a, b = FlatWeights(np.zeros(1, np.float32), 1), FlatWeights(np.ones(1, np.float32), 2)
    await workers.broadcast({"ppo": a})
    await workers.broadcast({"dqn": b})
    assert workers.latest_weights == {"ppo": a, "dqn": b}
