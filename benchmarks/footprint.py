"""Memory: PSS and RSS of every process a training run uses, asyncflow beside
its peers in the same run.

- asyncflow: ``PPO(PPOConfig(env="CartPole-v1", num_workers=2))`` after 3
  training iterations: the driver, the fork server, the 2 rollout workers and
  multiprocessing's resource tracker;
- stable-baselines3 (when installed): ``PPO("MlpPolicy", SubprocVecEnv`` with
  2 CartPole envs) after one ``learn`` of 3 rollouts: the driver and its 2 env
  processes (and the fork server of SubprocVecEnv's default start method);
- RLlib (when installed): ``PPOConfig().environment("CartPole-v1")
  .env_runners(num_env_runners=2).build()`` after 3 ``train()`` calls, every
  process of its local Ray (``num_cpus=2``, no dashboard).

PSS (proportional set size, ``/proc/PID/smaps_rollup``) splits each shared page
among the processes that map it, so the column adds up to what the run costs
the machine; RSS counts shared pages in full in each process. A shared-memory
ring's pages count once touched: after 3 iterations asyncflow's rings (2 of
8 MiB per actor, printed on their own line) are mostly untouched; a long run
touches them all, up to that line's size more. Target (issue
13): asyncflow at most 400 MB PSS in all.

    python benchmarks/footprint.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table

_ASYNCFLOW = textwrap.dedent(
    """
    import asyncio, sys
    from asyncflow.algorithms import PPO, PPOConfig

    async def main():
        async with PPO(PPOConfig(env="CartPole-v1", num_workers=2, seed=0)) as algo:
            n = 0
            async for _ in algo.train():
                n += 1
                if n == 3:
                    break
            print("READY", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    asyncio.run(main())
    """
)

_SB3 = textwrap.dedent(
    """
    import sys
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    if __name__ == "__main__":
        env = make_vec_env("CartPole-v1", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv)
        model = PPO("MlpPolicy", env, seed=0, device="cpu")
        model.learn(total_timesteps=3 * model.n_steps * 2)
        print("READY", flush=True)
        sys.stdin.readline()
        env.close()
    """
)

_RLLIB = textwrap.dedent(
    """
    import sys
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2).build()
    for _ in range(3):
        algo.train()
    print("READY", flush=True)
    sys.stdin.readline()
    algo.stop()
    ray.shutdown()
    """
)


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        tree.setdefault(ppid, []).append(int(name))
    return tree


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it, each after its parent."""
    tree, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(tree.get(pid, []))
    return out


def _memory_mb(pid: int) -> tuple[float, float]:
    pss = rss = 0.0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) / 1024
            elif line.startswith("Rss:"):
                rss = int(line.split()[1]) / 1024
    return pss, rss


def _role(pid: int, root: int, servers: set[int]) -> str:
    """What a process is; ``servers`` collects the fork servers seen so far (parents come first)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    with open(f"/proc/{pid}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{pid}/comm") as f:
        comm = f.read().strip()
    if pid == root:
        return "driver"
    if ppid in servers:
        return "worker (forked by the server)"
    for marker, role in (("forkserver", "fork server"), ("resource_tracker", "resource tracker")):
        if marker in cmdline:
            servers.update([pid] if role == "fork server" else [])
            return role
    return comm if comm not in ("python", "python3") else "worker"


def _shm_mb(pids: list[int]) -> float:
    """Size of the /dev/shm files these processes map (each once)."""
    files: set[str] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                files.update(line.split(None, 5)[5].strip() for line in f if "/dev/shm/" in line)
        except OSError:
            continue
    return float(sum(os.path.getsize(p) for p in files if os.path.exists(p))) / 2**20


def measure(script: str) -> list[tuple[str, int, float, float]]:
    """(role, pid, PSS MB, RSS MB) of every process of ``script`` once it prints READY."""
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        if not line.startswith("READY"):
            proc.kill()
            raise RuntimeError(proc.communicate()[1][-2000:])
        rows, servers = [], set[int]()
        for pid in _descendants(proc.pid):
            try:
                rows.append((_role(pid, proc.pid, servers), pid, *_memory_mb(pid)))
            except OSError:  # gone between the listing and the look
                continue
        shm = _shm_mb([r[1] for r in rows])
        rows.append(("(/dev/shm reserved, MB; in PSS as far as touched)", 0, shm, shm))
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.communicate(timeout=120)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    print(f"# memory of a PPO CartPole-v1 run with 2 env processes, every process counted ({machine_line()})")
    totals: list[list[object]] = []
    for name, script, needs in [("asyncflow", _ASYNCFLOW, None), ("stable-baselines3", _SB3, "stable_baselines3"),
                                ("RLlib", _RLLIB, "ray.rllib")]:  # fmt: skip
        if needs is not None and not _installed(needs):
            totals.append([f"{name} (not installed)", None, None, None])
            continue
        try:
            rows = sorted(measure(script), key=lambda r: (r[0] != "driver", r[0], r[1]))
        except RuntimeError as exc:  # a peer installed without what it imports (RLlib without ray[tune])
            if needs is None:
                raise
            reason = str(exc).strip().splitlines()[-1]
            print(f"# {name} did not start: {reason}")
            totals.append([f"{name} (did not start)", None, None, None])
            continue
        print_table(f"{name}: per process (MB)", ["process", "pid", "PSS", "RSS"], [list(r) for r in rows])
        procs = [r for r in rows if r[1]]
        totals.append([name, len(procs), sum(r[2] for r in procs), sum(r[3] for r in procs)])
    ours = totals[0][2]
    for row in totals:
        pss = row[2]
        row.append(f"{pss / ours:.2f}x" if isinstance(pss, float) and isinstance(ours, float) else "-")
    header = ["system", "processes", "PSS MB", "RSS MB", "PSS / asyncflow"]
    print_table("totals (target: asyncflow PSS <= 400 MB)", header, totals)


if __name__ == "__main__":
    main()
