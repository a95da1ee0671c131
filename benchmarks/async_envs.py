"""Envs behind a network call: env steps/s against per-step latency, side by side in one run.

Each env is CartPole-v1 whose every step first waits the latency: an
``asyncio.sleep`` for asyncflow's async envs (``AsyncEnvAdapter``), a
``time.sleep`` (the same wait, blocking) for the peers, which step envs with
blocking calls. All of them act with the same 64x64 MLP policy, batched:
asyncflow's workers run it in numpy, as PPO's do (``worker_inference="auto"``),
the peers in torch in the driver.

- asyncflow: 2 worker processes x 64 async envs (``AsyncRolloutWorker``),
  through bulk-sync rollouts: concurrent with the defaults (act once half of
  the envs answered, or after 2 ms), concurrent on smaller batches (8 envs, or
  0.5 ms), and in lock step (act once all have answered); and concurrent on
  smaller batches through async rollouts with 2 requests in flight per worker
  (IMPALA's plan: a worker acts on while the driver takes a batch);
- gymnasium ``AsyncVectorEnv`` and Stable-Baselines3 ``SubprocVecEnv``: one
  process per env, so with 2 processes (what asyncflow uses) they step 2 envs,
  and with the same 128 envs they need 128 processes.

The bound is what the latency allows: envs / latency (128 envs / 5 ms = 25,600
steps/s); the issue's target is 0.8 of it at 5 ms, and 10x the 2-process peers.

    python benchmarks/async_envs.py [--seconds S] [--latencies-ms 0 1 5 20] [--skip-many] [--only-asyncflow]

At most 2 worker processes for asyncflow (this is a 2-core machine); the
128-process peers run 128 processes on the same 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import time
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _envs import async_cartpole, blocking_cartpole
from _table import machine_line, print_table, ratio

import asyncflow
from asyncflow.flow import FlowContext, parallel_rollouts
from asyncflow.rl import ActorCriticPolicy, AsyncRolloutWorker
from asyncflow.rl.models.numpy_export import numpy_net
from asyncflow.rl.policies.numpy_policy import NumpyActorCriticPolicy
from asyncflow.rl.sampling.worker_set import WorkerSet

WORKERS, ENVS_PER_WORKER, FRAGMENT = 2, 64, 32


DEFAULTS: dict[str, Any] = {"min_ready": ENVS_PER_WORKER // 2, "ready_timeout_s": 0.002}
"""When a concurrent worker acts by default (the config's defaults): half its envs, or 2 ms."""
SMALL_BATCHES: dict[str, Any] = {"min_ready": 8, "ready_timeout_s": 0.0005}
"""Acting sooner, on smaller batches: 8 envs, or 0.5 ms (the best of 32/2, 16/1, 8/0.5, 4/0.5,
4/1 and 2/0.3 ms at 5 ms of latency, 2026-12-04)."""
LOCK_STEP: dict[str, Any] = {"min_ready": ENVS_PER_WORKER, "ready_timeout_s": None}


async def asyncflow_async_envs(latency_s: float, seconds: float, options: dict[str, Any], num_async: int = 1) -> float:
    """Env steps/s of ``parallel_rollouts`` over 2 async-env workers acting as ``options``
    say: bulk-sync (``num_async`` 1), or async with ``num_async`` requests in flight per
    worker, so that a worker goes on acting while the driver takes its last batch (the plan
    of IMPALA, APPO and Ape-X)."""
    policy = _numpy_policy()
    async with asyncflow.open_runtime() as rt:
        handles = await asyncio.gather(*(
            rt.spawn(AsyncRolloutWorker.create, functools.partial(async_cartpole, latency_s),
                     policy_factory=policy, num_envs=ENVS_PER_WORKER, rollout_fragment_length=FRAGMENT,
                     worker_index=i, env_step_timeout_s=30.0, **options)
            for i in range(1, WORKERS + 1)
        ))  # fmt: skip
        mode: Literal["bulk_sync", "async"] = "bulk_sync" if num_async == 1 else "async"
        rollouts = parallel_rollouts(WorkerSet(handles), mode, num_async=num_async, ctx=FlowContext())
        await anext(rollouts)  # warm-up round
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += len(await anext(rollouts))
        elapsed = time.perf_counter() - start
        await rollouts.aclose()
        return steps / elapsed


def _numpy_policy() -> Any:
    """What PPO's workers run (``worker_inference="auto"``): the same MLP, in numpy."""
    env = gym.make("CartPole-v1")
    torch_policy = ActorCriticPolicy(env.observation_space, env.action_space)
    return functools.partial(NumpyActorCriticPolicy, net=numpy_net(torch_policy.model, env.observation_space,
                                                                   env.action_space))  # fmt: skip


def _drive(step: Any, obs: Any, policy: ActorCriticPolicy, num_envs: int, seconds: float) -> float:
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs = step(policy.compute_actions(obs)[0])
        steps += num_envs
    return steps / (time.perf_counter() - start)


def gymnasium_async_vector_env(latency_s: float, num_envs: int, seconds: float) -> float:
    envs = gym.vector.AsyncVectorEnv([functools.partial(blocking_cartpole, latency_s)] * num_envs,
                                     context="forkserver", shared_memory=True)  # fmt: skip
    try:
        policy = ActorCriticPolicy(envs.single_observation_space, envs.single_action_space)
        obs, _ = envs.reset(seed=0)
        return _drive(lambda a: envs.step(a)[0], obs, policy, num_envs, seconds)
    finally:
        envs.close()


def sb3_subproc_vec_env(latency_s: float, num_envs: int, seconds: float) -> float | None:
    try:
        from stable_baselines3.common.vec_env import SubprocVecEnv
    except ImportError:
        return None
    envs = SubprocVecEnv([functools.partial(blocking_cartpole, latency_s)] * num_envs, start_method="forkserver")
    try:
        policy = ActorCriticPolicy(envs.observation_space, envs.action_space)
        obs = envs.reset()
        return _drive(lambda a: envs.step(a)[0], obs, policy, num_envs, seconds)
    finally:
        envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--latencies-ms", type=float, nargs="+", default=[0, 1, 5, 20])
    parser.add_argument("--skip-many", action="store_true", help="skip the 128-process peers")
    parser.add_argument("--only-asyncflow", action="store_true", help="skip every peer")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the peers' policy in this process: one thread, as asyncflow's workers
    total = WORKERS * ENVS_PER_WORKER
    print(f"# async envs: CartPole-v1 with a latency per step ({machine_line()}); asyncflow: {WORKERS} worker "
          f"processes x {ENVS_PER_WORKER} async envs; peers: one process per env")  # fmt: skip
    rows = []
    for ms in args.latencies_ms:
        latency = ms / 1000
        defaults = asyncio.run(asyncflow_async_envs(latency, args.seconds, DEFAULTS))
        ours = asyncio.run(asyncflow_async_envs(latency, args.seconds, SMALL_BATCHES))
        lock = asyncio.run(asyncflow_async_envs(latency, args.seconds, LOCK_STEP))
        ahead = asyncio.run(asyncflow_async_envs(latency, args.seconds, SMALL_BATCHES, num_async=2))
        peers = not args.only_asyncflow
        gym2 = gymnasium_async_vector_env(latency, WORKERS, args.seconds) if peers else None
        sb2 = sb3_subproc_vec_env(latency, WORKERS, args.seconds) if peers else None
        gym_many = None if args.skip_many or not peers else gymnasium_async_vector_env(latency, total, args.seconds)
        sb_many = None if args.skip_many or not peers else sb3_subproc_vec_env(latency, total, args.seconds)
        bound = total / latency if latency else None
        best2, best_many = max(gym2 or 0, sb2 or 0), max(gym_many or 0, sb_many or 0)
        rows.append([f"{ms:g}", defaults, ours, lock, ahead, bound, ratio(defaults, bound), ratio(ours, bound),
                     ratio(ahead, bound), gym2, sb2, gym_many, sb_many, ratio(ours, best2),
                     ratio(ours, best_many)])  # fmt: skip
        print(f"  {ms:g} ms done", file=sys.stderr)
    print_table(
        f"env steps/s (ratios: asyncflow {total} async envs, min_ready 8 / 0.5 ms, over the other)",
        ["latency ms", "asyncflow defaults (32 / 2 ms)", "asyncflow min_ready 8 / 0.5 ms", "asyncflow lock step",
         "asyncflow async plan", "bound: envs/latency", "defaults / bound", "/ bound", "async plan / bound",
         "AsyncVectorEnv 2 procs",
         "SubprocVecEnv 2 procs", f"AsyncVectorEnv {total} procs", f"SubprocVecEnv {total} procs",
         "/ best 2-proc peer", f"/ best {total}-proc peer"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    main()
