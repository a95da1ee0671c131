"""Soak: PPO and Ape-X train side by side, in one driver, for M minutes, while
every K seconds a random rollout worker or Ape-X replay shard is killed with
SIGKILL or frozen with SIGSTOP (``--faults kill,freeze``, one or the other at
random; a frozen process must miss a call's deadline, ``worker_timeout_s``, and
be killed and replaced: how long that took is reported). Every S seconds it
samples, over the driver and all its descendant processes (fork server,
resource tracker, workers, shards): RSS and PSS (from /proc/PID/smaps_rollup),
open fds, threads, and asyncflow's segments in /dev/shm. It prints each
resource at the end of the warm-up and at the end, its slope after the warm-up
(least squares), and the env steps per second of both algorithms over time;
with ``--json`` it also writes everything it saw.

    python benchmarks/soak.py --minutes 60 [--kill-every 30] [--faults kill,freeze] [--deadline 10]

Targets (issue "Reliability in training"): RSS growth under 5% after the
warm-up, constant fds, threads and segments, and training that goes on
through every kill and freeze; each freeze detected within its deadline.
2 cores: 2 PPO workers, 2 Ape-X workers, 2 replay shards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table

from asyncflow.actors._ring import SEGMENT_PREFIX
from asyncflow.algorithms import PPO, Algorithm, ApexDQN, ApexDQNConfig, PPOConfig
from asyncflow.rl.sampling.worker_set import WorkerTimeoutWarning

RESTARTS = 10_000  # no limit in practice: a soak kills far more often than a run would crash


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _process(pid: int) -> dict[str, float] | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            fields = {line.split(":")[0]: line.split()[1] for line in f if ":" in line}
        with open(f"/proc/{pid}/status") as f:
            threads = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None  # it ended while we looked
    return {"rss_mb": int(fields["Rss"]) / 1024, "pss_mb": int(fields["Pss"]) / 1024, "fds": fds, "threads": threads}


def sample(root: int) -> dict[str, float]:
    """Totals over ``root`` and its descendants, and the segments ``root`` made in /dev/shm."""
    totals = {"rss_mb": 0.0, "pss_mb": 0.0, "fds": 0.0, "threads": 0.0, "processes": 0.0}
    for pid in _descendants(root):
        stats = _process(pid)
        if stats is None:
            continue
        totals["processes"] += 1
        for key, value in stats.items():
            totals[key] += value
    mine = f"{SEGMENT_PREFIX}{root}_"  # this driver's: another run's segments are not ours to count
    totals["segments"] = float(len([n for n in os.listdir("/dev/shm") if n.startswith(mine)]))
    return totals


def slope(times: list[float], values: list[float]) -> float:
    """Least-squares slope, per minute."""
    if len(times) < 2:
        return 0.0
    mean_t, mean_v = statistics.fmean(times), statistics.fmean(values)
    var = sum((t - mean_t) ** 2 for t in times)
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values, strict=True)) / var if var else 0.0


async def _train(algo: Algorithm, name: str, steps: list[tuple[float, str, int]], start: float) -> None:
    async for result in algo.train():
        steps.append((time.monotonic() - start, name, int(result["num_env_steps_sampled"])))


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie not yet reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


async def _fault(
    ppo: PPO, apex: ApexDQN, every: float, faults: list[str], kills: list[dict[str, Any]], start: float, seed: int
) -> None:
    rng = random.Random(seed)
    while True:
        await asyncio.sleep(every)
        targets = [("ppo worker", w) for w in ppo.workers.workers] + [("apex worker", w) for w in apex.workers.workers]
        targets += [("apex replay shard", s) for s in apex.resources.workers]
        frozen = {k["pid"] for k in kills if k["fault"] == "freeze" and "detected_s" not in k}
        kind, actor = rng.choice([t for t in targets if t[1].pid is not None and t[1].alive and t[1].pid not in frozen])
        fault = rng.choice(faults)
        os.kill(actor.pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)  # type: ignore[arg-type]
        kills.append(
            {"t": time.monotonic() - start, "kind": kind, "name": actor.name, "pid": actor.pid, "fault": fault}
        )


async def _watch_freezes(kills: list[dict[str, Any]], start: float) -> None:
    """Note when each frozen process is gone (killed on a missed deadline)."""
    while True:
        await asyncio.sleep(0.25)
        for k in kills:
            if k["fault"] == "freeze" and "detected_s" not in k and _gone(k["pid"]):
                k["detected_s"] = time.monotonic() - start - k["t"]


async def _sample(every: float, samples: list[dict[str, float]], start: float) -> None:
    while True:
        samples.append({"t": time.monotonic() - start, **sample(os.getpid())})
        await asyncio.sleep(every)


async def soak(
    minutes: float,
    kill_every: float,
    sample_every: float,
    seed: int = 0,
    faults: tuple[str, ...] = ("kill",),
    deadline: float = 10.0,
) -> dict[str, Any]:
    """Run the soak; returns what it saw (samples, faults, steps, and the state before and after)."""
    before = sample(os.getpid())
    ppo = PPO(PPOConfig(num_workers=2, seed=seed, max_worker_restarts=RESTARTS, worker_timeout_s=deadline))
    apex = ApexDQN(ApexDQNConfig(num_workers=2, seed=seed, max_worker_restarts=RESTARTS, worker_timeout_s=deadline,
                                 max_replay_restarts=RESTARTS, buffer_size=50_000))  # fmt: skip
    samples: list[dict[str, float]] = []
    kills: list[dict[str, Any]] = []
    steps: list[tuple[float, str, int]] = []
    async with ppo, apex:
        start = time.monotonic()
        tasks = [
            asyncio.ensure_future(_train(ppo, "ppo", steps, start)),
            asyncio.ensure_future(_train(apex, "apex", steps, start)),
            asyncio.ensure_future(_fault(ppo, apex, kill_every, list(faults), kills, start, seed)),
            asyncio.ensure_future(_watch_freezes(kills, start)),
            asyncio.ensure_future(_sample(sample_every, samples, start)),
        ]
        with warnings.catch_warnings():  # each missed deadline warns (WorkerTimeoutWarning): expected here
            warnings.simplefilter("ignore", WorkerTimeoutWarning)
            done, _ = await asyncio.wait(tasks, timeout=minutes * 60, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            task.result()  # a plan that failed fails the soak
        restarts = {"ppo": ppo.workers.restarted, "apex": apex.workers.restarted,
                    "apex_shards": sum(s.restarts for s in apex.resources.workers)}  # fmt: skip
        end_inside = sample(os.getpid())
    await asyncio.sleep(0.5)  # the resource tracker and fork server settle
    return {"before": before, "inside_end": end_inside, "after": sample(os.getpid()), "samples": samples,
            "kills": kills, "steps": steps, "restarts": restarts, "minutes": minutes, "deadline": deadline}  # fmt: skip


def report(run: dict[str, Any], warmup_fraction: float) -> dict[str, Any]:
    """Print the tables; return the summary figures."""
    samples = run["samples"]
    cut = samples[int(len(samples) * warmup_fraction)]["t"] if samples else 0.0
    late = [s for s in samples if s["t"] >= cut]
    rows, summary = [], {}
    for key, unit in [("rss_mb", "MB"), ("pss_mb", "MB"), ("fds", ""), ("threads", ""), ("segments", ""),
                      ("processes", "")]:  # fmt: skip
        first, last = late[0][key], late[-1][key]
        per_min = slope([s["t"] for s in late], [s[key] for s in late])
        growth = (last - first) / first if first else 0.0
        summary[key] = {"warm": first, "end": last, "slope_per_min": per_min, "growth": growth,
                        "min": min(s[key] for s in late), "max": max(s[key] for s in late)}  # fmt: skip
        rows.append([f"{key} ({unit})" if unit else key, first, last, per_min, f"{100 * growth:+.1f}%",
                     summary[key]["min"], summary[key]["max"]])  # fmt: skip
    header = ["resource", "after warm-up", "at the end", "slope per minute", "growth", "min", "max"]
    print_table(f"resources after the warm-up (from t={cut:.0f} s; {len(late)} samples), all processes together",
                header, rows)  # fmt: skip
    buckets: dict[tuple[str, int], list[tuple[float, int]]] = {}
    width = max(60.0, run["minutes"] * 60 / 12)
    for t, name, n in run["steps"]:
        buckets.setdefault((name, int(t // width)), []).append((t, n))
    trows = []
    for index in sorted({b for _, b in buckets}):
        row: list[Any] = [f"{index * width / 60:.0f}-{(index + 1) * width / 60:.0f} min"]
        for name in ("ppo", "apex"):
            points = buckets.get((name, index), [])
            rate = (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0]) if len(points) > 1 else None
            row.append(rate)
        row.append(sum(1 for k in run["kills"] if index * width <= k["t"] < (index + 1) * width))
        trows.append(row)
    print_table("env steps per second over time", ["window", "PPO", "Ape-X", "kills"], trows)
    kinds: dict[str, int] = {}
    for k in run["kills"]:
        name = f"{k['kind']} {'killed' if k['fault'] == 'kill' else 'frozen'}"
        kinds[name] = kinds.get(name, 0) + 1
    print(f"\nfaults: {len(run['kills'])} ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}); "
          f"restarts seen: {run['restarts']}")  # fmt: skip
    freezes = [k for k in run["kills"] if k["fault"] == "freeze"]
    detected = sorted(k["detected_s"] for k in freezes if "detected_s" in k)
    if freezes:
        frows = [[len(freezes), len(detected), statistics.median(detected) if detected else None,
                  max(detected) if detected else None, run["deadline"]]]  # fmt: skip
        print_table("freezes (SIGSTOP): from the freeze to the frozen process gone (killed on a missed deadline)",
                    ["frozen", "detected", "median s", "max s", "deadline s"], frows)  # fmt: skip
        summary["freezes"] = {"frozen": len(freezes), "detected": len(detected), "detected_s": detected}
    b, a = run["before"], run["after"]
    print(f"before the run: {b['processes']:.0f} processes, {b['segments']:.0f} segments, {b['fds']:.0f} fds, "
          f"{b['threads']:.0f} threads; after it: {a['processes']:.0f} processes, {a['segments']:.0f} segments, "
          f"{a['fds']:.0f} fds, {a['threads']:.0f} threads")  # fmt: skip
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--kill-every", type=float, default=30.0, help="seconds between faults")
    parser.add_argument("--faults", default="kill,freeze", help="what a fault is: kill, freeze, or both (kill,freeze)")
    parser.add_argument("--deadline", type=float, default=10.0, help="worker_timeout_s of both runs")
    parser.add_argument("--sample-every", type=float, default=10.0, help="seconds between resource samples")
    parser.add_argument("--warmup", type=float, default=0.25, help="fraction of the run counted as warm-up")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write what was seen here")
    args = parser.parse_args()
    faults = tuple(f.strip() for f in args.faults.split(","))
    if not faults or set(faults) - {"kill", "freeze"}:
        parser.error("--faults: kill, freeze, or kill,freeze")
    print(f"# soak: PPO + Ape-X on CartPole-v1 for {args.minutes:g} min, a fault ({'/'.join(faults)}) every "
          f"{args.kill_every:g} s, worker_timeout_s={args.deadline:g} ({machine_line()}; 2 PPO workers, "
          "2 Ape-X workers, 2 replay shards)")  # fmt: skip
    run = asyncio.run(soak(args.minutes, args.kill_every, args.sample_every, args.seed, faults, args.deadline))
    run["summary"] = report(run, args.warmup)
    if args.json is not None:
        args.json.write_text(json.dumps(run))


if __name__ == "__main__":
    main()
