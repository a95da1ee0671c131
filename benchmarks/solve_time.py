"""Time to solve CartPole-v1: wall time from launching a fresh process to a
mean episode return of 475 (over the last 100 episodes), median of several
seeds, for asyncflow's PPO (``asyncflow train ppo``, 2 worker processes) and,
when stable-baselines3 is installed, SB3's PPO with its defaults, in the same run.

    python benchmarks/solve_time.py [--seeds 0 1 2] [--budget 300000]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table

TARGET = 475.0

_SB3 = textwrap.dedent(
    """
    import sys
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    class StopAtTarget(BaseCallback):
        # Stops as soon as the last 100 episodes average the target, like
        # asyncflow's --stop-reward (which checks after each iteration).
        solved = False

        def _on_step(self):
            buf = self.model.ep_info_buffer
            self.solved = len(buf) >= 100 and sum(e["r"] for e in buf) / len(buf) >= {target}
            return not self.solved

    model = PPO("MlpPolicy", "CartPole-v1", seed=int(sys.argv[1]), device="cpu")
    stop = StopAtTarget()
    model.learn(total_timesteps=int(sys.argv[2]), callback=stop)
    print("STEPS", model.num_timesteps, "SOLVED", stop.solved)
    """
).format(target=TARGET)


def run_asyncflow(seed: int, budget: int) -> tuple[float, int, bool]:
    with TemporaryDirectory() as logdir:
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "asyncflow.cli", "train", "ppo", "--env", "CartPole-v1", "--seed", str(seed),
             "--stop-reward", str(TARGET), "--stop-timesteps", str(budget), "--logdir", logdir],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        wall = time.perf_counter() - start
    match = re.search(r"after \d+ iterations, (\d+) env steps", out.stdout)
    assert match, out.stdout
    return wall, int(match.group(1)), "episode_return_mean" in out.stdout.splitlines()[-1]


def run_sb3(seed: int, budget: int) -> tuple[float, int, bool] | None:
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return None
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _SB3, str(seed), str(budget)], capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - start
    match = re.search(r"STEPS (\d+) SOLVED (\w+)", out.stdout)
    assert match, out.stdout + out.stderr
    return wall, int(match.group(1)), match.group(2) == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=300_000, help="give up after this many env steps")
    args = parser.parse_args()
    print(f"# time to a mean return of {TARGET:g} on CartPole-v1 ({machine_line()})")
    rows, medians = [], {}
    for name, runner in [("asyncflow PPO (2 workers)", run_asyncflow), ("stable-baselines3 PPO (defaults)", run_sb3)]:
        runs = [runner(seed, args.budget) for seed in args.seeds]
        if any(r is None for r in runs):
            rows.append([name + " (not installed)", None, None, None])
            continue
        done = [r for r in runs if r is not None]
        walls = [r[0] for r in done]
        medians[name] = statistics.median(walls)
        for seed, (wall, steps, solved) in zip(args.seeds, done, strict=True):
            rows.append([f"{name}, seed {seed}", wall, steps, "yes" if solved else "no (budget)"])
    print_table("wall seconds from launch", ["run", "seconds", "env steps", "solved"], rows)
    for name, median in medians.items():
        print(f"median {name}: {median:.1f} s")
    if len(medians) == 2:
        ours, theirs = medians.values()
        print(f"stable-baselines3 / asyncflow: {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
