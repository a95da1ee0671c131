"""Playing a policy against a fixed opponent in a turn-based PettingZoo game (AEC), for
evaluating self-play: ``play_games`` returns the win, draw and loss rates, the policy taking
each side in turn. A player is a function of the observation (with its ``action_mask``) and a
random generator, returning a legal action."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Player", "connect_four_lookahead", "play_games", "random_player"]

Player = Callable[[Any, np.random.Generator], int]


def random_player(obs: Any, rng: np.random.Generator) -> int:
    """A uniformly random legal move."""
    return int(rng.choice(np.flatnonzero(obs["action_mask"])))


def _connects(board: np.ndarray, column: int, plane: int) -> bool:
    """Whether dropping a piece of ``plane`` (0: the mover's, 1: the other's) in ``column``
    of connect four's ``(6, 7, 2)`` board makes four in a row."""
    pieces = board[..., plane].astype(bool).copy()
    row = int(np.flatnonzero(~(board[:, column, 0] + board[:, column, 1]).astype(bool)).max())
    pieces[row, column] = True
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < 6 and 0 <= c < 7 and pieces[r, c]:
                count, r, c = count + 1, r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def connect_four_lookahead(obs: Any, rng: np.random.Generator) -> int:
    """PettingZoo connect four's one-move-lookahead player: it wins when a move wins, blocks
    when the other player would win next, and else plays a random legal move."""
    board, legal = obs["observation"], np.flatnonzero(obs["action_mask"])
    for plane in (0, 1):  # win, else block
        for column in legal:
            if _connects(board, int(column), plane):
                return int(column)
    return int(rng.choice(legal))


def play_games(env_fn: Callable[[], Any], player: Player, opponent: Player, games: int,
               seed: int = 0) -> dict[str, float]:  # fmt: skip
    """``games`` games of ``player`` against ``opponent``, ``player`` moving first in the even
    ones; its win, draw and loss rates (by the sign of its return in each game)."""
    rng = np.random.default_rng(seed)
    env = env_fn()
    tally = {"win_rate": 0.0, "draw_rate": 0.0, "loss_rate": 0.0}
    try:
        for game in range(games):
            env.reset(seed=seed + game)
            me = env.possible_agents[game % len(env.possible_agents)]
            total = 0.0
            for agent in env.agent_iter():
                obs, reward, terminated, truncated, _ = env.last()
                if agent == me:
                    total += float(reward)
                if terminated or truncated:
                    env.step(None)
                    continue
                env.step((player if agent == me else opponent)(obs, rng))
            key = "win_rate" if total > 0 else "draw_rate" if total == 0 else "loss_rate"
            tally[key] += 1 / games
    finally:
        env.close()
    return tally
