"""Which observation and action spaces asyncflow takes, checked in the driver.

Observations: ``Box`` of any shape (images included), ``Discrete``,
``MultiDiscrete``, ``MultiBinary``, and ``Dict`` / ``Tuple`` of those, nested.
Those are the spaces the built-in encoders handle (``models/encoders.py``).
Any other leaf (``Text``, ``Sequence``, ``Graph``) travels as a numpy object
array and needs the user's own model (``model=``), which receives it as it is.

Actions, by algorithm family:

============  ===================================================
family        action spaces
============  ===================================================
actor-critic  ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Box`` (any shape)
Q-learning    ``Discrete``
continuous    ``Box`` (any shape, finite bounds)
============  ===================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from ...errors import ConfigError

__all__ = [
    "env_actions",
    "ARRAY_LEAVES",
    "Family",
    "check_action_space",
    "check_observation_space",
    "is_image",
    "space_leaves",
]

Family = Literal["actor_critic", "q", "continuous"]

ARRAY_LEAVES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
"""Leaf spaces that travel as numeric arrays and have a built-in encoder."""

_ACTIONS: dict[Family, tuple[type[gym.Space[Any]], ...]] = {
    "actor_critic": (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary, gym.spaces.Box),
    "q": (gym.spaces.Discrete,),
    "continuous": (gym.spaces.Box,),
}


def space_leaves(space: gym.Space[Any], path: str = "") -> Iterator[tuple[str, gym.Space[Any]]]:
    """``(path, leaf space)`` pairs of a possibly nested space; paths look like ``["image"]`` or ``[0]``."""
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from space_leaves(sub, f"{path}[{key!r}]")
    elif isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            yield from space_leaves(sub, f"{path}[{i}]")
    else:
        yield path, space


def is_image(space: gym.Space[Any]) -> bool:
    """A ``Box`` of rank 3 (channels first or last), or a rank-2 ``uint8`` ``Box`` (one channel)."""
    if not isinstance(space, gym.spaces.Box):
        return False
    rank = len(space.shape)
    return rank == 3 or (rank == 2 and space.dtype == np.uint8)


def check_observation_space(space: gym.Space[Any], *, custom_model: bool, field: str = "env") -> None:
    """ConfigError for an observation leaf that no built-in encoder handles (unless the user brings a model)."""
    for path, leaf in space_leaves(space):
        if isinstance(leaf, ARRAY_LEAVES) or custom_model:
            continue
        raise ConfigError(
            f"{field}: observations{path} are {leaf}, which no built-in encoder handles; pass model= "
            "a torch module class or factory that takes them (it receives them as a numpy object array), "
            "or wrap the env to return Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple observations"
        )


def check_action_space(space: gym.Space[Any], family: Family, algorithm: str, field: str = "env") -> None:
    """ConfigError naming the space and the algorithm when ``algorithm`` cannot act in ``space``."""
    allowed = _ACTIONS[family]
    if not isinstance(space, allowed):
        kinds = ", ".join(t.__name__ for t in allowed)
        raise ConfigError(f"{field}: {algorithm} takes {kinds} actions, not {space}")
    if isinstance(space, gym.spaces.Box):
        if not np.issubdtype(space.dtype, np.floating):
            raise ConfigError(f"{field}: {algorithm} needs a floating-point Box of actions, not {space}")
        bounded = np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))
        if family == "continuous" and not bounded:
            raise ConfigError(f"{field}: {algorithm} needs finite action bounds, not {space}")


def env_actions(space: gym.Space[Any], actions: np.ndarray) -> np.ndarray:
    """Sampled actions as ``env.step`` takes them: a ``Discrete`` or ``MultiDiscrete`` start
    offset added, a ``Box`` sample clipped to its bounds in the space's dtype."""
    if isinstance(space, gym.spaces.Discrete):
        return actions + int(space.start) if space.start else actions
    if isinstance(space, gym.spaces.MultiDiscrete):
        return actions + space.start if np.any(space.start) else actions
    if isinstance(space, gym.spaces.Box):
        return np.clip(actions, space.low, space.high).astype(space.dtype, copy=False)  # type: ignore[no-any-return]
    return actions
