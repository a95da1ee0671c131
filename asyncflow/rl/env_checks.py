"""Checking what environments return, every step, so a run never trains on garbage.

An observation whose shape differs from its space would be broadcast into the
worker's buffer without a word (shape ``(1,)`` into ``(4,)``), a float into a
``uint8`` space would be truncated, and a NaN poisons every update after it.
``EnvChecker`` turns each into an ``EnvOutputError`` that names the env, the
worker, the sub-environment, the field and the step.

The cost is kept off the per-env path: each observation gets a shape and
dtype-kind test (a tuple compare and a dict lookup) before it is written;
NaN and inf are looked for once per step, over the whole batch of
observations and rewards, with one ``np.isfinite`` call each. Turn it off
with ``check_env_output=False`` for an env you trust.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import EnvOutputError
from .spaces import space_leaves
from .tree import Tree, tree_leaves

__all__ = ["EnvChecker", "env_name"]

OPT_OUT = "set check_env_output=False to skip these checks"


def env_name(spec: Any) -> str:
    """How messages name an env given as an id, a callable (a partial: its function) or an instance."""
    if isinstance(spec, str):
        return spec
    while isinstance(spec, functools.partial):
        spec = spec.func
    return str(getattr(spec, "__qualname__", None) or type(spec).__name__)


def _leaf_check(space: gym.Space[Any]) -> Callable[[Any], str | None]:
    """A test of one leaf value against its space: None if fine, else what is wrong."""
    if isinstance(space, gym.spaces.Discrete):
        low, high = int(space.start), int(space.start) + int(space.n)

        def discrete(x: Any) -> str | None:
            if isinstance(x, np.ndarray) and x.shape not in ((), (1,)):
                return f"an array of shape {x.shape}, not one integer"
            if not np.issubdtype(np.asarray(x).dtype, np.integer):
                return f"a {type(x).__name__} {x!r}, not an integer"
            return None if low <= int(x) < high else f"{int(x)}, outside [{low}, {high})"

        return discrete
    if isinstance(space, gym.spaces.Box | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary):
        shape, dtype = tuple(space.shape), np.dtype(space.dtype)

        def array(x: Any) -> str | None:
            x_shape = getattr(x, "shape", None)
            if x_shape is None:
                x = np.asarray(x)
                x_shape = x.shape
            if x_shape != shape:
                return f"shape {x_shape}, not {shape}"
            x_dtype = x.dtype
            if x_dtype != dtype and not np.can_cast(x_dtype, dtype, "same_kind"):
                return f"dtype {x_dtype}, which does not fit {dtype}"
            return None

        return array
    return lambda x: None  # Text, Sequence, Graph: the user's model takes them as they are


class EnvChecker:
    """Checks one worker's observations and rewards against the observation space."""

    def __init__(self, env: Any, space: gym.Space[Any], worker_index: int) -> None:
        self.where = f"env {env_name(env)!r} (worker {worker_index}"
        self.leaves = [(path, _leaf_check(leaf)) for path, leaf in space_leaves(space)]
        self.flat = len(self.leaves) == 1 and self.leaves[0][0] == ""
        floats = [isinstance(s, gym.spaces.Box) and np.issubdtype(s.dtype, np.floating) for _, s in space_leaves(space)]
        self.float_leaves = [i for i, is_float in enumerate(floats) if is_float]

    def _fail(self, who: int | str, step: int, what: str) -> EnvOutputError:
        lane = f"sub-env {who}" if isinstance(who, int) else f"agent {who!r}"
        return EnvOutputError(f"{self.where}, {lane}) returned {what} at step {step} of its episode; {OPT_OUT}")

    def observation(self, obs: Any, who: int | str, step: int) -> None:
        """Raise EnvOutputError unless ``obs`` (one env's or agent's) fits the space's shapes
        and dtypes; ``who`` is the sub-env index or the agent id."""
        if self.flat:
            problem = self.leaves[0][1](obs)
            if problem is not None:
                raise self._fail(who, step, f"an observation of {problem}")
            return
        for (path, check), value in zip(self.leaves, tree_leaves(obs), strict=False):
            problem = check(value)
            if problem is not None:
                raise self._fail(who, step, f"observation{path} of {problem}")

    def finite(self, obs: Any, reward: float, who: int | str, step: int) -> None:
        """One observation and reward (of a sub-env or an agent): raise EnvOutputError on a NaN or inf."""
        if not np.isfinite(reward):
            raise self._fail(who, step, f"a reward of {reward}")
        leaves = list(tree_leaves(obs))
        for i in self.float_leaves:
            if not np.isfinite(leaves[i]).all():
                raise self._fail(who, step, f"a NaN or inf in observation{self.leaves[i][0]}")

    def finite_rewards(self, rewards: np.ndarray, steps: np.ndarray) -> None:
        """Raise EnvOutputError for a NaN or inf among one step's rewards (one per lane);
        ``steps`` are the lanes' episode steps."""
        bad = ~np.isfinite(rewards)
        if bad.any():
            lane = int(np.flatnonzero(bad)[0])
            raise self._fail(lane, int(steps[lane]), f"a reward of {rewards[lane]}")

    def finite_observations(self, obs: Tree, steps: np.ndarray, what: str = "observation") -> None:
        """Raise EnvOutputError for a NaN or inf in a batch of observations (one per lane,
        already written in the space's dtype)."""
        if not self.float_leaves:
            return
        leaves = list(tree_leaves(obs))
        for i in self.float_leaves:
            x = leaves[i]
            ok = np.isfinite(x.reshape(len(x), -1)).all(axis=1)
            if not ok.all():
                lane = int(np.flatnonzero(~ok)[0])
                raise self._fail(lane, int(steps[lane]), f"a NaN or inf in {what}{self.leaves[i][0]}")
