"""Synthetic environments for the benchmarks: they cost (almost) nothing to step,
so a benchmark measures the framework around them."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from asyncflow.rl.policies.random_policy import RandomPolicy


class Frames84(gym.Env[np.ndarray, int]):
    """84x84x4 ``uint8`` observations (an Atari frame stack) from a precomputed cycle of
    frames, 4 actions, episodes of 1,000 steps."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self._frames = [np.full((84, 84, 4), i, np.uint8) for i in range(16)]
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.t = 0
        return self._frames[0], {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.t += 1
        return self._frames[self.t % 16], 0.0, False, self.t >= 1_000, {}


class BlockingLatency(gym.Wrapper[Any, Any, Any, Any]):
    """An env whose every step first waits ``latency_s`` in a blocking call (``time.sleep``),
    as a blocking client of a remote simulator would."""

    def __init__(self, env: gym.Env[Any, Any], latency_s: float) -> None:
        super().__init__(env)
        self.latency_s = latency_s

    def step(self, action: Any) -> Any:
        if self.latency_s:
            time.sleep(self.latency_s)
        return self.env.step(action)


def blocking_cartpole(latency_s: float) -> gym.Env[Any, Any]:
    return BlockingLatency(gym.make("CartPole-v1"), latency_s)


def async_cartpole(latency_s: float) -> Any:
    """The same env and wait as an ``AsyncEnv``: the wait is an ``asyncio.sleep``."""
    from asyncflow.rl import AsyncEnvAdapter

    return AsyncEnvAdapter(gym.make("CartPole-v1"), delay_s=latency_s)


class ScriptedCartPole(RandomPolicy):
    """A CartPole policy without a network that keeps the pole up for all 500 steps (push
    toward where it falls): long episodes for the benchmarks, at no inference cost."""

    def compute_actions(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        actions = (3 * obs[:, 2] + obs[:, 3] + 0.1 * obs[:, 1] > 0).astype(np.int64)
        return actions, np.zeros(len(obs), np.float32), np.zeros(len(obs), np.float32)  # deterministic: log 1
