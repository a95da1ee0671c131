"""Building environments from a gymnasium id or a callable, with early checks."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from ..errors import ConfigError

__all__ = ["EnvSpec", "import_attribute", "make_env", "probe_spaces"]

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


def import_attribute(spec: str, field: str) -> Any:
    """The object ``"package.module:name"`` names; ConfigError naming ``field`` if it cannot be imported."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{field}: expected 'module:name', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{field}: cannot import module {module_name!r} ({exc})") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{field}: module {module_name!r} has no {attr!r}") from None
