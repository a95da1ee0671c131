"""Self-play against a league of past selves (``MultiAgent.self_play``, ``rl.multi_agent.League``).

An operator after a multi-agent plan's results::

    results -> league_play -> results with "league": size, opponent, win/draw/loss rates, ratings

Between two iterations it reads the games ``main`` finished (the sign of its return in each),
credits them to the snapshot that played the other side, updates an Elo rating of ``main`` and
of each snapshot, and on the league's schedule or win rate adds a snapshot of ``main``'s
weights and draws the next opponent, whose weights go to every worker's ``"opponent"`` policy
(and to its learner, so that a checkpoint or an export holds the opponent being played). The
league's fixed players (``League.players``) are drawn and rated beside the snapshots; when one
is drawn, the workers' ``"opponent"`` (a ``LeagueOpponent``) acts with it instead, and the
opponent's learner keeps the snapshot it held. The league lives in the flow context
(``extras["league"]``), so a checkpoint keeps it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from ..flow._context import FlowContext
from ..flow._util import closing
from ..flow.metrics import Result
from ..rl.multi_agent import League
from ..rl.policies.league_opponent import PlayerTurn
from ..rl.policy import FlatWeights
from ..rl.sampling.worker_set import WorkerSet

__all__ = ["league_play"]

ELO_K = 16.0
"""How far one game moves a rating."""


def _new_state() -> dict[str, Any]:
    return {"snapshots": [], "next_id": 0, "current": None, "recent": [], "rating": 1000.0, "since": 0}


def _player_ids(league: League) -> list[str]:
    """The fixed players' ids in the league's figures: their function names (with their index
    after a name that repeats)."""
    names = [getattr(p, "__name__", "player") for p in league.players]
    return [name if names.count(name) == 1 else f"{name}_{i}" for i, name in enumerate(names)]


def _players(state: dict[str, Any], league: League) -> list[dict[str, Any]]:
    """The league's fixed players, added to its state (a checkpoint of a league without them too)."""
    players = state.setdefault("players", [])
    for index, pid in enumerate(_player_ids(league)[len(players) :], start=len(players)):
        players.append({"id": pid, "player": index, "games": [0, 0, 0], "rating": 1000.0})
    return players  # type: ignore[no-any-return]


def _pool(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [*state["snapshots"], *state.get("players", [])]


def _score(outcome: float) -> float:
    return 1.0 if outcome > 0 else 0.5 if outcome == 0 else 0.0


def _win_rate(snapshot: dict[str, Any]) -> float | None:
    wins, draws, losses = snapshot["games"]
    played = wins + draws + losses
    return None if played == 0 else (wins + 0.5 * draws) / played


async def league_play(
    results: AsyncIterator[Result],
    league: League,
    *,
    outcomes: list[float],
    workers: WorkerSet,
    learners: dict[str, Any],
    ctx: FlowContext,
    seed: int,
) -> AsyncIterator[Result]:
    """``results`` with the league's figures; the league grows and the opponent changes between
    iterations (the module docstring). ``outcomes``: ``main``'s returns of the games finished
    since the last iteration, which the shared rollouts append to."""
    state = ctx.extras.setdefault("league", _new_state())
    _players(state, league)
    if state["current"] is None:  # the first opponent: main as it starts
        await _add_snapshot(state, league, learners, ctx)
        await _play(state, state["snapshots"][0], workers, learners, ctx)
    else:  # resumed: the workers play the opponent the league was playing
        await _send(_current(state), workers, learners, ctx)
    async with closing(results) as items:
        async for result in items:
            games = list(outcomes)
            outcomes.clear()
            current = _current(state)
            played = current["id"]
            for outcome in games:
                _record(state, current, outcome)
            state["since"] += 1
            if _due(state, league):
                await _add_snapshot(state, league, learners, ctx)
                await _play(state, _draw(state, league, seed), workers, learners, ctx)
            result["league"] = _figures(state, games, played)
            yield result


def _current(state: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in _pool(state) if s["id"] == state["current"])


def _record(state: dict[str, Any], snapshot: dict[str, Any], outcome: float) -> None:
    score = _score(outcome)
    snapshot["games"][0 if score == 1 else 1 if score == 0.5 else 2] += 1
    expected = 1.0 / (1.0 + 10 ** ((snapshot["rating"] - state["rating"]) / 400))
    state["rating"] += ELO_K * (score - expected)
    snapshot["rating"] -= ELO_K * (score - expected)
    state["recent"] = [*state["recent"], score][-10_000:]


def _due(state: dict[str, Any], league: League) -> bool:
    if league.snapshot_every is not None and state["since"] >= league.snapshot_every:
        return True
    recent = state["recent"][-league.window :]
    threshold = league.win_rate_threshold
    return threshold is not None and len(recent) >= league.window and float(np.mean(recent)) >= threshold


async def _add_snapshot(state: dict[str, Any], league: League, learners: dict[str, Any], ctx: FlowContext) -> None:
    weights: FlatWeights = await ctx.learner_thread.run(learners["main"].get_weights)
    state["snapshots"].append({"id": state["next_id"], "weights": weights.vector.copy(), "version": weights.version,
                               "games": [0, 0, 0], "rating": state["rating"]})  # fmt: skip
    state["next_id"] += 1
    if len(state["snapshots"]) > league.max_snapshots:  # the first one stays: main as it started
        del state["snapshots"][1]
    state["since"] = 0


def _draw(state: dict[str, Any], league: League, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, state["next_id"]])
    pool = _pool(state)
    if league.player_share is not None:
        pool = state["players"] if rng.random() < league.player_share else state["snapshots"]
    weights = np.ones(len(pool))
    if league.sampling == "pfsp":  # the ones main beats least, most often
        rates = [_win_rate(s) for s in pool]
        weights = np.array([(1 - (0.5 if r is None else r)) ** 2 for r in rates])
        if weights.sum() <= 0:
            weights = np.ones(len(pool))
    return pool[int(rng.choice(len(pool), p=weights / weights.sum()))]  # type: ignore[no-any-return]


async def _play(
    state: dict[str, Any], opponent: dict[str, Any], workers: WorkerSet, learners: dict[str, Any], ctx: FlowContext
) -> None:
    await _send(opponent, workers, learners, ctx)
    state["current"], state["recent"] = opponent["id"], []


async def _send(opponent: dict[str, Any], workers: WorkerSet, learners: dict[str, Any], ctx: FlowContext) -> None:
    """The workers' ``"opponent"`` plays ``opponent``: a snapshot's weights, or a fixed player."""
    if "player" in opponent:
        await workers.broadcast({"opponent": PlayerTurn(opponent["player"])})  # type: ignore[dict-item]
        return
    weights = FlatWeights(opponent["weights"], opponent["version"])
    await ctx.learner_thread.run(learners["opponent"].set_weights, weights)
    await workers.broadcast({"opponent": weights})


def _name(opponent: dict[str, Any]) -> str:
    return str(opponent["id"]) if "player" in opponent else f"snapshot_{opponent['id']}"


def _figures(state: dict[str, Any], games: list[float], played: int | str) -> dict[str, Any]:
    n = max(len(games), 1)
    return {
        "size": len(state["snapshots"]),
        "opponent": state["current"],
        "played": played,
        "games": len(games),
        "win_rate": sum(g > 0 for g in games) / n,
        "draw_rate": sum(g == 0 for g in games) / n,
        "loss_rate": sum(g < 0 for g in games) / n,
        "rating": state["rating"],
        "ratings": {_name(s): s["rating"] for s in _pool(state)},
        "win_rates": {_name(s): r for s in _pool(state) if (r := _win_rate(s)) is not None},
    }
