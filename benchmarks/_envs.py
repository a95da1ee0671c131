"""Synthetic environments for the benchmarks: they cost (almost) nothing to step,
so a benchmark measures the framework around them."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np


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
