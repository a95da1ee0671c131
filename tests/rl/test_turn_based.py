"""PettingZoo's turn-based AEC API in the multi-agent worker: rewards reach the agent that
waits, action masks are honoured, a step waiting for its agent's turn crosses fragments."""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest

from asyncflow.errors import ConfigError
from asyncflow.rl.data.sample_batch import DONES, EPS_ID, REWARDS
from asyncflow.rl.envs.multi_agent import ALL, PettingZooAECEnv, make_multi_agent_env
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy
from asyncflow.rl.sampling.multi_agent_worker import MappedPolicy, MultiAgentRolloutWorker

connect_four = pytest.importorskip("pettingzoo.classic.connect_four.connect_four")


def strict_connect_four() -> object:
    """PettingZoo's connect four without its illegal-move wrapper: an illegal move raises."""
    return connect_four.raw_env()


def _worker(fragment: int, mapping: object = lambda agent: "p") -> MultiAgentRolloutWorker:
    policy = MappedPolicy(functools.partial(ActorCriticPolicy, hidden=(32,)))
    return MultiAgentRolloutWorker(strict_connect_four, policies={"p": policy}, policy_mapping_fn=mapping,  # type: ignore[arg-type]
                                   rollout_fragment_length=fragment, seed=3)  # fmt: skip


def test_the_aec_adapter_steps_one_agent_per_turn_and_ends_both() -> None:
    env = make_multi_agent_env(strict_connect_four)
    assert isinstance(env, PettingZooAECEnv)
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_0"]
    with pytest.raises(ValueError, match="turn of 'player_0'"):
        env.step({"player_1": 0})
    obs, rewards, terms, truncs, _ = env.step({"player_0": 0})
    assert list(obs) == ["player_1"] and rewards == {"player_0": 0.0, "player_1": 0.0} and not terms[ALL]
    for _ in range(3):  # player_0 stacks column 0 while player_1 plays column 1: player_0 wins
        env.step({"player_1": 1})
        obs, rewards, terms, truncs, _ = env.step({env.env.agent_selection: 0})
    assert terms[ALL] and not truncs[ALL]
    assert set(obs) == {"player_0", "player_1"}  # both get their final observation
    assert rewards["player_1"] == -1.0 and terms["player_1"]  # on the winner's move


def test_the_loser_is_credited_on_the_winner_s_move_and_no_move_is_illegal() -> None:
    worker = _worker(fragment=400)
    batch = worker.sample()  # 400 moves of masked play: an illegal one would raise in raw_env
    rows = batch.policy_batches["p"]
    finals = rows[DONES].astype(bool)
    by_game: dict[int, list[float]] = {}
    for eps, reward in zip(rows[EPS_ID][finals], rows[REWARDS][finals], strict=True):
        by_game.setdefault(int(eps), []).append(float(reward))
    assert len(by_game) >= 10
    for rewards in by_game.values():  # each game: one last step per player, a win and a loss (or a draw)
        assert len(rewards) == 2 and sum(rewards) == 0.0, rewards
    assert sorted(Counter(batch.policy_returns["p"]).keys()) in ([-1.0, 1.0], [-1.0, 0.0, 1.0])
    assert (rows[REWARDS][~finals] == 0).all()  # no reward before the end


def test_a_step_waiting_for_its_turn_goes_on_into_the_next_fragment() -> None:
    worker = _worker(fragment=5)  # odd: each fragment ends with one player waiting for its turn
    emitted = 0
    for i in range(1, 41):
        emitted += len(worker.sample().policy_batches.get("p", ()))
        assert 5 * i - 1 <= emitted <= 5 * i  # at most the waiting player's step is held back
    assert emitted < 200


def test_the_mapping_may_swap_sides_per_episode() -> None:
    def sides(agent: str, episode: int) -> str:
        return "p" if (agent == "player_0") == (episode % 2 == 0) else "q"

    policies = {pid: MappedPolicy(functools.partial(ActorCriticPolicy, hidden=(8,))) for pid in ("p", "q")}
    worker = MultiAgentRolloutWorker(strict_connect_four, policies=policies, policy_mapping_fn=sides,
                                     rollout_fragment_length=300)  # fmt: skip
    batch = worker.sample()
    first = {pid: np.unique(b[EPS_ID] % 2) for pid, b in batch.policy_batches.items()}
    assert set(first) == {"p", "q"}
    # "p" moves first (player_0) in even episodes: its first move of each game sees an empty board
    p = batch.policy_batches["p"]
    starts = [i for i in range(len(p)) if i == 0 or p[EPS_ID][i] != p[EPS_ID][i - 1]]
    empty = [not p["obs"]["observation"][i].any() for i in starts]
    assert empty == [int(p[EPS_ID][i]) % 2 == 0 for i in starts]
    with pytest.raises(ConfigError, match="'player_1' to 'nobody'"):
        MultiAgentRolloutWorker(strict_connect_four, policies=policies,
                                policy_mapping_fn=lambda agent: "p" if agent == "player_0" else "nobody")  # fmt: skip
