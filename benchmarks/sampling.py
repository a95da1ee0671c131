"""Sampling throughput: env steps/s of ``parallel_rollouts``, side by side in one run with

  (a) the same sampling loop (``RolloutWorker.sample``: same environments,
      same batched policy, GAE included) in this process, no framework;
  (b) gymnasium's ``AsyncVectorEnv`` stepping the same total number of
      environments, with the same policy run batched in the driver.

Two workloads: CartPole-v1 with the 64x64 MLP policy, and 84x84x4 ``uint8``
frames (a synthetic env returning precomputed frames, so what is measured is
the cost of moving frames, not of making them) with random actions and with
the Nature CNN policy; for frames the table adds the MB/s that went through
the shared-memory rings (``Runtime.statistics().bytes_moved``), and
``AsyncVectorEnv`` runs with ``shared_memory=True``. Last, what the env output
checks (shape, dtype, NaN) cost: the one-process loop with them on and off.

Then CartPole again with ``vector_env=True``: each worker steps gymnasium's own
numpy CartPole vector env, beside the same sampler in one process.

    python benchmarks/sampling.py [--seconds S] [--only cartpole|vector|frames|checks]

At most 2 worker processes (this is a 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _envs import Frames84
from _table import machine_line, print_table, ratio

import asyncflow
from asyncflow.flow import FlowContext, parallel_rollouts
from asyncflow.rl import ActorCriticPolicy, RandomPolicy, RolloutWorker
from asyncflow.rl.sampling.worker_set import WorkerSet

ENV = "CartPole-v1"
FRAGMENT = 64


def single_process(
    env: Any, num_envs: int, seconds: float, policy: Any = None, check: bool = True, vector_env: bool = False
) -> float:
    worker = RolloutWorker(env, num_envs=num_envs, rollout_fragment_length=FRAGMENT, policy_factory=policy,
                           check_env_output=check, vector_env=vector_env)  # fmt: skip
    worker.sample()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += len(worker.sample())
    return steps / (time.perf_counter() - start)


async def asyncflow_rollouts(
    env: Any, num_workers: int, num_envs: int, seconds: float, policy: Any = None, vector_env: bool = False
) -> tuple[float, float]:
    """Env steps/s, and MB/s through the rings."""
    async with asyncflow.open_runtime() as rt:
        handles = await asyncio.gather(
            *(
                rt.spawn(
                    RolloutWorker,
                    env,
                    num_envs=num_envs,
                    rollout_fragment_length=FRAGMENT,
                    worker_index=i,
                    policy_factory=policy,
                    vector_env=vector_env,
                )
                for i in range(1, num_workers + 1)
            )
        )
        rollouts = parallel_rollouts(WorkerSet(handles), "bulk_sync", ctx=FlowContext())
        await anext(rollouts)  # warm-up round
        steps, moved, start = 0, rt.statistics().bytes_moved, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += len(await anext(rollouts))
        elapsed = time.perf_counter() - start
        megabytes = (rt.statistics().bytes_moved - moved) / 1e6
        await rollouts.aclose()
        return steps / elapsed, megabytes / elapsed


def async_vector_env(make: Any, num_envs: int, seconds: float, random_actions: bool = False) -> float:
    envs = gym.vector.AsyncVectorEnv([make] * num_envs, context="forkserver", shared_memory=True)
    policy = ActorCriticPolicy(envs.single_observation_space, envs.single_action_space)
    obs, _ = envs.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        actions = envs.action_space.sample() if random_actions else policy.compute_actions(obs)[0]
        obs, _, _, _, _ = envs.step(actions)
        steps += num_envs
    rate = steps / (time.perf_counter() - start)
    envs.close()
    return rate


def cartpole(args: argparse.Namespace) -> None:
    print(f"# sampling throughput, {ENV}, 64x64 MLP policy ({machine_line()}); at most 2 worker processes")
    rows = []
    for n in args.envs:
        # Interleaved repeats, medians: this VM's speed drifts by tens of
        # percent over minutes, which would otherwise favour whoever runs first.
        runs: list[list[float]] = [[], [], [], []]
        for _ in range(args.repeats):
            runs[0].append(single_process(ENV, n, args.seconds))
            runs[1].append(asyncio.run(asyncflow_rollouts(ENV, 1, n, args.seconds))[0])
            runs[2].append(asyncio.run(asyncflow_rollouts(ENV, 2, n, args.seconds))[0])
            runs[3].append(async_vector_env(lambda: gym.make(ENV), 2 * n, args.seconds))
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


def cartpole_vector(args: argparse.Namespace) -> None:
    """The same, with each worker's envs as gymnasium's own CartPole vector env (``vector_env=True``)."""
    print(f"\n# sampling throughput, {ENV} as one vector env per worker (vector_env=True), 64x64 MLP policy "
          f"({machine_line()}); at most 2 worker processes")  # fmt: skip
    rows = []
    for n in args.envs:
        runs: list[list[float]] = [[], [], []]
        for _ in range(args.repeats):
            runs[0].append(single_process(ENV, n, args.seconds))
            runs[1].append(single_process(ENV, n, args.seconds, vector_env=True))
            runs[2].append(asyncio.run(asyncflow_rollouts(ENV, 2, n, args.seconds, vector_env=True))[0])
        loop, local, two = (statistics.median(r) for r in runs)
        rows.append([n, loop, local, two, ratio(local, loop), ratio(two / 2, local)])
    print_table(
        f"env steps/s, median of {args.repeats} interleaved runs",
        [
            "envs per worker",
            "1 process, env loop",
            "1 process, vector env",
            "asyncflow 2 workers, vector env",
            "vector / loop",
            "per worker / 1 process (vector)",
        ],
        rows,
    )


def frames(args: argparse.Namespace) -> None:
    n = args.frame_envs
    print(f"\n# sampling throughput, 84x84x4 uint8 frames, {n} envs per worker ({machine_line()}); 2 worker processes")
    rows = []
    for name, policy in (("random actions", RandomPolicy), ("Nature CNN policy", None)):
        runs: list[list[float]] = [[], [], [], []]
        for _ in range(args.repeats):
            runs[0].append(single_process(Frames84, n, args.seconds, policy))
            rate, megabytes = asyncio.run(asyncflow_rollouts(Frames84, 2, n, args.seconds, policy))
            runs[1].append(rate)
            runs[2].append(megabytes)
            runs[3].append(async_vector_env(Frames84, 2 * n, args.seconds, random_actions=policy is RandomPolicy))
        local, two, mbs, vec = (statistics.median(r) for r in runs)
        rows.append([name, local, two, mbs, vec, ratio(two, local), ratio(two, vec)])
    print_table(
        f"env steps/s, median of {args.repeats} interleaved runs (ratios: asyncflow with 2 workers / other)",
        [
            "policy",
            "1 process, no framework",
            "asyncflow 2 workers",
            "MB/s through rings",
            f"AsyncVectorEnv(shared_memory) {2 * n} envs",
            "2 workers / 1 process",
            "2 workers / AsyncVectorEnv",
        ],
        rows,
    )


def checks(args: argparse.Namespace) -> None:
    """What the env output checks cost. One worker samples with them on and off in turn,
    call after call (adjacent calls see the same machine, which drifts by tens of percent
    over minutes here), and the medians of the per-call times are compared."""
    print(f"\n# cost of the env output checks, {ENV}, one process ({machine_line()})")
    rows = []
    for n in args.envs:
        worker = RolloutWorker(ENV, num_envs=n, rollout_fragment_length=FRAGMENT)
        lanes: Any = worker.lanes
        checker, inline = worker.checker, lanes.checker  # the NaN checks of each sample, the step's own
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(3):
            worker.sample()  # warm-up
        deadline = time.perf_counter() + 2 * args.seconds * args.repeats
        while time.perf_counter() < deadline:
            for on in (True, False):
                worker.checker, lanes.checker = (checker, inline) if on else (None, None)
                start = time.perf_counter()
                worker.sample()
                times[on].append(time.perf_counter() - start)
        on_s, off_s = statistics.median(times[True]), statistics.median(times[False])
        steps = n * FRAGMENT
        rows.append([n, len(times[True]), steps / off_s, steps / on_s, f"{100 * (on_s - off_s) / off_s:+.1f}%"])
    print_table("env steps/s, medians of per-sample() times, checks on and off in turn",
                ["envs", "samples each", "checks off", "checks on (default)", "cost"], rows)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per figure (median shown)")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8, 32], help="CartPole num_envs_per_worker values")
    parser.add_argument("--frame-envs", type=int, default=8, help="num_envs_per_worker for the frames rows")
    parser.add_argument("--only", choices=["cartpole", "vector", "frames", "checks"], help="run one part")
    args = parser.parse_args()
    if args.only in (None, "cartpole"):
        cartpole(args)
    if args.only in (None, "vector"):
        cartpole_vector(args)
    if args.only in (None, "frames"):
        frames(args)
    if args.only in (None, "checks"):
        checks(args)


if __name__ == "__main__":
    main()
