"""Building environments from a gymnasium id or a callable, with early checks.

A callable may return a gymnasium env or an ``AsyncEnv`` (``async_env.py``);
``probe_env`` builds one in the driver and says which it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from ...errors import ConfigError
from .async_env import AsyncEnv, is_async_env, run_coroutine

__all__ = [
    "EnvProbe",
    "EnvSpec",
    "check_vector_env",
    "import_attribute",
    "make_async_env",
    "make_env",
    "make_vector_env",
    "probe_env",
    "probe_spaces",
    "resolve_env",
]

EnvSpec = str | Callable[[], gym.Env[Any, Any] | AsyncEnv]
"""An env as a config names it: a gymnasium id, or a callable that returns a gymnasium env or an ``AsyncEnv``."""


def make_env(spec: EnvSpec) -> gym.Env[Any, Any]:
    """Build a gymnasium env from an id or a callable; ConfigError if it cannot be built."""
    if isinstance(spec, str):
        if ":" in spec and "/" not in spec.partition(":")[0]:
            _import(spec.partition(":")[0], "env")  # gymnasium's module:EnvId; a failing import is one line
        try:
            return gym.make(spec)
        except gym.error.Error as exc:
            raise ConfigError(f"env: unknown environment {spec!r} ({exc})") from exc
    env = _call(spec)
    if not isinstance(env, gym.Env):
        raise ConfigError(f"env: the callable returned an AsyncEnv ({type(env).__name__}) where a gymnasium.Env "
                          "is needed")  # fmt: skip
    return env


def make_async_env(spec: EnvSpec) -> AsyncEnv:
    """Build an ``AsyncEnv`` from a callable; ConfigError if it returns anything else."""
    env = _call(spec)
    if isinstance(env, gym.Env):
        raise ConfigError(f"env: the callable returned a gymnasium.Env ({type(env).__name__}) where an AsyncEnv "
                          "is needed")  # fmt: skip
    return env


def _call(spec: EnvSpec) -> gym.Env[Any, Any] | AsyncEnv:
    if not callable(spec):
        raise ConfigError(f"env: expected a gymnasium id or a callable, not {type(spec).__name__}")
    env = spec()
    if isinstance(env, gym.Env) or is_async_env(env):
        return env
    raise ConfigError(f"env: the callable returned {type(env).__name__}, neither a gymnasium.Env nor an AsyncEnv "
                      "(async def reset and step)")  # fmt: skip


def check_vector_env(spec: EnvSpec) -> None:
    """ConfigError unless ``spec`` is a gymnasium id with its own vectorized implementation
    (a ``vector_entry_point``, as CartPole-v1 has), which ``make_vector_env`` builds."""
    if not isinstance(spec, str):
        raise ConfigError("vector_env: needs a gymnasium id whose vectorized implementation gymnasium knows, "
                          "not a callable")  # fmt: skip
    try:
        registered = gym.spec(spec)
    except gym.error.Error as exc:
        raise ConfigError(f"env: unknown environment {spec!r} ({exc})") from exc
    if registered.vector_entry_point is None:
        raise ConfigError(f"vector_env: {spec!r} has no vectorized implementation in gymnasium "
                          "(no vector_entry_point); leave vector_env off")  # fmt: skip


def make_vector_env(spec: EnvSpec, num_envs: int) -> gym.vector.VectorEnv[Any, Any, Any]:
    """``num_envs`` lanes of ``spec``'s own vectorized implementation, in this process.

    Only ``NEXT_STEP`` autoreset and array observations are taken: what the
    rollout worker's vector lanes handle (see ``sampling/vector_lanes.py``).
    """
    check_vector_env(spec)
    assert isinstance(spec, str)
    vector = gym.make_vec(spec, num_envs=num_envs, vectorization_mode="vector_entry_point")
    mode = vector.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    space = vector.single_observation_space
    if mode != gym.vector.AutoresetMode.NEXT_STEP or not isinstance(space, gym.spaces.Box):
        vector.close()
        raise ConfigError(f"vector_env: {spec!r}'s vector env resets with {mode} and observes {space}; "
                          "only NEXT_STEP autoreset and Box observations are supported")  # fmt: skip
    return vector


@dataclass(frozen=True)
class EnvProbe:
    """What the driver learns from building an env once."""

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    is_async: bool
    """The env is an ``AsyncEnv`` (its workers step it with ``await``)."""


def probe_env(spec: EnvSpec) -> EnvProbe:
    """Build the environment once in the driver to learn (and check) its spaces and kind;
    an ``AsyncEnv`` is closed without a reset (``run_coroutine``)."""
    env = make_env(spec) if isinstance(spec, str) else _call(spec)
    try:
        spaces = (getattr(env, "observation_space", None), getattr(env, "action_space", None))
        for name, space in zip(("observation_space", "action_space"), spaces, strict=True):
            if not isinstance(space, gym.Space):
                raise ConfigError(f"env: {type(env).__name__}.{name} is {space!r}, not a gymnasium space")
        return EnvProbe(spaces[0], spaces[1], is_async=not isinstance(env, gym.Env))  # type: ignore[arg-type]
    finally:
        if isinstance(env, gym.Env):
            env.close()
        else:
            run_coroutine(env.close())


def probe_spaces(spec: EnvSpec) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """Build the environment once in the driver to learn (and check) its spaces."""
    probe = probe_env(spec)
    return probe.observation_space, probe.action_space


def _import(module_name: str, field: str) -> Any:
    """Import ``module_name``; every way that can fail is a one-line ConfigError naming ``field``."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ConfigError(f"{field}: no module {module_name!r} on the Python path (run from its folder, "
                              "or add it to PYTHONPATH)") from None  # fmt: skip
        raise ConfigError(f"{field}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    except OSError as exc:  # a name longer than the file system takes (ENAMETOOLONG), ...
        raise ConfigError(f"{field}: cannot import module {module_name[:60]!r}...: {exc.strerror or exc}") from None
    except Exception as exc:
        raise ConfigError(f"{field}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc


def import_attribute(spec: str, field: str) -> Any:
    """The object ``"package.module:name"`` names; ConfigError naming ``field`` if it cannot be imported."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{field}: expected 'module:name', got {spec!r}")
    module = _import(module_name, field)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{field}: module {module_name!r} has no {attr!r}") from None


def resolve_env(spec: str) -> EnvSpec:
    """An env as the command line and config files name it: a gymnasium id (``CartPole-v1``,
    ``ALE/Pong-v5``), ``module:function`` (a callable that builds the env), or gymnasium's
    own ``module:EnvId`` (the module registers the id when imported)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr or "/" in module_name:
        return spec
    module = _import(module_name, "env")
    found = getattr(module, attr, None)
    if callable(found):
        return found  # type: ignore[no-any-return]
    if attr in gym.registry:
        return spec  # gym.make imports the module again in each worker, then makes the id
    raise ConfigError(f"env: module {module_name!r} has no {attr!r} (neither a function that builds an env "
                      "nor an env id it registers)")  # fmt: skip
