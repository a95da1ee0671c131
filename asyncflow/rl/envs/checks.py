"""Checking what environments return, every step, so a run never trains on garbage.

An observation whose shape differs from its space would be broadcast into the
worker's buffer without a word (shape ``(1,)`` into ``(4,)``), a float into a
``uint8`` space would be truncated, and a NaN poisons every update after it.
``EnvChecker`` turns each into an ``EnvOutputError`` that names the env, the
worker, the sub-environment, the field and the step.

What ``step`` and ``reset`` return is checked too: the reward is a real number
(a string ``"1.0"`` or an array of shape ``(1,)`` is not), ``terminated`` and
``truncated`` are bools, ``info`` a dict, and integer observations fit their
space's dtype (300 in a uint16 array is not a uint8 pixel: a cast would make it
44). An env written for the old gym API (``reset`` returning the observation
alone, ``step`` four values) is named as such.

The cost is kept off the per-env path: each observation of an array space
gets an inline type, shape and dtype test in the worker's loop before it is
written (no call unless it fails), the reward and the flags an inline test of
their type (``REWARD_TYPES``, ``FLAG_TYPES``); NaN and inf are looked for once per
``sample()``, with one sum over each buffer (a NaN or inf anywhere makes the
sum non-finite; only then are rows looked at, to name the lane and step).
The batch never leaves the worker, so nothing trains on it. A first version
that called a checker per env step and scanned every step cost 4-9% of
CartPole sampling (``benchmarks/sampling.py --only checks``). Turn it off
with ``check_env_output=False`` for an env you trust.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import EnvOutputError
from ..data.tree import Tree, tree_leaves
from .spaces import space_leaves

__all__ = ["FLAG_TYPES", "REWARD_TYPES", "EnvChecker", "env_name"]

OPT_OUT = "set check_env_output=False to skip these checks"
REWARD_TYPES = frozenset({float, int, np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
                          np.uint64, np.uint32, np.uint16, np.uint8})  # fmt: skip
"""The types a reward passes the workers' inline test with (``type(r) in REWARD_TYPES``);
anything else goes to ``EnvChecker.reward`` (a 0-d numeric array passes there)."""
FLAG_TYPES = frozenset({bool, np.bool_})
"""The types ``terminated`` and ``truncated`` may have."""


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
            if x_dtype != dtype:
                if not np.can_cast(x_dtype, dtype, "same_kind"):
                    return f"dtype {x_dtype}, which does not fit {dtype}"
                if dtype.kind in "iub" and not np.can_cast(x_dtype, dtype, "safe") and x.size:
                    low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
                    if x.min() < low or x.max() > high:
                        return (f"dtype {x_dtype} holding {x.min()} to {x.max()}, outside {dtype}'s [{low}, {high}] "
                                "(a cast would wrap them)")  # fmt: skip
            return None

        return array
    return lambda x: None  # Text, Sequence, Graph: the user's model takes them as they are


def _lane(who: int | str) -> str:
    return f"sub-env {who}" if isinstance(who, int) else f"agent {who!r}"


def _describe(out: Any) -> str:
    if isinstance(out, tuple):
        return f"a tuple of {len(out)}"
    return f"a {type(out).__name__}"


def _wrong_step(out: Any) -> str:
    """What is wrong with a ``step`` return that is not five values."""
    if isinstance(out, tuple) and len(out) == 4:
        return ("4 values from step() (observation, reward, done, info): the old gym API; gymnasium's step "
                "returns 5: (observation, reward, terminated, truncated, info)")  # fmt: skip
    return f"{_describe(out)} from step(), not (observation, reward, terminated, truncated, info)"


def _leaves_like(space: gym.Space[Any], obs: Any) -> Any:
    """The leaves of ``obs`` in the order of ``space_leaves(space)``: a dict is read by the
    space's keys, whatever order the env built it in."""
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from _leaves_like(sub, obs[key])
    elif isinstance(space, gym.spaces.Tuple):
        for sub, value in zip(space.spaces, obs, strict=True):
            yield from _leaves_like(sub, value)
    else:
        yield obs


class EnvChecker:
    """Checks one worker's observations and rewards against the observation space.

    ``step`` in messages is the sub-env's (or agent's) own step count since the
    worker started: it says which ``env.step`` call returned the bad output.
    """

    def __init__(self, env: Any, space: gym.Space[Any], worker_index: int) -> None:
        self.space = space
        self.where = f"env {env_name(env)!r} (worker {worker_index}"
        self.leaves = [(path, _leaf_check(leaf)) for path, leaf in space_leaves(space)]
        self.flat = len(self.leaves) == 1 and self.leaves[0][0] == ""
        floats = [isinstance(s, gym.spaces.Box) and np.issubdtype(s.dtype, np.floating) for _, s in space_leaves(space)]
        self.float_leaves = [i for i, is_float in enumerate(floats) if is_float]
        numeric = isinstance(space, gym.spaces.Box | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary)
        self.expected: tuple[tuple[int, ...], np.dtype[Any]] | None = (
            (tuple(space.shape), np.dtype(space.dtype)) if numeric else None  # type: ignore[arg-type]
        )
        """For an array space: the (shape, dtype) that passes without a call (the worker tests it inline)."""

    def _fail(self, who: int | str, step: int, what: str) -> EnvOutputError:
        return EnvOutputError(f"{self.where}, {_lane(who)}) returned {what} at its step {step}; {OPT_OUT}")

    def observation(self, obs: Any, who: int | str, step: int) -> None:
        """Raise EnvOutputError unless ``obs`` (one env's or agent's) fits the space's shapes
        and dtypes; ``who`` is the sub-env index or the agent id."""
        if self.flat:
            problem = self.leaves[0][1](obs)
            if problem is not None:
                raise self._fail(who, step, f"an observation of {problem}")
            return
        try:
            values = list(_leaves_like(self.space, obs))
        except (KeyError, IndexError, TypeError) as exc:
            raise self._fail(who, step, f"an observation that does not have the space's structure ({exc!r})") from None
        for (path, check), value in zip(self.leaves, values, strict=False):
            problem = check(value)
            if problem is not None:
                raise self._fail(who, step, f"observation{path} of {problem}")

    def reward(self, reward: Any, who: int | str, step: int) -> float:
        """``reward`` as a float, or an ``EnvOutputError``: a reward is a real number (a numpy
        scalar or a 0-d numeric array too), not a string, a bool, None or an array of values."""
        if isinstance(reward, np.ndarray) and reward.shape == () and reward.dtype.kind in "iuf":
            return float(reward)
        if type(reward) in REWARD_TYPES or (isinstance(reward, int | float | np.integer | np.floating)
                                            and not isinstance(reward, bool | np.bool_)):  # fmt: skip
            return float(reward)
        shape = f" of shape {reward.shape}" if isinstance(reward, np.ndarray) else ""
        raise self._fail(who, step, f"a reward that is a {type(reward).__name__}{shape} ({reward!r:.60}), not a number")

    def flags(self, terminated: Any, truncated: Any, info: Any, who: int | str, step: int) -> None:
        """``terminated`` and ``truncated`` are bools (Python's or numpy's), ``info`` a dict."""
        for name, flag in (("terminated", terminated), ("truncated", truncated)):
            if type(flag) not in FLAG_TYPES:
                raise self._fail(who, step, f"{name}={flag!r:.60}, a {type(flag).__name__}, not a bool")
        if not isinstance(info, dict):
            raise self._fail(who, step, f"an info that is a {type(info).__name__}, not a dict")

    def step_output(self, out: Any, who: int | str, step: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """What ``env.step`` returned, checked whole: five values of the right kinds."""
        if not isinstance(out, tuple) or len(out) != 5:
            raise self._fail(who, step, _wrong_step(out))
        obs, reward, terminated, truncated, info = out
        reward = self.reward(reward, who, step)
        self.flags(terminated, truncated, info, who, step)
        return obs, reward, terminated, truncated, info

    def reset_output(self, out: Any, who: int | str, step: int) -> Any:
        """The observation ``env.reset`` returned with its info: ``(observation, info)``."""
        if not isinstance(out, tuple) or len(out) != 2 or not isinstance(out[1], dict):
            old = " (the old gym API, whose reset returns the observation alone)" if not isinstance(out, tuple) else ""
            raise EnvOutputError(f"{self.where}, {_lane(who)}) returned {_describe(out)} from reset(), not "
                                 f"(observation, info){old}; gymnasium's reset returns both; {OPT_OUT}")  # fmt: skip
        return out[0]

    def finite(self, obs: Any, reward: float, who: int | str, step: int) -> None:
        """One observation (None: none this step) and reward (of a sub-env or an agent): raise
        EnvOutputError on a NaN or inf."""
        if not np.isfinite(reward):
            raise self._fail(who, step, f"a reward of {reward}")
        if obs is None:
            return
        leaves = list(_leaves_like(self.space, obs))
        for i in self.float_leaves:
            if not np.isfinite(leaves[i]).all():
                raise self._fail(who, step, f"a NaN or inf in observation{self.leaves[i][0]}")

    def finite_steps(
        self, first_step: np.ndarray, offset: int, rewards: np.ndarray | None = None, observations: Tree = None
    ) -> None:
        """Raise EnvOutputError for a NaN or inf in a sample's rewards or observations, arrays
        shaped ``(T, lanes, ...)``: row ``t`` came from each lane's step ``first_step + t + offset``.

        One sum per array (a NaN or inf anywhere makes it non-finite); only then is each
        row looked at, to name the lane and the step.
        """
        named = [] if rewards is None else [("a reward", rewards)]
        if observations is not None:
            leaves = [observations] if self.flat else list(tree_leaves(observations))
            named += [(f"a NaN or inf in observation{self.leaves[i][0]}", leaves[i]) for i in self.float_leaves]
        for what, x in named:
            with np.errstate(over="ignore", invalid="ignore"):  # large finite values may sum to inf
                total = x.sum()
            if math.isfinite(total):
                continue  # finite values only (a sum that overflows is looked at closely below)
            ok = np.isfinite(x.reshape(x.shape[0], x.shape[1], -1)).all(axis=2)
            if not ok.all():
                t, lane = (int(i) for i in np.argwhere(~ok)[0])
                if what == "a reward":
                    what = f"a reward of {x[t, lane]}"
                raise self._fail(lane, int(first_step[lane]) + t + offset, what)
