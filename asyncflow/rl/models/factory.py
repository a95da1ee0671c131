"""Building a family's model from a ``ModelSpec``, and checking it against its protocol.

``build_model`` is what workers and learners call; ``check_model`` is what
the driver calls once, before any process starts, so that a user's module
that does not honour its protocol (``protocols.py``) is a ``ConfigError``
naming the missing part or the wrong shape, not a traceback from a worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ...errors import ConfigError
from ..data.tree import tree_assign, tree_zeros
from ..envs.spaces import Family
from ..learners.device import to_tensors
from .builtin import ActorCriticNet, ContinuousNet, QNet
from .config import ModelConfig, ModelSpec
from .distributions import ActionHead

__all__ = ["build_model", "check_model", "model_name", "sample_observations"]


def model_name(spec: ModelSpec) -> str:
    """How error messages name a model spec."""
    if isinstance(spec, ModelConfig) and spec.custom is not None:
        spec = spec.custom
    if spec is None or isinstance(spec, ModelConfig):
        return "the built-in model"
    return getattr(spec, "__qualname__", None) or type(spec).__name__


def build_model(
    spec: ModelSpec,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    family: Family,
    *,
    hidden: Sequence[int] = (64, 64),
    dueling: bool = True,
    gaussian: bool = True,
    num_q: int = 2,
    sde: bool = False,
    log_std_init: float | None = None,
) -> nn.Module:
    """The model ``spec`` describes. The keyword arguments shape the built-in models only;
    a user's class or factory is called as ``spec(observation_space, action_space)``.
    ``log_std_init`` (None: the family's own, 0 for the actor-critic's, -3 for SAC's) starts
    a Gaussian's log-stds, or gSDE's (``sde``).

    Torch's global generator is put back as it was after the model's initialization: a
    model built in the driver (to check a config) leaves the process's randomness alone.
    Seed it around the call for given weights (``nets.seeded``)."""
    with torch.random.fork_rng(devices=[]):
        return _build(
            spec, observation_space, action_space, family, hidden, dueling, gaussian, num_q, sde, log_std_init
        )


def _build(
    spec: ModelSpec,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    family: Family,
    hidden: Sequence[int],
    dueling: bool,
    gaussian: bool,
    num_q: int,
    sde: bool,
    log_std_init: float | None,
) -> nn.Module:
    if isinstance(spec, ModelConfig) and spec.custom is not None:
        spec = spec.custom
    if spec is None or isinstance(spec, ModelConfig):
        config = spec or ModelConfig()
        if family == "actor_critic":
            return ActorCriticNet(observation_space, action_space, config, hidden, sde,
                                  0.0 if log_std_init is None else log_std_init)  # fmt: skip
        if family == "q":
            return QNet(observation_space, action_space, config, hidden, dueling)  # type: ignore[arg-type]
        return ContinuousNet(observation_space, action_space, config, hidden, gaussian, num_q,  # type: ignore[arg-type]
                             sde, -3.0 if log_std_init is None else log_std_init)  # fmt: skip
    if sde:
        raise ConfigError(f"use_sde: gSDE takes the built-in model (its features draw the noise), not "
                          f"{model_name(spec)}")  # fmt: skip
    try:
        model = spec(observation_space, action_space)
    except Exception as exc:
        raise ConfigError(f"model: {model_name(spec)}(observation_space, action_space) raised "
                          f"{type(exc).__name__}: {exc}") from exc  # fmt: skip
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model: {model_name(spec)} built a {type(model).__name__}, not a torch.nn.Module")
    return model


def sample_observations(space: gym.Space[Any], n: int) -> Any:
    """``n`` observations sampled from ``space``, batched as the workers batch them."""
    batch = tree_zeros(space, (n,))
    for i in range(n):
        tree_assign(batch, i, space.sample())
    return batch


def _shape(x: Any) -> str:
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def _call(name: str, what: str, fn: Any, *args: Any) -> Any:
    try:
        with torch.no_grad():
            return fn(*args)
    except Exception as exc:
        raise ConfigError(f"model: {name}{what} raised {type(exc).__name__} on a sample observation: {exc}") from exc


def check_model(
    model: nn.Module,
    family: Family,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    *,
    algorithm: str,
    name: str,
    gaussian: bool = True,
    num_q: int = 2,
) -> None:
    """ConfigError unless ``model`` honours ``family``'s protocol for these spaces (on 2 sampled rows)."""
    obs = to_tensors(sample_observations(observation_space, 2), torch.device("cpu"))
    if family == "continuous":
        _check_continuous(model, obs, action_space, algorithm, name, gaussian, num_q)
        return
    out = _call(name, ".forward", model, obs)
    if family == "q":
        n = int(action_space.n)  # type: ignore[attr-defined]
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, n):
            raise ConfigError(f"model: {name}.forward returned {_shape(out)}; {algorithm} needs Q values of shape "
                              f"(B, {n}) for {action_space} actions (here B=2)")  # fmt: skip
        return
    head = ActionHead(action_space)
    if not (isinstance(out, tuple | list) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
        got = f"a {type(out).__name__}" if not isinstance(out, tuple | list) else f"{len(out)} items"
        raise ConfigError(f"model: {name}.forward must return (distribution inputs, values) for {algorithm}, "
                          f"got {got}")  # fmt: skip
    inputs, values = out
    if tuple(inputs.shape) != (2, head.num_inputs) or not inputs.is_floating_point():
        raise ConfigError(
            f"model: {name}.forward returned distribution inputs of shape {_shape(inputs)}; {algorithm} needs "
            f"(B, {head.num_inputs}) floats for {action_space} actions (here B=2; see ActorCriticModel)"
        )
    if tuple(values.shape) not in ((2,), (2, 1)):
        raise ConfigError(f"model: {name}.forward returned values of shape {_shape(values)}; "
                          f"{algorithm} needs (B,) (here B=2)")  # fmt: skip


def _check_continuous(
    model: nn.Module, obs: Any, action_space: gym.Space[Any], algorithm: str, name: str, gaussian: bool, num_q: int
) -> None:
    for part in ("actor", "critic"):
        if not isinstance(getattr(model, part, None), nn.Module):
            raise ConfigError(f"model: {name} has no {part!r} submodule; {algorithm} needs a module with "
                              "'actor' and 'critic' (see ContinuousModel)")  # fmt: skip
    d = int(np.prod(action_space.shape))  # type: ignore[arg-type]
    width = 2 * d if gaussian else d
    out = _call(name, ".actor", model.actor, obs)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, width):
        what = "Gaussian means and log-stds" if gaussian else "pre-tanh actions"
        raise ConfigError(f"model: {name}.actor returned {_shape(out)}; {algorithm} needs {what} of shape "
                          f"(B, {width}) for {action_space} actions (here B=2)")  # fmt: skip
    q = _call(name, ".critic", model.critic, obs, torch.zeros(2, d))
    if not isinstance(q, torch.Tensor) or q.dim() != 2 or q.shape[0] != 2 or q.shape[1] < num_q:
        raise ConfigError(f"model: {name}.critic returned {_shape(q)}; {algorithm} needs Q values of shape "
                          f"(B, {num_q}) (one column per Q function, here B=2)")  # fmt: skip
