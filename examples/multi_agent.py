"""Multi-agent: a PPO policy and a DQN policy learn side by side on one
environment, here four CartPoles whose agents alternate between the two.

    python examples/multi_agent.py [--stop-timesteps 150000]

``policy_mapping_fn`` and the environment factory are module-level
functions: they travel to the worker processes by reference.
"""

from __future__ import annotations

import argparse
import asyncio

from asyncflow.algorithms import TwoTrainer, TwoTrainerConfig
from asyncflow.algorithms.two_trainer import DQN_POLICY, PPO_POLICY
from asyncflow.rl import MultiAgentCartPole


def four_cartpoles() -> MultiAgentCartPole:
    return MultiAgentCartPole(num_agents=4)


def mapping(agent_id: str) -> str:
    """agent_0 and agent_2 use PPO, agent_1 and agent_3 use DQN."""
    return PPO_POLICY if int(agent_id.split("_")[1]) % 2 == 0 else DQN_POLICY


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stop-timesteps", type=int, default=150_000)
    args = parser.parse_args()
    config = TwoTrainerConfig(env=four_cartpoles, policy_mapping_fn=mapping, seed=0)
    async with TwoTrainer(config) as algo:
        async for result in algo.train():
            per_policy = {p: round(r, 1) for p, r in result["policy_return_mean"].items()}
            print(f"iter {result['training_iteration']:3d}  steps {result['num_env_steps_sampled']:7d}  {per_policy}")
            if result["num_env_steps_sampled"] >= args.stop_timesteps:
                break


if __name__ == "__main__":
    asyncio.run(main())
