"""Environments whose ``reset``, ``step`` and ``close`` are coroutines.

An env behind a network call (a game or robot server, a simulator on
another host, a web service) spends most of a step waiting. Gymnasium's
blocking ``step`` makes a worker wait with it; an ``AsyncEnv`` lets one
worker keep many such envs in flight on its event loop and act for
whichever have answered (``async_worker.py``).

``AsyncEnv`` is the protocol (gymnasium's signatures, awaited);
``AsyncEnvAdapter`` wraps any gymnasium env in it, with an optional
simulated latency, for tests and for mixing; ``is_async_env`` tells which
kind an env factory returned. Spaces are plain attributes, so the driver
probes them once without a reset, as it does for gymnasium envs.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from typing import Any, Protocol, SupportsFloat, runtime_checkable

import gymnasium as gym
import numpy as np

from ...errors import ConfigError

__all__ = ["AsyncEnv", "AsyncEnvAdapter", "is_async_env", "run_coroutine"]

ResetResult = tuple[Any, dict[str, Any]]
StepResult = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]


@runtime_checkable
class AsyncEnv(Protocol):
    """An environment stepped with ``await``: gymnasium's API, each call a coroutine.

    Example, a client of a simulator served over TCP (``examples/remote_env.py``)::

        class RemoteSim:
            observation_space = gym.spaces.Box(-inf, inf, (4,), np.float32)
            action_space = gym.spaces.Discrete(2)

            async def reset(self, *, seed=None, options=None):
                ...  # connect on first use, ask the server for a new episode
                return obs, info

            async def step(self, action):
                return obs, reward, terminated, truncated, info

            async def close(self):
                ...  # close the connection

    ``PPOConfig(env=RemoteSim, num_envs_per_worker=64)``: each worker builds 64
    of them and steps them concurrently. Build connections in ``reset``, not in
    ``__init__``: the driver builds one env to read its spaces and closes it
    without a reset.
    """

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        """Start an episode: ``(observation, info)``."""
        ...

    async def step(self, action: Any) -> StepResult:
        """One step: ``(observation, reward, terminated, truncated, info)``."""
        ...

    async def close(self) -> None:
        """Release what the env holds (connections, processes)."""
        ...


def is_async_env(env: object) -> bool:
    """Whether ``env`` is an ``AsyncEnv``: its ``reset`` and ``step`` are coroutine functions."""
    return all(inspect.iscoroutinefunction(getattr(env, name, None)) for name in ("reset", "step"))


class AsyncEnvAdapter:
    """A gymnasium env as an ``AsyncEnv``; ``delay_s`` simulates a network.

    ``delay_s``: seconds each ``step`` waits before it answers (a float), or a
    ``(low, high)`` range drawn uniformly per step from a generator seeded by
    ``seed``. The wait is an ``asyncio.sleep``: other envs step meanwhile.
    """

    def __init__(self, env: gym.Env[Any, Any], delay_s: float | tuple[float, float] = 0.0, seed: int = 0) -> None:
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        low, high = delay_s if isinstance(delay_s, tuple) else (delay_s, delay_s)
        if not 0 <= low <= high:
            raise ConfigError(f"delay_s: expected a delay >= 0 or a range 0 <= low <= high, got {delay_s}")
        self.delay = (float(low), float(high))
        self.rng = np.random.default_rng(seed)

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        """The wrapped env's ``reset``, at once."""
        return self.env.reset(seed=seed, options=options)

    async def step(self, action: Any) -> StepResult:
        """The wrapped env's ``step``, after the delay."""
        low, high = self.delay
        if high > 0:
            await asyncio.sleep(low if low == high else float(self.rng.uniform(low, high)))
        return self.env.step(action)

    async def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()


def run_coroutine(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to its end from synchronous code: on a new loop, in a thread of its own
    when this thread already runs one (the driver probing an env inside ``async with``)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    out: list[Any] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            out.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            error.append(exc)

    thread = threading.Thread(target=run, name="asyncflow-run-coroutine")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return out[0]
