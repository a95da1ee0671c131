"""A small hyperparameter sweep: two learning rates x three seeds of PPO on
CartPole, each logged to its own run folder, then one plot with a mean curve
and a band per learning rate.

    python examples/sweep.py [--stop-timesteps 40000] [--logdir sweep_runs]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from asyncflow.algorithms import PPO, PPOConfig
from asyncflow.experiment import Stop, make_run_dir, run_experiment
from asyncflow.plot import plot_runs


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stop-timesteps", type=int, default=40_000)
    parser.add_argument("--logdir", type=Path, default=Path("sweep_runs"))
    parser.add_argument("--lrs", type=float, nargs="+", default=[3e-3, 3e-4])
    args = parser.parse_args()
    run_dirs = []
    for lr in args.lrs:
        for seed in (0, 1, 2):
            run_dir = make_run_dir(args.logdir, f"ppo-lr{lr:g}", "CartPole-v1")
            last, _ = await run_experiment(
                PPO(PPOConfig(lr=lr, seed=seed)), Stop(timesteps=args.stop_timesteps), run_dir
            )
            assert last is not None
            print(f"lr {lr:g} seed {seed}: return {last['episode_return_mean']:.1f} -> {run_dir}")
            run_dirs.append(run_dir)
    out = plot_runs(run_dirs, args.logdir / "sweep.png")
    print(f"plot: {out}")


if __name__ == "__main__":
    asyncio.run(main())
