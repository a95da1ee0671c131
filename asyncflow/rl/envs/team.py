"""A team of agents as one gymnasium env (RLlib's agent groups), for algorithms that learn
from every agent's view at once: QMIX and VDN (a joint value from a global state), MADDPG
(critics that see every agent's observation and action).

Every agent acts each step; the reward is the team's: the mean of the agents' rewards
(``reward="mean"``: cooperative envs give each agent the team reward) or their sum; the
episode ends when the env says all agents are done (an agent that finishes before the others
is an error: a team acts together).

- ``TeamEnv`` (QMIX): the observation is ``{"obs": (n_agents, obs_dim), "state": (state_dim,)}``
  (the env's ``state()`` where it has one, PettingZoo's parallel envs do, else the agents'
  observations side by side); the action is one ``Discrete`` choice per agent (``MultiDiscrete``).
- ``BoxTeamEnv`` (MADDPG): the observation is a ``Dict`` of each agent's own (any sizes); the
  action one ``Box``, the agents' flattened ``Box`` actions side by side in the agents' order
  (``team_action_sizes`` gives each one's size)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import numpy as np

from ...errors import ConfigError
from .multi_agent import ALL, make_multi_agent_env

__all__ = ["BoxTeamEnv", "TeamEnv", "agent_spaces", "check_team", "team_action_sizes"]

TEAM_REWARDS = ("mean", "sum")


def check_team(algorithm: str, env: Any, reward: str) -> None:
    """A team algorithm's config: ``env`` a multi-agent env (a callable or ``"module:function"``)
    and ``team_reward`` one of ``TEAM_REWARDS``; a one-line ``ConfigError`` else."""
    if reward not in TEAM_REWARDS:
        raise ConfigError(f"team_reward: must be 'mean' or 'sum', got {reward!r}")
    if env is None or (isinstance(env, str) and ":" not in env):
        raise ConfigError(f"env: {algorithm} takes a multi-agent env (a callable or 'module:function'), not {env!r}")


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


def team_action_sizes(env: Callable[[], Any] | str) -> dict[str, int]:
    """Each agent's size in a ``BoxTeamEnv``'s joint action, in their order."""
    team = BoxTeamEnv(env)
    try:
        return dict(team.action_sizes)
    finally:
        team.close()


class _Team(gym.Env[Any, np.ndarray]):
    """What both teams share: the env, its agents in order, the team's reward, the ending."""

    def __init__(self, env: Callable[[], Any] | str, reward: str) -> None:
        check_team(type(self).__name__, env, reward)
        self.env = make_multi_agent_env(env)
        self.agents = list(self.env.possible_agents)
        self.reward = reward
        self.inner = getattr(self.env, "env", self.env)  # a PettingZoo env under the adapter

    def _observe(self, obs: dict[str, Any]) -> Any:
        raise NotImplementedError  # pragma: no cover

    def _last(self, agent: str) -> np.ndarray:
        """An agent's observation where the env gives none at the end."""
        raise NotImplementedError  # pragma: no cover

    def _check_everyone(self, obs: dict[str, Any]) -> None:
        missing = [a for a in self.agents if a not in obs]
        if missing:
            raise ValueError(f"{type(self).__name__}: agents {missing} did not observe: a team acts together "
                             "every step")  # fmt: skip

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        obs, _ = self.env.reset(seed=seed)
        return self._observe(obs), {}

    def _step(self, actions: dict[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, rewards, terminateds, truncateds, _ = self.env.step(actions)
        values = [float(rewards.get(a, 0.0)) for a in self.agents]
        reward = float(np.mean(values) if self.reward == "mean" else np.sum(values))
        terminated, truncated = bool(terminateds.get(ALL, False)), bool(truncateds.get(ALL, False))
        early = [a for a in self.agents if terminateds.get(a) or truncateds.get(a)]
        if early and not (terminated or truncated):
            raise ValueError(f"{type(self).__name__}: agents {early} finished before the others: a team acts "
                             "together every step until the episode ends")  # fmt: skip
        if terminated or truncated:
            last = {a: obs[a] if a in obs else self._last(a) for a in self.agents}
            return self._observe(last), reward, terminated, truncated, {}
        return self._observe(obs), reward, False, False, {}

    def close(self) -> None:
        self.env.close()


class TeamEnv(_Team):
    """The agents of a multi-agent env as one team of ``Discrete`` actors (the module docstring)."""

    def __init__(self, env: Callable[[], Any] | str, reward: str = "mean") -> None:
        super().__init__(env, reward)
        obs_spaces = [self.env.observation_spaces[a] for a in self.agents]
        act_spaces = [self.env.action_spaces[a] for a in self.agents]
        boxes = [s for s in obs_spaces if isinstance(s, gym.spaces.Box) and len(s.shape) == 1]
        if len(boxes) != len(obs_spaces) or len({s.shape for s in boxes}) != 1:
            raise ConfigError(f"env: a team's agents need flat Box observations of one shape, got {obs_spaces}")
        discrete = [s for s in act_spaces if isinstance(s, gym.spaces.Discrete)]
        if len(discrete) != len(act_spaces) or len({int(s.n) for s in discrete}) != 1:
            raise ConfigError(f"env: a team's agents need Discrete actions of one size, got {act_spaces}")
        state = getattr(self.inner, "state_space", None)
        n, dim = len(self.agents), int(boxes[0].shape[0])
        state_shape = state.shape if isinstance(state, gym.spaces.Box) else (n * dim,)
        self.observation_space = gym.spaces.Dict(
            {"obs": gym.spaces.Box(-np.inf, np.inf, (n, dim), np.float32),
             "state": gym.spaces.Box(-np.inf, np.inf, state_shape, np.float32)}
        )  # fmt: skip
        self.action_space = gym.spaces.MultiDiscrete([int(discrete[0].n)] * n)
        self.starts = [int(s.start) for s in discrete]
        self.obs_dim = dim

    def _observe(self, obs: dict[str, Any]) -> dict[str, np.ndarray]:
        self._check_everyone(obs)
        stacked = np.stack([np.asarray(obs[a], np.float32) for a in self.agents])
        state = getattr(self.inner, "state", None)
        global_state = np.asarray(state(), np.float32).ravel() if callable(state) else stacked.ravel()
        return {"obs": stacked, "state": global_state}

    def _last(self, agent: str) -> np.ndarray:
        return np.zeros(self.obs_dim, np.float32)

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self._step({a: int(action[i]) + self.starts[i] for i, a in enumerate(self.agents)})


class BoxTeamEnv(_Team):
    """The agents of a multi-agent env as one team of ``Box`` actors (the module docstring)."""

    def __init__(self, env: Callable[[], Any] | str, reward: str = "mean") -> None:
        super().__init__(env, reward)
        obs_spaces = {a: self.env.observation_spaces[a] for a in self.agents}
        act_spaces = {a: self.env.action_spaces[a] for a in self.agents}
        not_box = {a: s for a, s in act_spaces.items() if not isinstance(s, gym.spaces.Box)}
        if not_box:
            raise ConfigError(f"env: a team of continuous actors needs Box actions, but {not_box} (MPE2's envs take "
                              "continuous_actions=True)")  # fmt: skip
        flat = {a: s for a, s in obs_spaces.items() if not (isinstance(s, gym.spaces.Box) and len(s.shape) == 1)}
        if flat:
            raise ConfigError(f"env: a team's agents need flat Box observations, not {flat}")
        self.observation_space = gym.spaces.Dict(
            {a: gym.spaces.Box(-np.inf, np.inf, s.shape, np.float32) for a, s in obs_spaces.items()}
        )
        self.agents = list(self.observation_space.spaces)  # the Dict's order is the actions' order too
        boxes = [cast(gym.spaces.Box, act_spaces[a]) for a in self.agents]
        self.action_sizes = {a: int(np.prod(b.shape)) for a, b in zip(self.agents, boxes, strict=True)}
        self.shapes = [b.shape for b in boxes]
        self.dtypes = [b.dtype for b in boxes]
        self.action_space = gym.spaces.Box(
            np.concatenate([np.asarray(b.low, np.float32).ravel() for b in boxes]),
            np.concatenate([np.asarray(b.high, np.float32).ravel() for b in boxes]),
        )
        self.obs_sizes = {a: int(s.shape[0]) for a, s in obs_spaces.items()}  # type: ignore[index]

    def _observe(self, obs: dict[str, Any]) -> dict[str, np.ndarray]:
        self._check_everyone(obs)
        return {a: np.asarray(obs[a], np.float32) for a in self.agents}

    def _last(self, agent: str) -> np.ndarray:
        return np.zeros(self.obs_sizes[agent], np.float32)

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        parts = np.split(np.asarray(action, np.float32).ravel(), np.cumsum(list(self.action_sizes.values()))[:-1])
        layout = zip(self.agents, parts, self.shapes, self.dtypes, strict=True)
        return self._step({a: p.reshape(shape).astype(dtype, copy=False) for a, p, shape, dtype in layout})
