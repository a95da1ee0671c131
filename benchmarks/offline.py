"""Learning from data, measured side by side in one run:

  write   env steps/s sampling CartPole-v1 with 2 workers (8 envs each), with and without
          ``output=`` (each worker writing its own Minari shard): short episodes (the
          untrained MLP policy, ~22 steps) and long ones (a scripted policy, 500 steps);
          then PPO training from scratch (its defaults), with and without ``output=``.
  read    rows per second from disk to the learner: asyncflow's reader actors (2, each
          reading its share of the shards into memory, then answering ``replay(256)``)
          against Minari's own ``MinariDataset`` on the same files (``iterate_episodes``
          for a full read, ``sample_episodes`` for random episodes).
  cql     continuous CQL on one Pendulum-v1 dataset (8,000 steps of a SAC run, written
          by its workers): asyncflow's CQL and d3rlpy's at equal gradient steps, the same
          networks (64x64), batch (128), action samples (4), conservative weight (5, fixed)
          and learning rates (3e-4): the greedy return over 20 episodes and the wall time.
          d3rlpy runs from its own virtual environment (it pins gymnasium 1.0):
          ``--d3rlpy-python /path/to/venv/bin/python`` (``pip install torch==2.13.0 d3rlpy``).

    python benchmarks/offline.py [--only write|read|cql] [--seconds S] [--updates 2000 5000]

At most 2 worker processes (this is a 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _envs import ScriptedCartPole
from _table import machine_line, print_table, ratio

import asyncflow
from asyncflow.algorithms import CQL, PPO, SAC, CQLConfig, PPOConfig, SACConfig
from asyncflow.flow import FlowContext, parallel_rollouts, replay
from asyncflow.rl import RandomPolicy, RolloutWorker
from asyncflow.rl.offline.dataset import open_dataset, read_transitions
from asyncflow.rl.offline.reader import DatasetShard
from asyncflow.rl.offline.writer import Output
from asyncflow.rl.sampling.worker_set import WorkerSet

HERE = Path(__file__).resolve().parent
ENV = "CartPole-v1"


async def sample_rate(policy: Any, seconds: float, output: str | None) -> float:
    """Env steps/s of 2 workers x 8 CartPoles (fragments of 64), writing to ``output`` or not."""
    async with asyncflow.open_runtime() as rt:
        handles = await asyncio.gather(*(
            rt.spawn(RolloutWorker, ENV, num_envs=8, rollout_fragment_length=64, worker_index=i, policy_factory=policy,
                     output=None if output is None else Output(output))
            for i in (1, 2)
        ))  # fmt: skip
        rollouts = parallel_rollouts(WorkerSet(handles), "bulk_sync", ctx=FlowContext())
        await anext(rollouts)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += len(await anext(rollouts))
        elapsed = time.perf_counter() - start
        await rollouts.aclose()
    return steps / elapsed


async def train_rate(seconds: float, output: str | None) -> float:
    """Env steps/s of PPO training on CartPole-v1 (its defaults: 2 workers x 8 envs)."""
    async with PPO(PPOConfig(env=ENV, seed=0, output=output)) as algo:
        async for result in algo.train():
            if result["time_total_s"] >= seconds:
                return float(result["num_env_steps_sampled"] / result["time_total_s"])
    raise AssertionError("the plan ended")


def write(args: argparse.Namespace) -> None:
    print(f"# writing experiences while sampling {ENV} ({machine_line()}); 2 worker processes, 8 envs each")
    rows = []
    for label, policy in (("untrained MLP (~22-step episodes)", None),
                          ("scripted (500-step episodes)", ScriptedCartPole)):  # fmt: skip
        plain, writing = [], []
        for _ in range(args.repeats):  # interleaved: this VM's speed drifts over minutes
            plain.append(asyncio.run(sample_rate(policy, args.seconds, None)))
            folder = tempfile.mkdtemp(prefix="asyncflow-bench-")
            try:
                writing.append(asyncio.run(sample_rate(policy, args.seconds, folder)))
            finally:
                shutil.rmtree(folder)
        a, b = statistics.median(plain), statistics.median(writing)
        rows.append([label, a, b, f"{100 * (1 - b / a):.1f} %"])
    print_table(f"env steps/s, median of {args.repeats} interleaved runs",
                ["policy", "sampling", "sampling + output=", "cost of writing"], rows)  # fmt: skip
    plain, writing = [], []
    for _ in range(args.repeats):
        plain.append(asyncio.run(train_rate(2 * args.seconds, None)))
        folder = tempfile.mkdtemp(prefix="asyncflow-bench-")
        try:
            writing.append(asyncio.run(train_rate(2 * args.seconds, folder)))
        finally:
            shutil.rmtree(folder)
    a, b = statistics.median(plain), statistics.median(writing)
    print_table(f"PPO training on {ENV} (its defaults), env steps/s over {2 * args.seconds:g} s, median of "
                f"{args.repeats} interleaved runs", ["run", "training", "training + output=", "cost of writing"],
                [["PPO from scratch", a, b, f"{100 * (1 - b / a):.1f} %"]])  # fmt: skip


def make_dataset(folder: Path, policy: Any, steps: int) -> None:
    worker = RolloutWorker(ENV, num_envs=8, rollout_fragment_length=steps // 8, policy_factory=policy,
                           output=Output(str(folder)))  # fmt: skip
    worker.sample()
    worker.close_envs()


async def asyncflow_read(folder: Path, seconds: float) -> tuple[float, float]:
    """(seconds until the first batch, rows/s served afterwards) by 2 reader actors."""
    data = open_dataset(folder)
    shares = [[str(s) for s in data.shards[i::2]] for i in range(2)]
    start = time.perf_counter()
    async with asyncflow.open_runtime() as rt:
        readers = await asyncio.gather(*(rt.spawn(DatasetShard, share, gamma=0.99, seed=i)
                                         for i, share in enumerate(shares) if share))  # fmt: skip
        batches = replay(WorkerSet(readers), 256)
        await anext(batches)
        first = time.perf_counter() - start
        rows, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            rows += len(await anext(batches))
        rate = rows / (time.perf_counter() - start)
        await batches.aclose()
    return first, rate


def minari_read(folder: Path, seconds: float) -> tuple[float, float]:
    """(seconds for a full read with ``iterate_episodes``, rows/s of ``sample_episodes(8)``)."""
    import minari

    datasets = [minari.MinariDataset(s) for s in open_dataset(folder).shards]
    start = time.perf_counter()
    for d in datasets:
        for _ in d.iterate_episodes():
            pass
    full = time.perf_counter() - start
    rows, start, i = 0, time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        rows += sum(len(e.rewards) for e in datasets[i % len(datasets)].sample_episodes(8))
        i += 1
    return full, rows / (time.perf_counter() - start)


def read(args: argparse.Namespace) -> None:
    print(f"# reading experiences ({machine_line()}); 2 reader actors, batches of 256 rows")
    rows = []
    with tempfile.TemporaryDirectory(prefix="asyncflow-bench-") as root:
        for name, label, policy in (("long", "100k steps, 500-step episodes", ScriptedCartPole),
                                    ("short", "100k steps, ~22-step episodes", RandomPolicy)):  # fmt: skip
            folder = Path(root) / name
            for half in range(2):  # two shards, as two workers write them
                make_dataset(folder / f"w{half}", policy, 50_000)
            ours_first, ours_rate = asyncio.run(asyncflow_read(folder, args.seconds))
            full, theirs_rate = minari_read(folder, args.seconds)
            rows.append([label, ours_first, full, ratio(full, ours_first), ours_rate, theirs_rate,
                         ratio(ours_rate, theirs_rate)])  # fmt: skip
    print_table("a full read (s; asyncflow: until the first batch, both readers loaded) and random rows/s",
                ["dataset", "asyncflow full read", "Minari iterate_episodes", "Minari / asyncflow",
                 "asyncflow rows/s", "Minari sample_episodes rows/s", "asyncflow / Minari"], rows)  # fmt: skip


async def pendulum_dataset(folder: Path) -> None:
    async with SAC(SACConfig(env="Pendulum-v1", output=str(folder), seed=0)) as algo:
        async for result in algo.train():
            if result["num_env_steps_sampled"] >= 8_000:
                break


async def asyncflow_cql(folder: Path, updates: int) -> tuple[float, float]:
    config = CQLConfig(input=str(folder), env="Pendulum-v1", num_workers=0, hidden=[64, 64], train_batch_size=128,
                       cql_samples=4, cql_weight=5.0, lr=3e-4, updates_per_iteration=100, evaluation_interval=10_000,
                       evaluation_episodes=20, seed=0)  # fmt: skip
    start = time.perf_counter()
    async with CQL(config) as algo:
        async for result in algo.train():
            if result["training_iteration"] * 100 >= updates:
                break
        seconds = time.perf_counter() - start
        return float((await algo.evaluate())["episode_return_mean"]), seconds


def cql(args: argparse.Namespace) -> None:
    print(f"# continuous CQL on Pendulum-v1 ({machine_line()}); the learner in one process, 2 torch threads")
    with tempfile.TemporaryDirectory(prefix="asyncflow-bench-") as root:
        folder = Path(root) / "pendulum"
        asyncio.run(pendulum_dataset(folder))
        data = open_dataset(folder)
        t = read_transitions(data.shards, 0.99)
        npz = Path(root) / "pendulum.npz"
        np.savez(npz, observations=t["obs"], actions=t["actions"], rewards=t["rewards"],
                 terminals=t["terminateds"], timeouts=t["dones"] & ~t["terminateds"])  # fmt: skip
        rows = []
        for updates in args.updates:
            ours, ours_s = asyncio.run(asyncflow_cql(folder, updates))
            theirs, theirs_s = None, None
            if args.d3rlpy_python:
                out = subprocess.run([args.d3rlpy_python, str(HERE / "_d3rlpy_cql.py"), str(npz), str(updates)],
                                     capture_output=True, text=True, check=True)  # fmt: skip
                measured = json.loads(out.stdout.strip().splitlines()[-1])
                theirs, theirs_s = measured["return"], measured["seconds"]
            rows.append([updates, ours, theirs, ours_s, theirs_s, ratio(theirs_s, ours_s)])
    print_table(f"greedy return (20 episodes) and wall time (s) of training; dataset: {data.steps} steps",
                ["gradient steps", "asyncflow return", "d3rlpy return", "asyncflow s", "d3rlpy s",
                 "d3rlpy s / asyncflow s"], rows)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["write", "read", "cql"])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--updates", type=int, nargs="+", default=[2_000, 5_000])
    parser.add_argument("--d3rlpy-python", help="a Python with d3rlpy installed (its own virtual environment)")
    args = parser.parse_args()
    for name, run in (("write", write), ("read", read), ("cql", cql)):
        if args.only in (None, name):
            run(args)


if __name__ == "__main__":
    main()
