"""Multi-agent environments: a dict-keyed API (RLlib's), a built-in
``MultiAgentCartPole``, and an adapter for PettingZoo's parallel API.

One ``step`` takes ``{agent_id: action}`` for the agents that act and returns
five dicts keyed by agent id: observations, rewards, terminateds, truncateds
and infos. ``terminateds["__all__"]`` / ``truncateds["__all__"]`` say that
the whole episode is over. An agent that has finished gets its final
observation once (with its done flag) and does not act again this episode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from ...errors import ConfigError

__all__ = ["ALL", "MultiAgentCartPole", "MultiAgentEnv", "PettingZooEnv", "make_multi_agent_env"]

ALL = "__all__"

StepResult = tuple[dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]


class MultiAgentEnv:
    """Base class: set ``possible_agents``, ``observation_spaces`` and ``action_spaces``."""

    possible_agents: list[str]
    observation_spaces: dict[str, gym.Space[Any]]
    action_spaces: dict[str, gym.Space[Any]]

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode: observations and infos of the agents that act first."""
        raise NotImplementedError

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        """Apply ``{agent: action}``; five dicts back, with ``__all__`` in terminateds/truncateds."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the environment's resources."""
        pass


class MultiAgentCartPole(MultiAgentEnv):
    """``num_agents`` independent CartPole-v1 games, one per agent; the episode
    lasts until every agent's pole has fallen or reached the time limit."""

    def __init__(self, num_agents: int = 2) -> None:
        if num_agents < 1:
            raise ConfigError(f"MultiAgentCartPole: num_agents must be >= 1, not {num_agents}")
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.envs = {a: gym.make("CartPole-v1") for a in self.possible_agents}
        self.observation_spaces = {a: e.observation_space for a, e in self.envs.items()}
        self.action_spaces = {a: e.action_space for a, e in self.envs.items()}
        self.alive: set[str] = set()

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        self.alive = set(self.possible_agents)
        obs = {}
        for i, (agent, env) in enumerate(self.envs.items()):
            obs[agent], _ = env.reset(seed=None if seed is None else seed + i)
        return obs, {a: {} for a in obs}

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        for agent, action in actions.items():
            if agent not in self.alive:
                raise ValueError(f"MultiAgentCartPole: {agent} has finished and cannot act")
            o, r, term, trunc, info = self.envs[agent].step(action)
            obs[agent], rewards[agent], infos[agent] = o, float(r), info
            terminateds[agent], truncateds[agent] = term, trunc
            if term or trunc:
                self.alive.discard(agent)
        over = not self.alive
        all_terminated = over and all(terminateds.get(a, True) for a in actions)
        terminateds[ALL] = all_terminated
        truncateds[ALL] = over and not all_terminated
        return obs, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


class PettingZooEnv(MultiAgentEnv):
    """Wraps a PettingZoo ``ParallelEnv`` (``reset(seed=)``, ``step(actions)``,
    ``agents``, ``observation_space(agent)``, ``action_space(agent)``)."""

    def __init__(self, env: Any) -> None:
        for name in ("reset", "step", "possible_agents", "observation_space", "action_space"):
            if not hasattr(env, name):
                raise ConfigError(f"env: {type(env).__name__} is not a PettingZoo ParallelEnv (no {name!r})")
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, infos = self.env.reset(seed=seed)
        return dict(obs), dict(infos)

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        obs, rewards, terminations, truncations, infos = self.env.step(dict(actions))
        terminateds = {a: bool(v) for a, v in terminations.items()}
        truncateds = {a: bool(v) for a, v in truncations.items()}
        over = not self.env.agents
        terminateds[ALL] = over and all(terminateds.values())
        truncateds[ALL] = over and not terminateds[ALL]
        return dict(obs), {a: float(r) for a, r in rewards.items()}, terminateds, truncateds, dict(infos)

    def close(self) -> None:
        self.env.close()


def make_multi_agent_env(spec: Callable[[], Any]) -> MultiAgentEnv:
    """Build a multi-agent environment from a callable returning a
    ``MultiAgentEnv`` or a PettingZoo ``ParallelEnv`` (wrapped)."""
    if not callable(spec):
        raise ConfigError(f"env: expected a callable that returns a multi-agent env, not {type(spec).__name__}")
    env = spec()
    if isinstance(env, MultiAgentEnv):
        return env
    return PettingZooEnv(env)
