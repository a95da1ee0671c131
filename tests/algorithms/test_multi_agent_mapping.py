"""Any algorithm on a multi-agent env (``config.multi_agent``): one learner and one plan of the
algorithm per policy, agents mapped to policies, frozen policies, checkpoints, bad input."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from asyncflow import algorithms as A
from asyncflow.errors import ConfigError
from asyncflow.rl import MultiAgent, MultiAgentCartPole, MultiAgentRolloutWorker, PolicySpec

pettingzoo = pytest.importorskip("pettingzoo")
mpe2 = pytest.importorskip("mpe2")


def two_cartpoles() -> MultiAgentCartPole:
    return MultiAgentCartPole(num_agents=2)


def shared(agent: str, episode: int) -> str:
    return "shared"


def per_agent(agent: str) -> str:
    return agent


def spread_continuous() -> Any:
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(continuous_actions=True, max_cycles=25)


def connect_four() -> Any:
    from pettingzoo.classic.connect_four.connect_four import raw_env

    return raw_env()  # no illegal-move wrapper: an illegal move raises


async def _train(algo: Any, iterations: int) -> dict[str, Any]:
    async with algo:
        async for result in algo.train():
            if result.training_iteration >= iterations:
                return result
    raise AssertionError("the plan ended")


SHARED = MultiAgent({"shared": PolicySpec()}, shared)


async def test_one_shared_ppo_policy_learns_two_cartpoles_and_is_evaluated_on_the_way() -> None:
    config = A.PPOConfig(env=two_cartpoles, multi_agent=SHARED, num_workers=2, seed=0, evaluation_interval=1,
                         evaluation_episodes=4, evaluation_num_workers=1)  # fmt: skip
    async with A.PPO(config) as algo:
        async for result in algo.train():
            if result["policy_return_mean"]["shared"] >= 150 or result.num_env_steps_sampled >= 40_000:
                break
        evaluation = await algo.evaluate()  # the final weights, greedy
    assert result["policy_return_mean"]["shared"] >= 150, result["policy_return_mean"]
    assert set(result["policies"]) == {"shared"}
    assert result["policies"]["shared"]["num_agent_steps_trained"] > result.num_env_steps_sampled  # two agents
    assert "shared/policy_loss" in result.learner
    assert result["evaluation"]["episodes"] == 4  # an earlier iteration's, in the background
    # Each episode's return is both agents' together; each agent's is the shared policy's.
    assert evaluation["episodes"] == 4 and evaluation["policy_return_mean"]["shared"] >= 150, evaluation
    assert evaluation["episode_return_mean"] == pytest.approx(2 * evaluation["policy_return_mean"]["shared"])


async def test_a_frozen_policy_keeps_its_weights_while_the_other_learns() -> None:
    ma = MultiAgent({"agent_0": PolicySpec(config={"lr": 1e-3}), "agent_1": PolicySpec()}, per_agent,
                    policies_to_train=("agent_0",))  # fmt: skip
    algo = A.PPO(A.PPOConfig(env=two_cartpoles, multi_agent=ma, num_workers=1, seed=0))
    async with algo:
        frozen = algo.learner.by_id["agent_1"].get_weights().vector.copy()
        learning = algo.learner.by_id["agent_0"].get_weights().vector.copy()
        assert algo.learner.by_id["agent_0"].lr == 1e-3  # its PolicySpec's config
        assert algo.learner.by_id["agent_1"].lr == 3e-3  # the run's
        async for result in algo.train():
            if result.training_iteration >= 8:
                break
        np.testing.assert_array_equal(algo.learner.by_id["agent_1"].get_weights().vector, frozen)
        assert not np.array_equal(algo.learner.by_id["agent_0"].get_weights().vector, learning)
        workers = await algo.workers.call(algo.workers.workers[0], MultiAgentRolloutWorker.get_weights)
        np.testing.assert_array_equal(workers["agent_1"].vector, frozen)
        np.testing.assert_array_equal(workers["agent_0"].vector, algo.learner.by_id["agent_0"].get_weights().vector)
    returns = result["policy_return_mean"]
    assert returns["agent_0"] > 2 * returns["agent_1"], returns  # the one that learns, against a random one
    assert set(result["policies"]) == {"agent_0"}


@pytest.mark.parametrize(
    ("algo", "config", "env"),
    [
        (A.PG, A.PGConfig, two_cartpoles),
        (A.A2C, A.A2CConfig, two_cartpoles),
        (A.DQN, A.DQNConfig, two_cartpoles),
        (A.ApexDQN, A.ApexDQNConfig, two_cartpoles),
        (A.SAC, A.SACConfig, spread_continuous),
        (A.TD3, A.TD3Config, spread_continuous),
        (A.DDPG, A.DDPGConfig, spread_continuous),
        (A.PPO, A.PPOConfig, connect_four),  # turn-based, with action masks
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
async def test_every_algorithm_trains_a_policy_per_mapping_and_resumes(algo: Any, config: Any, env: Any,
                                                                       tmp_path: Any) -> None:  # fmt: skip
    options: dict[str, Any] = {"learning_starts": 200} if hasattr(config(), "learning_starts") else {}
    options |= {"timesteps_per_iteration": 200} if hasattr(config(), "timesteps_per_iteration") else {}
    c = config(env=env, multi_agent=SHARED, num_workers=1, seed=0, **options)
    first = algo(c)
    result = await _train(first, 2)
    assert result["policies"]["shared"]["num_agent_steps_trained"] > 0
    assert np.isfinite(result["policy_return_mean"]["shared"])
    async with algo(c) as again:  # a save, and a run that goes on from it
        path = await again.save(tmp_path / "ckpt")
        saved = again.learner.by_id["shared"].get_weights().vector.copy()
    restored = algo.restore(path)
    async with restored:
        np.testing.assert_array_equal(restored.learner.by_id["shared"].get_weights().vector, saved)
        after = await anext(restored.train())
    assert after.training_iteration == 1 and after["policies"]["shared"]["training_iteration"] == 1


def test_bad_multi_agent_input_is_one_line_before_any_process() -> None:
    def nowhere(agent: str) -> str:
        return "nobody"

    with pytest.raises(ConfigError, match="'agent_0' -> 'nobody'; expected one of \\['shared'\\]"):
        A.PPO(A.PPOConfig(env=two_cartpoles, multi_agent=MultiAgent({"shared": PolicySpec()}, nowhere)))
    with pytest.raises(ConfigError, match="every policy needs an agent"):
        A.PPO(A.PPOConfig(env=two_cartpoles, multi_agent=MultiAgent({"shared": PolicySpec(), "x": PolicySpec()},
                                                                    shared)))  # fmt: skip

    def adversary(agent: str) -> str:
        return "one"

    from mpe2 import simple_adversary_v3

    with pytest.raises(ConfigError, match="'agent_0' -> 'one', whose spaces are those of agent 'adversary_0'"):
        A.PPO(A.PPOConfig(env=simple_adversary_v3.parallel_env, multi_agent=MultiAgent({"one": PolicySpec()},
                                                                                       adversary)))  # fmt: skip
    with pytest.raises(ConfigError, match="not a multi-agent env"):
        A.PPO(A.PPOConfig(env=lambda: object(), multi_agent=SHARED))
    with pytest.raises(ConfigError, match=r"expected a callable .* not 'CartPole-v1'"):
        A.PPO(A.PPOConfig(env="CartPole-v1", multi_agent=SHARED))
    with pytest.raises(ConfigError, match="multi_agent: not available for IMPALA"):
        A.IMPALA(A.IMPALAConfig(env=two_cartpoles, multi_agent=SHARED))
    with pytest.raises(ConfigError, match="multi_agent: not available for A3C"):
        A.A3C(A.A3CConfig(env=two_cartpoles, multi_agent=SHARED))
    with pytest.raises(ConfigError, match=r"policies\['shared'\].config: .*lr"):
        A.PPO(A.PPOConfig(env=two_cartpoles, multi_agent=MultiAgent({"shared": PolicySpec(config={"lr": -1})},
                                                                    shared)))  # fmt: skip
    with pytest.raises(ConfigError, match="policies_to_train: expected some of"):
        MultiAgent({"shared": PolicySpec()}, shared, policies_to_train=("other",))


def test_agents_with_different_spaces_each_get_their_policy() -> None:
    from mpe2 import simple_adversary_v3

    algo = A.PPO(A.PPOConfig(env=simple_adversary_v3.parallel_env,
                             multi_agent=MultiAgent({p: PolicySpec() for p in ("adversary_0", "agent_0", "agent_1")},
                                                    per_agent)))  # fmt: skip
    assert algo.spaces["adversary_0"].observation.shape == (8,)
    assert algo.spaces["agent_0"].observation.shape == (10,)


def ppo_or_dqn(agent: str) -> str:
    return "ppo" if agent == "agent_0" else "dqn"


@pytest.mark.slow
async def test_a_policy_of_another_algorithm_learns_beside_the_run_s_own() -> None:
    # The two-trainer composition (RLlib Flow, Fig. 9) as a mapping: PPO's run, one policy DQN's.
    dqn = PolicySpec(algorithm="dqn", config={"lr": 1e-3, "training_intensity": 4.0})
    ma = MultiAgent({"ppo": PolicySpec(), "dqn": dqn}, ppo_or_dqn)
    config = A.PPOConfig(env=two_cartpoles, multi_agent=ma, num_workers=2, seed=0, train_batch_size=1024,
                         minibatch_size=128)  # fmt: skip
    algo = A.PPO(config)
    assert type(algo.learner or object()).__name__ == "object"  # nothing built before the run starts
    async with algo:
        assert type(algo.learner.by_id["dqn"]).__name__ == "DQNLearner"
        assert len(algo.resources["dqn"]) == 0 and "ppo" not in algo.resources  # DQN's replay buffer only
        async for result in algo.train():
            returns = result["policy_return_mean"]
            if min(returns.values(), default=0) >= 150 or result.num_env_steps_sampled >= 150_000:
                break
    assert min(returns.values()) >= 150, returns
    assert "dqn/mean_q" in result.learner and "ppo/policy_loss" in result.learner


def test_a_policy_of_another_algorithm_is_checked_before_any_process() -> None:
    def one(agent: str) -> str:
        return "x"

    with pytest.raises(ConfigError, match="algorithm: no algorithm 'dqnn'"):
        A.PPO(A.PPOConfig(env=two_cartpoles, multi_agent=MultiAgent({"x": PolicySpec(algorithm="dqnn")}, one)))
    with pytest.raises(ConfigError, match="multi_agent: not available for IMPALA"):
        A.PPO(A.PPOConfig(env=two_cartpoles, multi_agent=MultiAgent({"x": PolicySpec(algorithm="impala")}, one)))
    with pytest.raises(ConfigError, match=r"policies\['x'\].config: .*n_step"):
        A.PPO(
            A.PPOConfig(
                env=two_cartpoles, multi_agent=MultiAgent({"x": PolicySpec(algorithm="dqn", config={"n_step": 0})}, one)
            )
        )
    with pytest.raises(ConfigError, match="SAC takes Box actions"):
        A.PPO(A.PPOConfig(env=two_cartpoles, multi_agent=MultiAgent({"x": PolicySpec(algorithm="sac")}, one)))


def spread() -> Any:
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(max_cycles=25)


@pytest.mark.slow
async def test_one_shared_ppo_policy_learns_mpe2_simple_spread() -> None:
    # Three agents cover three landmarks; a random team's mean agent return is about -28.5 here.
    # benchmarks/multi_agent.py runs one policy per agent beside it, to 200k env steps.
    config = A.PPOConfig(env=spread, multi_agent=MultiAgent.shared(), num_workers=2, seed=0)
    async with A.PPO(config) as algo:
        async for result in algo.train():
            if result["policy_return_mean"]["shared"] >= -24.5 or result.num_env_steps_sampled >= 100_000:
                break
    assert result["policy_return_mean"]["shared"] >= -24.5, result["policy_return_mean"]


async def test_evaluate_and_export_a_multi_agent_checkpoint_by_policy(tmp_path: Any) -> None:
    import torch

    from asyncflow.evaluate import evaluate
    from asyncflow.export import export_policy

    ma = MultiAgent({"agent_0": PolicySpec(), "agent_1": PolicySpec()}, per_agent)
    async with A.PPO(A.PPOConfig(env=two_cartpoles, multi_agent=ma, num_workers=1, seed=0)) as algo:
        await _train_some(algo)
        path = await algo.save(tmp_path / "ckpt")
        weights = {pid: learner.get_weights().vector.copy() for pid, learner in algo.learner.by_id.items()}
    result = evaluate(path, episodes=3, seed=5)
    assert len(result.returns) == 3 and result.policy_returns is not None
    assert set(result.policy_returns) == {"agent_0", "agent_1"} and all(
        len(r) == 3 for r in result.policy_returns.values()
    )
    assert result.returns == pytest.approx([a + b for a, b in zip(*result.policy_returns.values(), strict=True)])
    restored = A.PPO.restore(path)
    for pid, vector in weights.items():
        np.testing.assert_array_equal(restored.policy_from_checkpoint(pid).get_weights().vector, vector)
    out = export_policy(path, tmp_path / "agent_1.pt", policy_id="agent_1")
    with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript; the file still loads
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(out))
    actions = module(torch.zeros(4, 4))
    assert actions.shape == (4,)
    with pytest.raises(ConfigError, match=r"policies are \['agent_0', 'agent_1'\]; name one"):
        export_policy(path, tmp_path / "x.pt")


async def _train_some(algo: Any) -> None:
    async for result in algo.train():
        if result.training_iteration >= 2:
            return
