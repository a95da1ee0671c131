"""Atari sampling throughput: env steps/s (agent steps, 4 frames each) on real ALE games,
identical preprocessing everywhere, side by side in one run:

  - one process stepping the envs in a loop (twice that is this machine's raw limit);
  - asyncflow ``parallel_rollouts`` on 2 worker processes, random actions, bulk-sync (PPO's
    plan) and async with 2 requests in flight per worker (IMPALA's, APPO's and Ape-X's);
  - the same with the Nature CNN policy (batched over each worker's envs);
  - EnvPool (a C++ thread pool, 2 threads);
  - gymnasium ``AsyncVectorEnv(shared_memory=True)``;
  - Stable-Baselines3 ``SubprocVecEnv``.

Preprocessing (asyncflow's Atari default, ``asyncflow.rl.envs.atari``): up to 30 no-ops at reset,
frame skip 4 with a max over the last two frames, 84x84 grayscale, a stack of 4, episodic
life, clipped rewards, ``v5``'s sticky actions (0.25). EnvPool gets the same through its own
options (``repeat_action_probability=0.25``, ``episodic_life=True``, ``reward_clip=True``,
``use_fire_reset=False``). The peers run the same total number of envs as asyncflow's 2 workers.

Then, for the CNN policy, where a worker's time goes (env stepping vs. inference), and the
env steps/s of the CNN run for several envs per worker (how the Atari default was chosen).

    python benchmarks/atari.py [--seconds S] [--repeats R] [--games Pong Breakout] [--envs 4]

At most 2 worker processes (this is a 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table, ratio

import asyncflow
from asyncflow.flow import FlowContext, parallel_rollouts
from asyncflow.rl import RandomPolicy, RolloutWorker
from asyncflow.rl.envs.atari import AtariEnv
from asyncflow.rl.sampling.worker_set import WorkerSet

FRAGMENT = 64


def _env(game: str) -> AtariEnv:
    return AtariEnv(f"ALE/{game}-v5")


def one_process(game: str, num_envs: int, seconds: float) -> float:
    """The envs stepped in a loop with random actions, no framework."""
    envs = [_env(game)() for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
        env.action_space.seed(i)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for env in envs:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        steps += num_envs
    rate = steps / (time.perf_counter() - start)
    for env in envs:
        env.close()
    return rate


async def asyncflow_rollouts(
    game: str, num_envs: int, seconds: float, policy: Any, mode: Literal["bulk_sync", "async"] = "bulk_sync"
) -> float:
    """``parallel_rollouts`` on 2 workers: ``bulk_sync`` (PPO's plan: one round asks both
    workers, then waits for both) or ``async`` with 2 requests in flight per worker (the
    plan of IMPALA, APPO and Ape-X: a worker never waits for the other, nor for the driver)."""
    async with asyncflow.open_runtime() as rt:
        handles = await asyncio.gather(
            *(
                rt.spawn(
                    RolloutWorker,
                    _env(game),
                    num_envs=num_envs,
                    rollout_fragment_length=FRAGMENT,
                    worker_index=i,
                    policy_factory=policy,
                )
                for i in (1, 2)
            )
        )
        rollouts = parallel_rollouts(WorkerSet(handles), mode, num_async=2, ctx=FlowContext())
        await anext(rollouts)  # warm-up round
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += len(await anext(rollouts))
        elapsed = time.perf_counter() - start
        await rollouts.aclose()
        return steps / elapsed


def _random_steps(step: Any, n_actions: int, num_envs: int, seconds: float) -> float:
    """Env steps/s of ``step(actions)`` on ``num_envs`` envs with uniformly random actions."""
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step(rng.integers(0, n_actions, num_envs))
        steps += num_envs
    return steps / (time.perf_counter() - start)


def envpool_rate(game: str, num_envs: int, seconds: float) -> float | None:
    try:
        import envpool
    except ImportError:
        return None
    env = envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=num_envs, num_threads=2, seed=0,
                       repeat_action_probability=0.25, episodic_life=True, reward_clip=True,
                       use_fire_reset=False, noop_max=30, frame_skip=4, stack_num=4)  # fmt: skip
    try:
        env.reset()
        return _random_steps(env.step, env.action_space.n, num_envs, seconds)
    finally:
        env.close()


def async_vector_rate(game: str, num_envs: int, seconds: float) -> float:
    envs = gym.vector.AsyncVectorEnv([_env(game)] * num_envs, context="forkserver", shared_memory=True)
    try:
        envs.reset(seed=0)
        return _random_steps(envs.step, int(envs.single_action_space.n), num_envs, seconds)  # type: ignore[attr-defined]
    finally:
        envs.close()


def subproc_rate(game: str, num_envs: int, seconds: float) -> float | None:
    try:
        from stable_baselines3.common.vec_env import SubprocVecEnv
    except ImportError:
        return None
    envs = SubprocVecEnv([_env(game)] * num_envs, start_method="forkserver")
    try:
        envs.reset()
        return _random_steps(envs.step, envs.action_space.n, num_envs, seconds)  # type: ignore[attr-defined]
    finally:
        envs.close()


def where_time_goes(game: str, num_envs: int, samples: int = 6) -> tuple[float, float, float]:
    """One worker with the CNN, in this process: ms per sample() in env steps and in inference."""
    worker = RolloutWorker(_env(game), num_envs=num_envs, rollout_fragment_length=FRAGMENT)
    policy = worker.policy
    inference = 0.0
    original = policy.compute_actions

    def timed(obs: Any) -> Any:
        nonlocal inference
        t = time.perf_counter()
        out = original(obs)
        inference += time.perf_counter() - t
        return out

    policy.compute_actions = timed  # type: ignore[method-assign]
    worker.sample()
    inference, start = 0.0, time.perf_counter()
    for _ in range(samples):
        worker.sample()
    total = (time.perf_counter() - start) / samples
    return 1000 * total, 1000 * inference / samples, 1000 * (total - inference / samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--games", nargs="+", default=["Pong", "Breakout"])
    parser.add_argument("--envs", type=int, default=4, help="envs per asyncflow worker (peers: twice that)")
    parser.add_argument("--sweep", type=int, nargs="*", default=[2, 4, 8, 16], help="envs per worker, CNN sweep")
    args = parser.parse_args()
    n, total = args.envs, 2 * args.envs
    print(f"# Atari sampling, random actions unless said, {total} envs in all ({machine_line()}); "
          "asyncflow on 2 worker processes, EnvPool on 2 threads")  # fmt: skip
    for game in args.games:
        runs: dict[str, list[float]] = {}
        for _ in range(args.repeats):  # interleaved: this VM's speed drifts over minutes
            measured = {
                "1 process": one_process(game, total, args.seconds),
                "asyncflow": asyncio.run(asyncflow_rollouts(game, n, args.seconds, RandomPolicy)),
                "asyncflow async": asyncio.run(asyncflow_rollouts(game, n, args.seconds, RandomPolicy, "async")),
                "asyncflow CNN": asyncio.run(asyncflow_rollouts(game, n, args.seconds, None)),
                "EnvPool": envpool_rate(game, total, args.seconds),
                "AsyncVectorEnv": async_vector_rate(game, total, args.seconds),
                "SubprocVecEnv": subproc_rate(game, total, args.seconds),
            }
            for name, rate in measured.items():
                if rate is not None:
                    runs.setdefault(name, []).append(rate)
        med = {name: statistics.median(r) for name, r in runs.items()}
        ours, ours_async = med["asyncflow"], med["asyncflow async"]
        rows = [[name, rate, ratio(ours, rate), ratio(ours_async, rate)] for name, rate in med.items()]
        print_table(f"ALE/{game}-v5: env steps/s, median of {args.repeats} (ratios: asyncflow random, "
                    "bulk-sync and async rollouts, / row)",
                    ["system", "env steps/s", "bulk-sync / row", "async / row"], rows)  # fmt: skip

    game = args.games[0]
    rows = []
    for envs in args.sweep:
        total_ms, infer_ms, env_ms = where_time_goes(game, envs)
        rate = statistics.median(
            asyncio.run(asyncflow_rollouts(game, envs, args.seconds, None)) for _ in range(args.repeats)
        )
        steps = envs * FRAGMENT
        rows.append([envs, rate, total_ms / steps * 1000, infer_ms / steps * 1000, env_ms / steps * 1000,
                     f"{100 * infer_ms / total_ms:.0f}%"])  # fmt: skip
    print_table(f"ALE/{game}-v5, Nature CNN policy: 2 workers' env steps/s by envs per worker, and where one "
                "worker's time goes (in this process)",
                ["envs per worker", "env steps/s (2 workers)", "us per step", "inference us/step",
                 "env us/step", "inference share"], rows)  # fmt: skip


if __name__ == "__main__":
    main()
