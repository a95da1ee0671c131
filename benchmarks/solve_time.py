"""Time to solve: wall time from launching a fresh process to a target mean
episode return, median over seeds, asyncflow beside stable-baselines3 in the
same run (when it is installed).

- PPO, CartPole-v1, mean of the last 100 episodes >= 475. asyncflow: ``asyncflow
  train ppo`` with 2 worker processes; SB3: PPO with its defaults, and PPO with
  rl-baselines3-zoo's tuned CartPole-v1 settings (hyperparams/ppo.yml: 8 envs,
  n_steps 32, batch 256, 20 epochs, gae_lambda 0.8, gamma 0.98, learning rate and
  clip range linear from 1e-3 and 0.2 over 1e5 steps), its strongest configuration.
- DQN, CartPole-v1, last 100 episodes >= 150. asyncflow: ``asyncflow train dqn``
  (2 workers); SB3: DQN with rl-baselines3-zoo's tuned CartPole-v1 settings
  (SB3's defaults are Atari's and do not learn CartPole in a comparable time).
- SAC, Pendulum-v1, last 10 episodes >= -250. asyncflow: ``asyncflow train sac``
  (2 workers); SB3: SAC with rl-baselines3-zoo's Pendulum-v1 settings (lr 1e-3).

Each SB3 run stops as soon as its episode buffer averages the target, as
asyncflow's ``--stop-reward`` does (asyncflow checks after each iteration).

    python benchmarks/solve_time.py [--tasks ppo dqn sac] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import functools
import re
import statistics
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table


@dataclass(frozen=True)
class SB3Run:
    label: str  # how the row names these settings
    cls: str
    kwargs: str  # Python keyword arguments for the SB3 constructor
    steps: int  # total_timesteps given to SB3 (it shapes SB3's schedules)
    env: str = ""  # a Python expression for SB3's env (default: the id)


@dataclass(frozen=True)
class Task:
    algo: str
    env: str
    target: float
    window: int  # episodes the mean covers
    budget: int  # env steps before giving up (asyncflow)
    sb3: list[SB3Run]
    set_fields: list[str] = field(default_factory=list)


_ZOO_PPO = (
    "n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0, "
    "learning_rate=lambda p: p * 1e-3, clip_range=lambda p: p * 0.2"
)
_ZOO_DQN = (
    "learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99, "
    "target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16, "
    "exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256])"
)

TASKS = {
    "ppo": Task("ppo", "CartPole-v1", 475.0, 100, 300_000, [
        SB3Run("defaults", "PPO", "", 300_000),
        SB3Run("zoo-tuned", "PPO", _ZOO_PPO, 100_000, 'make_vec_env("CartPole-v1", n_envs=8, seed=int(sys.argv[1]))'),
    ]),
    "dqn": Task("dqn", "CartPole-v1", 150.0, 100, 100_000, [SB3Run("zoo-tuned", "DQN", _ZOO_DQN, 50_000)]),
    "sac": Task("sac", "Pendulum-v1", -250.0, 10, 30_000, [SB3Run("zoo lr 1e-3", "SAC", "learning_rate=1e-3", 20_000)],
                ["metrics_smoothing_episodes=10"]),
}  # fmt: skip

_SB3 = textwrap.dedent(
    """
    import sys
    from stable_baselines3 import {cls}
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class StopAtTarget(BaseCallback):
        solved = False

        def _on_step(self):
            buf = list(self.model.ep_info_buffer)[-{window}:]
            self.solved = len(buf) >= {window} and sum(e["r"] for e in buf) / len(buf) >= {target}
            return not self.solved

    model = {cls}("MlpPolicy", {env}, seed=int(sys.argv[1]), device="cpu", {kwargs})
    stop = StopAtTarget()
    model.learn(total_timesteps={steps}, callback=stop)
    print("STEPS", model.num_timesteps, "SOLVED", stop.solved)
    """
)


def run_asyncflow(task: Task, seed: int) -> tuple[float, int, bool]:
    sets = [arg for f in task.set_fields for arg in ("--set", f)]
    with TemporaryDirectory() as logdir:
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "asyncflow.cli", "train", task.algo, "--env", task.env, "--seed", str(seed),
             "--stop-reward", str(task.target), "--stop-timesteps", str(task.budget), "--logdir", logdir, *sets],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        wall = time.perf_counter() - start
    match = re.search(r"after \d+ iterations, (\d+) env steps", out.stdout)
    assert match, out.stdout
    return wall, int(match.group(1)), "episode_return_mean" in out.stdout.splitlines()[-1]


def run_sb3(task: Task, run: SB3Run, seed: int) -> tuple[float, int, bool] | None:
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return None
    script = _SB3.format(cls=run.cls, env=run.env or repr(task.env), kwargs=run.kwargs, steps=run.steps,
                         window=task.window, target=task.target)  # fmt: skip
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script, str(seed)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    match = re.search(r"STEPS (\d+) SOLVED (\w+)", out.stdout)
    assert match, out.stdout + out.stderr
    return wall, int(match.group(1)), match.group(2) == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=["ppo", "dqn", "sac"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    print(f"# time to a target mean return ({machine_line()}; asyncflow uses 2 worker processes)")
    summary = []
    for key in args.tasks:
        task = TASKS[key]
        rows, medians = [], {}
        runners: list[tuple[str, Any]] = [(f"asyncflow {task.algo}", functools.partial(run_asyncflow, task))]
        for r in task.sb3:
            runners.append((f"stable-baselines3 {r.cls} ({r.label})", functools.partial(run_sb3, task, r)))
        for name, runner in runners:
            runs = [runner(seed) for seed in args.seeds]
            if any(r is None for r in runs):
                rows.append([name + " (not installed)", None, None, None])
                continue
            done = [r for r in runs if r is not None]
            medians[name] = statistics.median(r[0] for r in done)
            for seed, (wall, steps, solved) in zip(args.seeds, done, strict=True):
                rows.append([f"{name}, seed {seed}", wall, steps, "yes" if solved else "no (budget)"])
        title = f"{task.env}: mean of last {task.window} episodes >= {task.target:g} (wall seconds from launch)"
        print_table(title, ["run", "seconds", "env steps", "solved"], rows)
        ours = medians.get(f"asyncflow {task.algo}")
        peers = [(name, theirs) for name, theirs in medians.items() if not name.startswith("asyncflow")]
        for name, theirs in peers:
            summary.append([key, name.removeprefix("stable-baselines3 "), ours, theirs,
                            f"{theirs / ours:.2f}x" if ours else "-"])  # fmt: skip
        if not peers:  # stable-baselines3 not installed: asyncflow's median alone
            summary.append([key, "(not installed)", ours, None, "-"])
    print_table("medians", ["task", "SB3 settings", "asyncflow s", "stable-baselines3 s", "SB3 / asyncflow"], summary)


if __name__ == "__main__":
    main()
