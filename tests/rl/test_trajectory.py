"""The one trajectory pipeline: both rollout workers go through it, so the same
trajectory comes out of each the same way."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from asyncflow.rl import EpisodeBook, RolloutWorker
from asyncflow.rl.envs.multi_agent import MultiAgentCartPole
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy
from asyncflow.rl.policies.epsilon_greedy import EpsilonGreedyPolicy
from asyncflow.rl.sampling.multi_agent_worker import MappedPolicy, MultiAgentRolloutWorker


def one_agent_cartpole() -> MultiAgentCartPole:
    return MultiAgentCartPole(num_agents=1)


def short_cartpole() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1", max_episode_steps=30)  # time limits inside the fragment


def one_short_agent() -> MultiAgentCartPole:
    env = MultiAgentCartPole(num_agents=1)
    env.envs = {a: short_cartpole() for a in env.envs}
    return env


@pytest.mark.parametrize(
    ("factory", "postprocess", "n_step"),
    [
        (functools.partial(ActorCriticPolicy, hidden=(16,)), "gae", 1),
        (functools.partial(EpsilonGreedyPolicy, hidden=(16,), epsilon=0.3), "transitions", 3),
    ],
    ids=["gae", "n_step_transitions"],
)
@pytest.mark.parametrize("short", [False, True], ids=["terminations", "truncations"])
def test_single_and_multi_agent_workers_postprocess_a_trajectory_identically(
    factory: Any, postprocess: Any, n_step: int, short: bool
) -> None:
    """One CartPole through RolloutWorker, and as the only agent of a multi-agent env:
    same seeds, same policy, so every column must be equal."""
    single = RolloutWorker(short_cartpole if short else "CartPole-v1", policy_factory=factory, num_envs=1,
                           rollout_fragment_length=100, seed=4, worker_index=2, postprocess=postprocess,
                           n_step=n_step)  # fmt: skip
    multi = MultiAgentRolloutWorker(one_short_agent if short else one_agent_cartpole,
                                    policies={"p": MappedPolicy(factory, postprocess, n_step)},
                                    policy_mapping_fn=lambda agent: "p", rollout_fragment_length=100, seed=4,
                                    worker_index=2)  # fmt: skip
    for _ in range(3):  # episodes end inside fragments and across them
        a, b = single.sample(), multi.sample()
        columns = b.policy_batches["p"]
        assert sorted(a) == sorted(columns)
        for key in a:
            np.testing.assert_allclose(a[key], columns[key], rtol=1e-6, err_msg=key)
        assert a.episode_returns == b.episode_returns and a.episode_lengths == b.episode_lengths


def test_episode_book_records_completed_episodes_and_fresh_ids() -> None:
    book = EpisodeBook(worker_index=3, lanes=2)
    first = book.ids.copy()
    book.add(np.array([1.0, 2.0]))
    book.add(np.array([1.0, 2.0]))
    assert book.end(1) == 4.0
    assert book.ids[0] == first[0] and book.ids[1] not in first
    assert all(i // 1_000_000_000 == 3 for i in book.ids)
    assert book.take() == ([4.0], [2]) and book.take() == ([], [])
