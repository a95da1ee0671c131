"""Atari learning at equal frames over seeds: asyncflow PPO and Stable-Baselines3 PPO, each seed of
each trained to the same number of frames, one run after another on this machine, then compared with
``asyncflow compare`` (the interquartile mean of the return at equal frames over the seeds, its 95%
stratified bootstrap interval, and the learning curves with their intervals).

Settings, preprocessing and precision are ``benchmarks/atari_learning.py``'s (rl-baselines3-zoo's
Atari PPO for both, asyncflow's Atari preprocessing for both, asyncflow's learner at the config's
``learner_precision`` unless ``--learner-precision`` says otherwise). A run's return is the mean
unclipped score of its latest 100 games.

    python benchmarks/atari_seeds.py --env ALE/Breakout-v5 --frames 1000000 --seeds 0 1 2

2 worker processes for asyncflow, 8 env processes for SB3 (its ``SubprocVecEnv``), on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table
from atari_learning import FRAME_SKIP, _return_at, _write_run, asyncflow_config, run_asyncflow, run_sb3

from asyncflow.compare import compare, plot_comparison
from asyncflow.rl.learners.precision import PRECISIONS


def _finished(folder: Path, steps: int) -> list[dict[str, Any]] | None:
    """The rows of a run this script finished before (its last row within one batch of ``steps``)."""
    if not (folder / "progress.csv").is_file():
        return None
    with open(folder / "progress.csv") as f:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    return rows if rows and rows[-1]["num_env_steps_sampled"] >= steps - 1024 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Breakout-v5")
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--systems", nargs="+", choices=["asyncflow", "sb3"], default=["asyncflow", "sb3"])
    parser.add_argument("--out", type=Path, default=Path("bench_runs") / "atari_seeds")
    parser.add_argument("--learner-precision", choices=PRECISIONS, default=None,
                        help="asyncflow's learner_precision (default: the config file's)")  # fmt: skip
    args = parser.parse_args()
    steps = args.frames // FRAME_SKIP
    name = args.env.replace("/", "-")
    print(f"# {args.env}: PPO to {args.frames:,} frames, seeds {args.seeds} ({machine_line()}); "
          "asyncflow on 2 worker processes, SB3 on 8 env processes")  # fmt: skip
    rows = []
    for seed in args.seeds:
        for system in args.systems:
            folder = args.out / f"{system}-ppo_{name}_seed{seed}"
            if (done := _finished(folder, steps)) is not None:  # an interrupted script goes on
                run, minutes = done, done[-1]["time_total_s"] / 60  # its training time (no start-up)
                print(f"{system} seed {seed}: finished before, read from {folder}", flush=True)
                rows.append([system, seed, int(run[-1]["num_env_steps_sampled"]) * FRAME_SKIP, minutes,
                             _return_at(run, steps)])  # fmt: skip
                continue
            start = time.perf_counter()
            if system == "asyncflow":
                run = asyncio.run(run_asyncflow(asyncflow_config(args.env, seed, args.learner_precision), 1e9, steps))
            else:
                run = run_sb3(args.env, 1e9, seed, steps)
            minutes = (time.perf_counter() - start) / 60
            _write_run(folder, {"system": system, "env": args.env, "seed": seed}, run)
            rows.append([system, seed, int(run[-1]["num_env_steps_sampled"]) * FRAME_SKIP, minutes,
                         _return_at(run, steps)])  # fmt: skip
            print(f"{system} seed {seed}: {minutes:.1f} min, return {rows[-1][-1]:.2f}", flush=True)
    print_table(f"{args.env}: each run to {args.frames:,} frames", ["system", "seed", "frames", "minutes",
                f"return at {args.frames:,} frames"], rows)  # fmt: skip
    comparison = compare([args.out], at_steps=steps)
    print_table(f"asyncflow compare {args.out} --at-steps {steps}: return at {args.frames:,} frames over the seeds",
                ["setting", "runs", "IQM", "95% CI", "mean", "median"],
                [[s.label, s.num_runs, s.iqm.point, f"[{s.iqm.low:.2f}, {s.iqm.high:.2f}]", float(s.scores.mean()),
                  float(np.median(s.scores))] for s in comparison.settings])  # fmt: skip
    print(f"\nplot: {plot_comparison(comparison, args.out / 'compare.png')}")


if __name__ == "__main__":
    main()
