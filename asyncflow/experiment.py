"""Running an algorithm until a stop condition, with a run folder of logs.

Each run gets a fresh folder ``LOGDIR/ALGO_ENV_YYYYmmdd-HHMMSS`` holding
``params.json`` (the config) and ``progress.csv`` (one row per iteration).
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .algorithms import Algorithm

__all__ = ["Stop", "run_experiment"]

CSV_FIELDS = [
    "training_iteration",
    "num_env_steps_sampled",
    "num_env_steps_trained",
    "episode_return_mean",
    "episode_return_min",
    "episode_return_max",
    "episode_len_mean",
    "episodes_this_iter",
    "num_env_steps_sampled_throughput_per_sec",
    "time_total_s",
    "num_workers_restarted",
]


@dataclass(frozen=True)
class Stop:
    reward: float | None = None
    timesteps: int | None = None
    seconds: float | None = None

    def reached(self, result: dict[str, Any]) -> str | None:
        ret = result["episode_return_mean"]
        if self.reward is not None and not math.isnan(ret) and ret >= self.reward:
            return f"episode_return_mean {ret:.1f} >= {self.reward:g}"
        if self.timesteps is not None and result["num_env_steps_sampled"] >= self.timesteps:
            return f"num_env_steps_sampled >= {self.timesteps}"
        if self.seconds is not None and result["time_total_s"] >= self.seconds:
            return f"time_total_s >= {self.seconds:g}"
        return None


def make_run_dir(logdir: Path, algo: str, env: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = logdir / f"{algo}_{env.replace('/', '-')}_{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = Path(f"{base}_{n}")
    path.mkdir(parents=True)
    return path


async def run_experiment(
    algo: Algorithm, stop: Stop, run_dir: Path, on_result: Callable[[dict[str, Any]], None] | None = None
) -> tuple[dict[str, Any] | None, str]:
    """Train until ``stop``; returns the last result and why it stopped."""
    (run_dir / "params.json").write_text(json.dumps(algo.config.to_dict(), indent=2, default=str) + "\n")
    last: dict[str, Any] | None = None
    with open(run_dir / "progress.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        async with algo:
            async for result in algo.train():
                last = result
                writer.writerow(result)
                f.flush()
                if on_result is not None:
                    on_result(result)
                reason = stop.reached(result)
                if reason is not None:
                    return last, reason
    return last, "the plan ended"
