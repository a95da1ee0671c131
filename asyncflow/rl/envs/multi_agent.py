"""Multi-agent environments: a dict-keyed API (RLlib's), a built-in
``MultiAgentCartPole``, and adapters for PettingZoo's parallel API and its
turn-based AEC API.

One ``step`` takes ``{agent_id: action}`` for the agents that act and returns
five dicts keyed by agent id: observations, rewards, terminateds, truncateds
and infos. ``terminateds["__all__"]`` / ``truncateds["__all__"]`` say that
the whole episode is over. An agent that has finished gets its final
observation once (with its done flag) and does not act again this episode.
Only the agents in the observations act next: all of them in a parallel env,
one in a turn-based game; rewards may go to any agent, acting or not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from ...errors import ConfigError

__all__ = ["ALL", "MultiAgentCartPole", "MultiAgentEnv", "PettingZooAECEnv", "PettingZooEnv", "make_multi_agent_env"]

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


class PettingZooAECEnv(MultiAgentEnv):
    """Wraps a PettingZoo ``AECEnv`` (turn-based: ``agent_selection``, ``observe``): each step
    the one agent whose turn it is acts; the rewards of that move go to every agent (the
    loser of a game gets its -1 on the winner's move); the agents the move ended get their
    final observations, and their dead steps are taken here."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        self.env.reset(seed=seed)
        agent = self.env.agent_selection
        return {agent: self.env.observe(agent)}, {agent: dict(self.env.infos.get(agent, {}))}

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        env, agent = self.env, self.env.agent_selection
        if set(actions) != {agent}:
            raise ValueError(f"PettingZooAECEnv: it is the turn of {agent!r}, got actions for {sorted(actions)}")
        env.step(actions[agent])
        rewards = {a: float(r) for a, r in env.rewards.items()}
        obs: dict[str, Any] = {}
        terminateds: dict[str, bool] = {}
        truncateds: dict[str, bool] = {}
        while env.agents and (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            done = env.agent_selection
            obs[done] = env.observe(done)
            terminateds[done], truncateds[done] = bool(env.terminations[done]), bool(env.truncations[done])
            env.step(None)  # PettingZoo's dead step: the agent leaves
        if env.agents:
            obs[env.agent_selection] = env.observe(env.agent_selection)
        terminateds[ALL] = not env.agents and all(terminateds.values())
        truncateds[ALL] = not env.agents and not terminateds[ALL]
        infos = {a: dict(env.infos.get(a, {})) for a in obs}
        return obs, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        self.env.close()


def make_multi_agent_env(spec: Callable[[], Any] | str) -> MultiAgentEnv:
    """Build a multi-agent environment from a callable (or ``"module:function"`` naming one)
    returning a ``MultiAgentEnv``, a PettingZoo ``ParallelEnv`` or a PettingZoo ``AECEnv``."""
    if isinstance(spec, str) and ":" not in spec:
        raise ConfigError(f"env: expected a callable (or 'module:function') that returns a multi-agent env, "
                          f"not {spec!r}")  # fmt: skip
    if isinstance(spec, str):
        from .make import import_attribute

        spec = import_attribute(spec, "env")
    if not callable(spec):
        raise ConfigError(f"env: expected a callable that returns a multi-agent env, not {type(spec).__name__}")
    env = spec()
    if isinstance(env, MultiAgentEnv):
        return env
    if all(callable(getattr(type(env), name, None)) for name in ("observe", "last", "agent_iter")):
        return PettingZooAECEnv(env)
    if all(hasattr(env, name) for name in ("reset", "step", "possible_agents", "observation_space", "action_space")):
        return PettingZooEnv(env)
    raise ConfigError(f"env: {type(env).__name__} is not a multi-agent env (a MultiAgentEnv, or a PettingZoo "
                      "ParallelEnv or AECEnv)")  # fmt: skip
