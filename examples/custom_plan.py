"""A plan written from operators, without an Algorithm class: asynchronous
PPO. Workers sample on their own clock; each batch is trained as soon as
enough rows arrived, and the new weights go to every worker.

    python examples/custom_plan.py [--iterations 30]

Everything here is public API: the runtime spawns plain classes as actors,
and the plan is an ordinary chain of async generators.
"""

from __future__ import annotations

import argparse
import asyncio

import asyncflow
from asyncflow import flow
from asyncflow.algorithms.ppo import PPOConfig, ppo_loss
from asyncflow.rl import ActorCriticPolicy, RolloutWorker
from asyncflow.rl.envs.make import probe_spaces
from asyncflow.rl.sampling.worker_set import WorkerSet


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=30)
    args = parser.parse_args()
    config = PPOConfig(env="CartPole-v1")  # the loss reads its coefficients from here
    spaces = probe_spaces(config.env)
    learner = ActorCriticPolicy(*spaces, lr=config.lr, loss=ppo_loss, loss_config=config)
    async with asyncflow.open_runtime() as rt:
        workers = WorkerSet(
            [await rt.spawn(RolloutWorker, config.env, num_envs=8, seed=i, worker_index=i + 1) for i in range(2)]
        )
        await workers.broadcast(learner.get_weights())

        # The plan: five operators, counting into one context. Leaving the block ends what the
        # plan has in flight (samples being collected, the learner's thread).
        async with flow.FlowContext():
            rollouts = flow.parallel_rollouts(workers, mode="async", num_async=2)
            batches = flow.concat_batches(rollouts, min_batch_size=2048)
            batches = flow.standardize_fields(batches, ["advantages"])
            trained = flow.train_one_step(batches, learner, workers, num_epochs=5, minibatch_size=256)
            results = flow.report_metrics(trained)

            async for result in results:
                print(f"iter {result['training_iteration']:3d}  steps {result['num_env_steps_sampled']:6d}  "
                      f"return {result['episode_return_mean']:6.1f}  kl {result['learner']['kl']:.4f}")  # fmt: skip
                if result["training_iteration"] >= args.iterations:
                    break


if __name__ == "__main__":
    asyncio.run(main())
