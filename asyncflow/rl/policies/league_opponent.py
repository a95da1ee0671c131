"""``LeagueOpponent``: a self-play league's ``"opponent"`` in a worker, a snapshot or a fixed player.

The league (``League.players``) may hold fixed players beside ``main``'s snapshots: functions
of one observation and a random generator that return a legal action, such as
``rl.envs.two_player.connect_four_lookahead``. The worker's ``"opponent"`` policy is then this
wrapper: a snapshot's weights make it act with the network, ``PlayerTurn(i)`` with fixed player
``i``; either message comes through ``set_weights``, as the league broadcasts it. A fixed
player's steps carry log-probabilities and values of zero: the opponent is never trained.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from ..data.state import get_state, set_state
from ..data.tree import Tree, tree_len, tree_map
from ..policy import FlatWeights, PolicyFactory, WorkerPolicy

__all__ = ["LeagueOpponent", "PlayerTurn"]


@dataclass(frozen=True)
class PlayerTurn:
    """The league's message to the workers: the opponent is now fixed player ``index``."""

    index: int


class LeagueOpponent:
    """The network policy ``factory`` builds, or one of ``players`` (module docstring)."""

    def __init__(
        self,
        factory: PolicyFactory,
        players: Sequence[Callable[[Any, np.random.Generator], int]],
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        seed: int = 0,
        worker_index: int = 0,
    ) -> None:
        self.network: WorkerPolicy = factory(observation_space, action_space, seed=seed, worker_index=worker_index)
        self.players = list(players)
        self.player: int | None = None
        """The fixed player acting now (None: the network)."""
        self.rng = np.random.default_rng([seed, worker_index, 0x1EA6])

    def _play(self, obs: Tree) -> np.ndarray:
        assert self.player is not None
        player = self.players[self.player]
        return np.array([player(tree_map(lambda x, i=i: x[i], obs), self.rng) for i in range(tree_len(obs))])

    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.player is None:
            return self.network.compute_actions(obs)
        n = tree_len(obs)
        return self._play(obs), np.zeros(n, np.float32), np.zeros(n, np.float32)

    def greedy_actions(self, obs: Tree) -> np.ndarray:
        return self.network.greedy_actions(obs) if self.player is None else self._play(obs)

    def values(self, obs: Tree) -> np.ndarray:
        return self.network.values(obs) if self.player is None else np.zeros(tree_len(obs), np.float32)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        return self.network.env_actions(actions) if self.player is None else actions

    def get_weights(self) -> FlatWeights:
        return self.network.get_weights()

    def set_weights(self, weights: FlatWeights | PlayerTurn) -> None:
        """A snapshot's weights (the network acts), or ``PlayerTurn`` (a fixed player acts)."""
        if isinstance(weights, PlayerTurn):
            if not 0 <= weights.index < len(self.players):
                raise ValueError(f"fixed player {weights.index} of {len(self.players)}")
            self.player = weights.index
        else:
            self.player = None
            self.network.set_weights(weights)

    def get_state(self) -> dict[str, Any]:
        return {"network": get_state(self.network), "player": self.player}

    def set_state(self, state: dict[str, Any]) -> None:
        set_state(self.network, state["network"])
        self.player = state["player"]
