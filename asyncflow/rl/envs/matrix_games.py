"""Small cooperative games with known optima, for checking multi-agent value decomposition.

``TwoStepGame``: the two-step game of the QMIX paper (Rashid et al. 2018, Section 6.1 and
Table 1). Two agents; at the first step agent 1's action picks the game of the second step
(agent 2's does nothing): game 2A pays 7 whatever they play, game 2B pays
``[[0, 1], [1, 8]]``. The optimum is 8 (2B, both playing their second action); a team value
that is the sum of the agents' own (VDN) cannot represent 2B's payoffs and settles for 7.
Each agent observes the state (one-hot: first step, 2A, 2B); the reward is the team's, given
to each agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from .multi_agent import ALL, MultiAgentEnv, StepResult

__all__ = ["TwoStepGame"]

PAYOFF_2B = np.array([[0.0, 1.0], [1.0, 8.0]])


class TwoStepGame(MultiAgentEnv):
    """The QMIX paper's two-step cooperative game (the module docstring)."""

    def __init__(self) -> None:
        self.possible_agents = ["agent_0", "agent_1"]
        self.observation_spaces = {a: gym.spaces.Box(0.0, 1.0, (3,), np.float32) for a in self.possible_agents}
        self.action_spaces = {a: gym.spaces.Discrete(2) for a in self.possible_agents}
        self.state_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self._state = 0

    def state(self) -> np.ndarray:
        """The global state: one-hot of first step, game 2A, game 2B."""
        state: np.ndarray = np.eye(3, dtype=np.float32)[self._state]
        return state

    def _obs(self) -> dict[str, Any]:
        return {a: self.state() for a in self.possible_agents}

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        self._state = 0
        return self._obs(), {a: {} for a in self.possible_agents}

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        a0, a1 = int(actions["agent_0"]), int(actions["agent_1"])
        if self._state == 0:
            self._state = 1 if a0 == 0 else 2
            reward, done = 0.0, False
        else:
            reward = 7.0 if self._state == 1 else float(PAYOFF_2B[a0, a1])
            done = True
        agents = self.possible_agents
        terminateds: dict[str, bool] = {a: done for a in agents} | {ALL: done}
        return (self._obs(), {a: reward for a in agents}, terminateds, {a: False for a in agents} | {ALL: False},
                {a: {} for a in agents})  # fmt: skip
