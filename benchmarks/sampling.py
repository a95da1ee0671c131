"""Sampling throughput: env steps/s of ``parallel_rollouts`` on CartPole-v1
with the real MLP policy, side by side in one run with

  (a) the same sampling loop (``RolloutWorker.sample``: same environments,
      same batched policy, GAE included) in this process, no framework;
  (b) gymnasium's ``AsyncVectorEnv`` stepping the same total number of
      environments, with the same policy run batched in the driver.

    python benchmarks/sampling.py [--seconds S]

At most 2 worker processes (this is a 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table, ratio

import asyncflow
from asyncflow.flow import FlowContext, parallel_rollouts
from asyncflow.rl import RolloutWorker, TorchPolicy
from asyncflow.rl.worker_set import WorkerSet

ENV = "CartPole-v1"
FRAGMENT = 64


def single_process(num_envs: int, seconds: float) -> float:
    worker = RolloutWorker(ENV, num_envs=num_envs, rollout_fragment_length=FRAGMENT)
    worker.sample()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += len(worker.sample())
    return steps / (time.perf_counter() - start)


async def asyncflow_rollouts(num_workers: int, num_envs: int, seconds: float) -> float:
    async with asyncflow.open_runtime() as rt:
        handles = await asyncio.gather(
            *(
                rt.spawn(RolloutWorker, ENV, num_envs=num_envs, rollout_fragment_length=FRAGMENT, worker_index=i)
                for i in range(1, num_workers + 1)
            )
        )
        rollouts = parallel_rollouts(WorkerSet(handles), "bulk_sync", ctx=FlowContext())
        await anext(rollouts)  # warm-up round
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += len(await anext(rollouts))
        rate = steps / (time.perf_counter() - start)
        await rollouts.aclose()
        return rate


def async_vector_env(num_envs: int, seconds: float) -> float:
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make(ENV)] * num_envs, context="forkserver")
    policy = TorchPolicy(envs.single_observation_space, envs.single_action_space)
    obs, _ = envs.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        actions, _, _ = policy.compute_actions(obs.astype(np.float32))
        obs, _, _, _, _ = envs.step(actions)
        steps += num_envs
    rate = steps / (time.perf_counter() - start)
    envs.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per figure (median shown)")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8, 32], help="num_envs_per_worker values")
    args = parser.parse_args()
    print(f"# sampling throughput, {ENV}, 64x64 MLP policy ({machine_line()}); at most 2 worker processes")
    rows = []
    for n in args.envs:
        # Interleaved repeats, medians: this VM's speed drifts by tens of
        # percent over minutes, which would otherwise favour whoever runs first.
        runs: list[list[float]] = [[], [], [], []]
        for _ in range(args.repeats):
            runs[0].append(single_process(n, args.seconds))
            runs[1].append(asyncio.run(asyncflow_rollouts(1, n, args.seconds)))
            runs[2].append(asyncio.run(asyncflow_rollouts(2, n, args.seconds)))
            runs[3].append(async_vector_env(2 * n, args.seconds))
        local, one, two, vec = (statistics.median(r) for r in runs)
        rows.append([n, local, one, two, vec, ratio(two, local), ratio(two, vec)])
    print_table(
        f"env steps/s, median of {args.repeats} interleaved runs (ratios: asyncflow with 2 workers / other)",
        [
            "envs per worker",
            "1 process, no framework",
            "asyncflow 1 worker",
            "asyncflow 2 workers",
            "AsyncVectorEnv (2x envs)",
            "2 workers / 1 process",
            "2 workers / AsyncVectorEnv",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
