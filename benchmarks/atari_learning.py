"""Atari learning for a fixed wall-clock budget: asyncflow PPO and Stable-Baselines3 PPO, one
after the other on this machine, same hyperparameters, same preprocessing, same budget.

Hyperparameters: ``examples/atari/ppo.yaml`` (rl-baselines3-zoo's Atari PPO: 8 envs x 128 steps,
4 epochs of minibatches of 256, lr 2.5e-4, clip 0.1, entropy 0.01, value 0.5, GAE 0.95, gradient
norm 0.5, advantages standardized per minibatch), both with constant lr and clip, and the Nature
CNN with one 512-unit layer (SB3's ``CnnPolicy``; asyncflow's CNN encoder with ``hidden: [512]``).
Preprocessing: asyncflow's Atari default (``asyncflow.rl.envs.atari.AtariEnv``) for both; SB3 steps its
8 envs in a ``SubprocVecEnv``.

Precision: asyncflow's learner takes the config's ``learner_precision: auto``, which is bfloat16
mixed precision on a CPU with AMX or AVX512-BF16 and float32 elsewhere; SB3 has no such option and
trains in float32. ``--learner-precision float32`` runs asyncflow in float32 too.

Returns are whole games' unclipped scores (the mean of the latest 100 games, as
``episode_return_mean``), recorded for SB3 from the same ``GameScore`` wrapper.

    python benchmarks/atari_learning.py --env ALE/Breakout-v5 --minutes 20 [--learner-precision float32]

Prints frames trained, frames/s and the return curve for both, and draws them with
``asyncflow plot`` (``<out>/curve.png``). 2 worker processes for asyncflow; torch uses 1
thread in each worker and 2 in each learner.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table, ratio

from asyncflow.algorithms import PPO, PPOConfig
from asyncflow.config_file import load_config_file
from asyncflow.plot import plot_runs
from asyncflow.rl.envs.atari import AtariEnv
from asyncflow.rl.learners.device import resolve_device
from asyncflow.rl.learners.precision import PRECISIONS, resolve_precision

ROOT = Path(__file__).resolve().parent.parent
FRAME_SKIP = 4
COLUMNS = ["training_iteration", "num_env_steps_sampled", "time_total_s", "episode_return_mean", "episodes_total"]


def _write_run(folder: Path, params: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.json").write_text(json.dumps(params, indent=2, default=str) + "\n")
    with open(folder / "progress.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def asyncflow_config(env: str, seed: int, precision: str | None = None) -> PPOConfig:
    """``examples/atari/ppo.yaml`` for ``env``; ``precision`` overrides its ``learner_precision``."""
    settings = {k: v for k, v in load_config_file(ROOT / "examples" / "atari" / "ppo.yaml").items() if k != "env"}
    if precision is not None:
        settings["learner_precision"] = precision
    return PPOConfig(**settings, env=env, seed=seed, sample_timeout_s=600.0)


async def run_asyncflow(config: PPOConfig, seconds: float, steps: float = float("inf")) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    async with PPO(config) as algo:
        async for result in algo.train():
            rows.append({k: result[k] for k in COLUMNS})
            if result["time_total_s"] >= seconds or result["num_env_steps_sampled"] >= steps:
                break
    return rows


def run_sb3(env: str, seconds: float, seed: int, steps: float = float("inf")) -> list[dict[str, Any]]:
    import torch
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import SubprocVecEnv

    torch.set_num_threads(2)
    envs = SubprocVecEnv([AtariEnv(env)] * 8, start_method="forkserver")
    envs.seed(seed)
    rows: list[dict[str, Any]] = []
    games: deque[float] = deque(maxlen=100)
    start = time.perf_counter()

    class Record(BaseCallback):
        episodes = 0

        def _on_step(self) -> bool:
            return time.perf_counter() - start < seconds and self.num_timesteps < steps

        def _on_rollout_end(self) -> None:
            for finished in self.training_env.env_method("take_games"):
                games.extend(score for score, _ in finished)
                self.episodes += len(finished)
            rows.append({"training_iteration": len(rows) + 1, "num_env_steps_sampled": self.num_timesteps,
                         "time_total_s": time.perf_counter() - start,
                         "episode_return_mean": sum(games) / len(games) if games else float("nan"),
                         "episodes_total": self.episodes})  # fmt: skip

    model = SB3PPO("CnnPolicy", envs, n_steps=128, batch_size=256, n_epochs=4, learning_rate=2.5e-4,
                   clip_range=0.1, ent_coef=0.01, vf_coef=0.5, gae_lambda=0.95, gamma=0.99, max_grad_norm=0.5,
                   seed=seed, device="cpu", verbose=0)  # fmt: skip
    model.learn(total_timesteps=10**9, callback=Record())
    envs.close()
    return rows


def _return_at(rows: list[dict[str, Any]], steps: int) -> float:
    """The last reported return at or before ``steps`` env steps."""
    before = [
        r for r in rows if r["num_env_steps_sampled"] <= steps and r["episode_return_mean"] == r["episode_return_mean"]
    ]
    return float(before[-1]["episode_return_mean"]) if before else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Breakout-v5")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench_runs") / "atari_learning")
    parser.add_argument("--learner-precision", choices=PRECISIONS, default=None,
                        help="asyncflow's learner_precision (default: the config file's)")  # fmt: skip
    args = parser.parse_args()
    seconds = 60 * args.minutes
    config = asyncflow_config(args.env, args.seed, args.learner_precision)
    dtype = resolve_precision(config.learner_precision, resolve_device(config.learner_device))
    print(f"# {args.env}, PPO for {args.minutes:g} min each ({machine_line()}); asyncflow on 2 worker processes, "
          f"learner_precision={config.learner_precision} ({'bfloat16' if dtype else 'float32'} on this CPU); "
          "SB3 in float32")  # fmt: skip
    ours = asyncio.run(run_asyncflow(config, seconds))
    theirs = run_sb3(args.env, seconds, args.seed)
    name = args.env.replace("/", "-")
    _write_run(args.out / f"asyncflow-ppo_{name}", {"system": "asyncflow", "env": args.env, "seed": args.seed}, ours)
    _write_run(args.out / f"sb3-ppo_{name}", {"system": "sb3", "env": args.env, "seed": args.seed}, theirs)

    rows = []
    for label, run in (("asyncflow PPO", ours), ("SB3 PPO", theirs)):
        last = run[-1]
        steps, elapsed = last["num_env_steps_sampled"], last["time_total_s"]
        rows.append([label, steps * FRAME_SKIP, FRAME_SKIP * steps / elapsed, 60 * FRAME_SKIP * steps / elapsed,
                     last["episodes_total"], last["episode_return_mean"]])  # fmt: skip
    header = ["system", "frames trained", "frames/s", "frames/min", "games", "return (last 100 games)"]
    print_table(f"{args.env}: {args.minutes:g} minutes each (frames = 4 x env steps)", header, rows)
    print(f"\nframes per minute, asyncflow / SB3: {ratio(rows[0][3], rows[1][3])}")

    common = min(ours[-1]["num_env_steps_sampled"], theirs[-1]["num_env_steps_sampled"])
    marks = [int(common * f) for f in (0.25, 0.5, 0.75, 1.0)]
    curve = [[m * FRAME_SKIP, _return_at(ours, m), _return_at(theirs, m)] for m in marks]
    print_table("return at equal frames (mean of the latest 100 games)", ["frames", "asyncflow PPO", "SB3 PPO"], curve)
    for label, run in (("asyncflow", ours), ("sb3", theirs)):
        print(f"\n{label} curve (minute, frames, return):")
        for r in run[:: max(1, len(run) // 20)]:
            print(f"  {r['time_total_s'] / 60:5.1f}  {r['num_env_steps_sampled'] * FRAME_SKIP:>10,}  "
                  f"{r['episode_return_mean']:.2f}")  # fmt: skip
    png = plot_runs([args.out / f"asyncflow-ppo_{name}", args.out / f"sb3-ppo_{name}"], args.out / "curve.png")
    print(f"\nplot: {png}")


if __name__ == "__main__":
    main()
