"""A worker copies each observation once: from the env straight into the batch's memory."""

from __future__ import annotations

import tracemalloc
from typing import Any

import gymnasium as gym
import numpy as np

from asyncflow.rl import RolloutWorker
from asyncflow.rl.data.sample_batch import OBS

SHAPE = (4, 48, 48)  # stacked uint8 frames, large enough that copies dominate what a sample allocates


class StampedFrames(gym.Env[np.ndarray, int]):
    """``uint8`` frames stamped with the env's id and its step count; episodes of 5 steps."""

    made = 0

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, SHAPE, np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        StampedFrames.made += 1
        self.id, self.steps = StampedFrames.made % 200, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        return self._frame(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.steps += 1
        return self._frame(), 1.0, self.steps % 5 == 0, False, {}

    def _frame(self) -> np.ndarray:
        frame = np.full(SHAPE, 7, np.uint8)
        frame[0, 0, 0], frame[0, 0, 1] = self.id, self.steps % 256
        return frame


def test_a_sample_allocates_its_observations_once() -> None:
    envs, steps = 4, 32
    worker = RolloutWorker(StampedFrames, num_envs=envs, rollout_fragment_length=steps)
    try:
        worker.sample()  # warm-up: the policy's first forward pass
        tracemalloc.start()
        try:
            batch = worker.sample()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        column = batch[OBS]
        assert column.shape == (envs * steps, *SHAPE) and column.flags.c_contiguous
        # The observations, and only once: a staging row per step and a lane-major reshape made it 2x.
        assert column.nbytes <= peak < 1.3 * column.nbytes, (peak, column.nbytes)
        # Each lane's steps are contiguous and in order: from step `steps` (the second sample) on.
        stamps = column[:, 0, 0, :2].reshape(envs, steps, 2).astype(int)
        assert len(set(stamps[:, 0, 0])) == envs
        assert (stamps[:, :, 0] == stamps[:, :1, 0]).all()
        assert (stamps[:, :, 1] == np.arange(steps, 2 * steps)).all()
        assert (column[:, 1:] == 7).all()
    finally:
        worker.close_envs()
