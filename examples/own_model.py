"""Your own torch model: an actor-critic defined in this script, trained by PPO
on two worker processes, saved, and loadable by ``asyncflow evaluate``.

    python examples/own_model.py [--stop-reward 475] [--checkpoint own_model.ckpt]
    asyncflow evaluate own_model.ckpt --episodes 10 --trust-code

The model honours the actor-critic protocol (``asyncflow.rl.ActorCriticModel``):
it is built from the two spaces and maps a batch of observations to the
action distribution's inputs (here the logits of ``Discrete(2)``) and the
state values. It travels to the workers, and into the checkpoint, by value
(cloudpickle), because it is defined in ``__main__``: loading that checkpoint
unpickles it, which runs code, so ``asyncflow evaluate`` needs ``--trust-code``
(a model class in an importable module is stored by its import path instead).
"""

from __future__ import annotations

import argparse
import asyncio

import torch
from torch import nn

from asyncflow.algorithms import PPO, PPOConfig


class MyNet(nn.Module):
    def __init__(self, observation_space, action_space):  # type: ignore[no-untyped-def]
        super().__init__()
        size = observation_space.shape[0]
        self.policy = nn.Sequential(nn.Linear(size, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.logits = nn.Linear(64, action_space.n)
        self.critic = nn.Sequential(nn.Linear(size, 64), nn.Tanh(), nn.Linear(64, 1))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.logits(self.policy(obs)), self.critic(obs).squeeze(-1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stop-reward", type=float, default=475.0)
    parser.add_argument("--stop-timesteps", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default="own_model.ckpt")
    args = parser.parse_args()
    config = PPOConfig(env="CartPole-v1", model=MyNet, num_workers=2, seed=args.seed)
    async with PPO(config) as algo:
        async for result in algo.train():
            steps, ret = result["num_env_steps_sampled"], result["episode_return_mean"]
            print(f"iter {result['training_iteration']:3d}  steps {steps:6d}  return {ret:6.1f}")
            if ret >= args.stop_reward or steps >= args.stop_timesteps:
                break
        path = await algo.save(args.checkpoint)
    print(f"final return {ret:.1f} after {steps} env steps; checkpoint: {path}")


if __name__ == "__main__":
    asyncio.run(main())
