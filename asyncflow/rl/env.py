"""Building environments from a gymnasium id or a callable, with early checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from ..errors import ConfigError

__all__ = ["EnvSpec", "make_env", "probe_spaces"]

EnvSpec = str | Callable[[], gym.Env[Any, Any]]


def make_env(spec: EnvSpec) -> gym.Env[Any, Any]:
    """Build a gymnasium env from an id or a callable; ConfigError if it cannot be built."""
    if isinstance(spec, str):
        try:
            return gym.make(spec)
        except gym.error.Error as exc:
            raise ConfigError(f"env: unknown environment {spec!r} ({exc})") from exc
    if callable(spec):
        env = spec()
        if not isinstance(env, gym.Env):
            raise ConfigError(f"env: the callable returned {type(env).__name__}, not a gymnasium.Env")
        return env
    raise ConfigError(f"env: expected a gymnasium id or a callable, not {type(spec).__name__}")


def probe_spaces(spec: EnvSpec) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """Build the environment once in the driver to learn (and check) its spaces."""
    env = make_env(spec)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()
