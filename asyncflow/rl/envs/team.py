"""A team of agents as one gymnasium env (RLlib's agent groups), for algorithms that learn a
team's joint value from a global state (QMIX, VDN).

``TeamEnv(multi_agent_env)``: every agent acts each step; the observation is
``{"obs": (n_agents, obs_dim), "state": (state_dim,)}`` (the env's ``state()`` where it has
one, PettingZoo's parallel envs do, else the agents' observations side by side); the action
is one ``Discrete`` choice per agent (``MultiDiscrete``); the reward is the team's: the mean
of the agents' rewards (``reward="mean"``: cooperative envs give each agent the team reward)
or their sum; the episode ends when the env says all agents are done."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import ConfigError
from .multi_agent import ALL, make_multi_agent_env

__all__ = ["TeamEnv", "agent_spaces"]


def agent_spaces(
    observation_space: gym.Space[Any], action_space: gym.Space[Any]
) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """What one agent's network sees of a team's spaces: its observation and a one-hot of
    its index side by side, and its own ``Discrete`` action."""
    if not (isinstance(observation_space, gym.spaces.Dict) and isinstance(action_space, gym.spaces.MultiDiscrete)):
        raise ConfigError(f"env: a team's spaces are a Dict of 'obs' and 'state' and MultiDiscrete actions (a "
                          f"TeamEnv), not {observation_space} and {action_space}")  # fmt: skip
    n, dim = observation_space["obs"].shape or (0, 0)
    low = np.concatenate([np.full(dim, -np.inf), np.zeros(n)]).astype(np.float32)
    high = np.concatenate([np.full(dim, np.inf), np.ones(n)]).astype(np.float32)
    return gym.spaces.Box(low, high), gym.spaces.Discrete(int(action_space.nvec[0]))


class TeamEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """The agents of a multi-agent env as one team (the module docstring)."""

    def __init__(self, env: Callable[[], Any] | str, reward: str = "mean") -> None:
        if reward not in ("mean", "sum"):
            raise ConfigError(f"team_reward: must be 'mean' or 'sum', got {reward!r}")
        self.env = make_multi_agent_env(env)
        self.agents = list(self.env.possible_agents)
        self.reward = reward
        obs_spaces = [self.env.observation_spaces[a] for a in self.agents]
        act_spaces = [self.env.action_spaces[a] for a in self.agents]
        boxes = [s for s in obs_spaces if isinstance(s, gym.spaces.Box) and len(s.shape) == 1]
        if len(boxes) != len(obs_spaces) or len({s.shape for s in boxes}) != 1:
            raise ConfigError(f"env: a team's agents need flat Box observations of one shape, got {obs_spaces}")
        discrete = [s for s in act_spaces if isinstance(s, gym.spaces.Discrete)]
        if len(discrete) != len(act_spaces) or len({int(s.n) for s in discrete}) != 1:
            raise ConfigError(f"env: a team's agents need Discrete actions of one size, got {act_spaces}")
        self.inner = getattr(self.env, "env", self.env)  # a PettingZoo env under the adapter
        state = getattr(self.inner, "state_space", None)
        n, dim = len(self.agents), int(boxes[0].shape[0])
        state_shape = state.shape if isinstance(state, gym.spaces.Box) else (n * dim,)
        self.observation_space: gym.spaces.Dict = gym.spaces.Dict(  # type: ignore[assignment]
            {"obs": gym.spaces.Box(-np.inf, np.inf, (n, dim), np.float32),
             "state": gym.spaces.Box(-np.inf, np.inf, state_shape, np.float32)}
        )  # fmt: skip
        self.action_space = gym.spaces.MultiDiscrete([int(discrete[0].n)] * n)
        self.starts = [int(s.start) for s in discrete]
        self.obs_dim = dim

    def _observe(self, obs: dict[str, Any]) -> dict[str, np.ndarray]:
        missing = [a for a in self.agents if a not in obs]
        if missing:
            raise ValueError(f"TeamEnv: agents {missing} did not observe: a team acts together every step")
        stacked = np.stack([np.asarray(obs[a], np.float32) for a in self.agents])
        state = getattr(self.inner, "state", None)
        global_state = np.asarray(state(), np.float32).ravel() if callable(state) else stacked.ravel()
        return {"obs": stacked, "state": global_state}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        obs, _ = self.env.reset(seed=seed)
        return self._observe(obs), {}

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        actions = {a: int(action[i]) + self.starts[i] for i, a in enumerate(self.agents)}
        obs, rewards, terminateds, truncateds, _ = self.env.step(actions)
        values = [float(rewards.get(a, 0.0)) for a in self.agents]
        reward = float(np.mean(values) if self.reward == "mean" else np.sum(values))
        terminated, truncated = bool(terminateds.get(ALL, False)), bool(truncateds.get(ALL, False))
        early = [a for a in self.agents if terminateds.get(a) or truncateds.get(a)]
        if early and not (terminated or truncated):
            raise ValueError(f"TeamEnv: agents {early} finished before the others: a team acts together every "
                             "step until the episode ends")  # fmt: skip
        if terminated or truncated:
            last = {a: obs.get(a, np.zeros(self.obs_dim, np.float32)) for a in self.agents}
            return self._observe(last), reward, terminated, truncated, {}
        return self._observe(obs), reward, False, False, {}

    def close(self) -> None:
        self.env.close()
