"""Self-play against a league of past selves, on PettingZoo's connect four (turn-based, masked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from asyncflow import algorithms as A
from asyncflow.errors import ConfigError
from asyncflow.rl import League, MultiAgent, PolicySpec
from asyncflow.rl.envs.two_player import connect_four_lookahead, play_games, random_player
from asyncflow.rl.models import MirrorNet
from asyncflow.rl.multi_agent import main_side
from asyncflow.rl.policies.league_opponent import LeagueOpponent, PlayerTurn
from asyncflow.rl.policies.random_policy import RandomPolicy
from asyncflow.rl.policy import FlatWeights

connect_four_module = pytest.importorskip("pettingzoo.classic.connect_four.connect_four")


def connect_four() -> Any:
    return connect_four_module.raw_env()  # no illegal-move wrapper: an illegal move raises


def _greedy(policy: Any) -> Any:
    def play(obs: Any, rng: np.random.Generator) -> int:
        return int(policy.greedy_actions({k: v[None] for k, v in obs.items()})[0])

    return play


def test_the_lookahead_player_wins_and_blocks() -> None:
    env = connect_four()
    env.reset(seed=0)
    for column in (0, 1, 0, 1, 0):  # player_0 has three in column 0, player_1 two in column 1
        env.step(column)
    obs = env.observe("player_1")  # to move: it must block column 0
    assert connect_four_lookahead(obs, np.random.default_rng(0)) == 0
    env.step(1)  # player_1 does not block; now player_0 can win in column 0
    assert connect_four_lookahead(env.observe("player_0"), np.random.default_rng(0)) == 0
    rates = play_games(connect_four, connect_four_lookahead, random_player, 40)
    assert rates["win_rate"] >= 0.85  # it beats a random player nearly always


@pytest.mark.slow
async def test_self_play_ppo_beats_a_random_player_and_keeps_its_league(tmp_path: Any) -> None:
    ma = MultiAgent.self_play(("player_0", "player_1"), League(snapshot_every=3, max_snapshots=4))
    config = A.PPOConfig(env=connect_four, multi_agent=ma, num_workers=2, seed=0, entropy_coeff=0.01)
    async with A.PPO(config) as algo:
        async for result in algo.train():
            if result.num_env_steps_sampled >= 60_000:
                break
        league = result["league"]
        rates = play_games(connect_four, _greedy(algo.learner.by_id["main"]), random_player, 200)
        path = await algo.save(tmp_path / "ckpt")
        opponent = algo.learner.by_id["opponent"].get_weights().vector.copy()
    assert rates["win_rate"] >= 0.95, rates
    assert league["size"] == 4  # snapshots every 3 iterations, at most 4 (the first one kept)
    assert league["games"] > 0 and league["win_rate"] + league["draw_rate"] + league["loss_rate"] == pytest.approx(1)
    assert league["rating"] > 1000  # main has gained on the snapshots it played
    assert set(league["ratings"]) >= {"snapshot_0"}  # main as it started stays
    snapshot = next(s for s in algo.ctx.extras["league"]["snapshots"] if s["id"] == league["opponent"])
    np.testing.assert_array_equal(opponent, snapshot["weights"])  # the opponent played is the drawn snapshot
    restored = A.PPO.restore(path, trust_code=True)
    async with restored:
        assert [s["id"] for s in restored.ctx.extras["league"]["snapshots"]] == [
            s["id"] for s in algo.ctx.extras["league"]["snapshots"]]  # fmt: skip
        after = await anext(restored.train())
    assert after["league"]["size"] >= 4


def test_the_mirror_net_plays_a_board_and_its_mirror_alike() -> None:
    env = connect_four()
    net = MirrorNet(env.observation_space("player_0"), env.action_space("player_0"), hidden=(32,))
    board = torch.from_numpy(np.random.default_rng(0).integers(0, 2, (5, 6, 7, 2))).to(torch.int8)
    logits, values = net({"observation": board, "action_mask": torch.ones(5, 7, dtype=torch.int8)})
    mirrored_logits, mirrored_values = net(board.flip(2))  # the board alone is taken too
    torch.testing.assert_close(mirrored_logits, logits.flip(1))
    torch.testing.assert_close(mirrored_values, values)
    assert logits.shape == (5, 7) and values.shape == (5,) and not torch.equal(logits, logits.flip(1))
    with pytest.raises(ConfigError, match=r"MirrorNet: expected a board of shape \(rows, columns, planes\)"):
        MirrorNet(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
    with pytest.raises(ConfigError, match=r"MirrorNet: expected one action per column of the board, Discrete\(7\)"):
        MirrorNet(env.observation_space("player_0"), gym.spaces.Discrete(6))


@pytest.mark.slow
@pytest.mark.timeout(600)  # 163 s alone, 600k env steps
async def test_self_play_ppo_with_the_lookahead_player_in_its_league_beats_it() -> None:
    """The issue's 70% against the one-move-lookahead player, at 600k env steps (80-87% there
    over seeds 0-2 in ``benchmarks/multi_agent.py --only mirror``)."""
    league = League(snapshot_every=1, players=(connect_four_lookahead,), player_share=0.75)
    config = A.PPOConfig(env=connect_four, multi_agent=MultiAgent.self_play(("player_0", "player_1"), league),
                         num_workers=2, seed=0, lr=1e-3, train_batch_size=4096, minibatch_size=256,
                         entropy_coeff=0.01, model=MirrorNet)  # fmt: skip
    async with A.PPO(config) as algo:
        async for result in algo.train():
            if result.num_env_steps_sampled >= 600_000:
                break
        greedy = _greedy(algo.learner.by_id["main"])
        vs_random = play_games(connect_four, greedy, random_player, 200)
        vs_lookahead = play_games(connect_four, greedy, connect_four_lookahead, 200)
    assert vs_random["win_rate"] >= 0.95, vs_random
    assert vs_lookahead["win_rate"] >= 0.70, vs_lookahead


def leftmost(obs: Any, rng: np.random.Generator) -> int:
    return int(np.flatnonzero(obs["action_mask"])[0])


def test_a_league_opponent_acts_with_its_snapshot_or_its_fixed_player() -> None:
    env = connect_four()
    env.reset(seed=0)
    env.step(3)
    obs = {k: np.stack([v] * 64) for k, v in env.observe("player_1").items()}
    opponent = LeagueOpponent(RandomPolicy, [leftmost], env.observation_space("player_1"),
                              env.action_space("player_1"), seed=0, worker_index=1)  # fmt: skip
    assert len(set(opponent.compute_actions(obs)[0])) > 1  # the network (here: random) acts
    opponent.set_weights(PlayerTurn(0))
    actions, logps, values = opponent.compute_actions(obs)
    assert list(actions) == [0] * 64 and not logps.any() and not values.any()
    assert list(opponent.greedy_actions(obs)) == [0] * 64 and not opponent.values(obs).any()
    state = opponent.get_state()
    opponent.set_weights(FlatWeights(np.zeros(0, np.float32), 3))  # a snapshot: the network again
    assert len(set(opponent.compute_actions(obs)[0])) > 1
    opponent.set_state(state)
    assert list(opponent.compute_actions(obs)[0]) == [0] * 64  # a checkpoint keeps who plays
    with pytest.raises(ValueError, match="fixed player 1 of 1"):
        opponent.set_weights(PlayerTurn(1))


async def test_a_league_s_fixed_player_is_drawn_played_rated_and_checkpointed(tmp_path: Any) -> None:
    league = League(snapshot_every=1, players=(connect_four_lookahead,), player_share=0.5)
    ma = MultiAgent.self_play(("player_0", "player_1"), league)
    config = A.PPOConfig(env=connect_four, multi_agent=ma, num_workers=1, seed=0, train_batch_size=512)
    against_player = []
    async with A.PPO(config) as algo:
        async for result in algo.train():
            if result["league"]["played"] == "connect_four_lookahead":  # ["opponent"]: the one drawn next
                against_player.append(result["league"])
            if len(against_player) >= 2 or result.training_iteration >= 20:
                break
        path = await algo.save(tmp_path / "ckpt")
        record = algo.ctx.extras["league"]["players"]
    assert against_player, "the fixed player was never drawn"
    games = sum(r["games"] for r in against_player)
    losses = sum(r["loss_rate"] * r["games"] for r in against_player)
    assert games >= 20 and losses / games >= 0.7  # a main that barely learned loses to it, as to no snapshot
    assert {"snapshot_0", "connect_four_lookahead"} <= set(result["league"]["ratings"])
    assert result["league"]["ratings"]["connect_four_lookahead"] > 1000  # it gained on main
    restored = A.PPO.restore(path, trust_code=True)
    async with restored:
        assert restored.ctx.extras["league"]["players"] == record
        assert restored.config.multi_agent.league.players == (connect_four_lookahead,)
        after = await anext(restored.train())
    assert "connect_four_lookahead" in after["league"]["ratings"]


async def test_the_league_adds_a_snapshot_on_the_win_rate() -> None:
    ma = MultiAgent.self_play(("player_0", "player_1"), League(snapshot_every=None, win_rate_threshold=0.5, window=20))
    config = A.PPOConfig(env=connect_four, multi_agent=ma, num_workers=1, seed=0, train_batch_size=512)
    async with A.PPO(config) as algo:
        sizes = []
        async for result in algo.train():
            sizes.append(result["league"]["size"])
            if result.training_iteration >= 6:
                break
    assert sizes[-1] > 1  # main wins half its games against its first self soon enough


def test_self_play_bad_input_is_one_line() -> None:
    with pytest.raises(ConfigError, match="give snapshot_every, win_rate_threshold or both"):
        League(snapshot_every=None, win_rate_threshold=None)
    with pytest.raises(ConfigError, match="sampling: must be 'uniform' or 'pfsp'"):
        League(sampling="elo")
    with pytest.raises(ConfigError, match="self-play trains policy 'main'"):
        MultiAgent({"a": PolicySpec()}, lambda agent: "a", league=League())
    with pytest.raises(ConfigError, match="a game of two or more agents"):
        MultiAgent.self_play(("player_0",))
    with pytest.raises(ConfigError, match=r"league\.players: expected a sequence of functions"):
        League(players=connect_four_lookahead)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"league\.players: expected a sequence of functions"):
        League(players=("lookahead",))  # type: ignore[arg-type]
    with pytest.raises(
        ConfigError, match=r"league\.player_share: a chance in \[0, 1\] with fixed players, got 0\.5 with 0"
    ):
        League(player_share=0.5)
    with pytest.raises(ConfigError, match=r"league\.player_share: a chance in \[0, 1\] with fixed players, got 1\.5"):
        League(players=(connect_four_lookahead,), player_share=1.5)
    with pytest.raises(ConfigError, match=r"module 'asyncflow\.rl\.envs\.two_player' has no 'nobody'"):
        MultiAgent.from_dict({"policies": {"main": {}, "opponent": {}}, "policy_mapping": main_side,
                              "policies_to_train": ["main"],
                              "league": {"players": ["asyncflow.rl.envs.two_player:nobody"]}})  # fmt: skip
    named = MultiAgent.from_dict(
        {
            "policies": {"main": {}, "opponent": {}},
            "policy_mapping": main_side,
            "policies_to_train": ["main"],
            "league": {"players": ["asyncflow.rl.envs.two_player:connect_four_lookahead"]},
        }
    )
    assert named.league is not None and named.league.players == (connect_four_lookahead,)


def test_the_command_line_puts_fixed_players_in_the_league() -> None:
    from asyncflow.cli import _build_parser, _make_config

    def config(*extra: str) -> Any:
        env = "pettingzoo.classic.connect_four.connect_four:raw_env"
        return _make_config(A.PPO, _build_parser().parse_args(["train", "ppo", "--env", env, *extra]))

    lookahead = "asyncflow.rl.envs.two_player:connect_four_lookahead"
    league = config("--league-player", lookahead).multi_agent.league  # self-play, implied
    assert league.players == (connect_four_lookahead,)
    assert config("--self-play").multi_agent.league.players == ()
    mirror = config("--league-player", lookahead, "--set", "model.custom=asyncflow.rl.models.mirror:MirrorNet")
    assert mirror.model.custom is MirrorNet
    example = config("--config", str(Path(__file__).parents[2] / "examples" / "connect_four_self_play.yaml"))
    assert example.model.custom is MirrorNet and example.multi_agent.trained == ("main",)
    assert example.multi_agent.league == League(snapshot_every=1, players=(connect_four_lookahead,), player_share=0.75)
    with pytest.raises(ConfigError, match="--league-player: a self-play league's opponent; got --multi-agent shared"):
        config("--multi-agent", "shared", "--league-player", lookahead)
    with pytest.raises(ConfigError, match=r"--league-player: module 'asyncflow\.rl\.envs\.two_player' has no 'nobody'"):
        config("--league-player", "asyncflow.rl.envs.two_player:nobody")
