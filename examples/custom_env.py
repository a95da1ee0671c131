"""A custom gymnasium environment, defined right here, trained with PPO on two
worker processes.

    python examples/custom_env.py [--stop-timesteps 60000]

The workers get the environment class by value (asyncflow pickles classes
defined in ``__main__`` with cloudpickle), so nothing needs installing.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import gymnasium as gym
import numpy as np

from asyncflow.algorithms import PPO, PPOConfig


class SteerToTarget(gym.Env[np.ndarray, int]):
    """Move a point along a line (left, stay, right) to a target that moves
    each episode; the reward is minus the distance. 40 steps per episode."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.position = 0.0
        self.target = float(self.np_random.uniform(-0.8, 0.8))
        self.steps = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.position = float(np.clip(self.position + 0.05 * (int(action) - 1), -1.0, 1.0))
        self.steps += 1
        reward = -abs(self.position - self.target)
        return self._obs(), reward, False, self.steps >= 40, {}

    def _obs(self) -> np.ndarray:
        return np.array([self.position, self.target], np.float32)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stop-timesteps", type=int, default=60_000)
    args = parser.parse_args()
    config = PPOConfig(env=SteerToTarget, num_workers=2, train_batch_size=2048, seed=0)
    async with PPO(config) as algo:
        async for result in algo.train():
            print(f"iter {result['training_iteration']:3d}  steps {result['num_env_steps_sampled']:6d}  "
                  f"return {result['episode_return_mean']:7.2f}")  # fmt: skip
            if result["num_env_steps_sampled"] >= args.stop_timesteps:
                break


if __name__ == "__main__":
    asyncio.run(main())
