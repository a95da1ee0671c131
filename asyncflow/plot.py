"""Learning curves from run folders: return against env steps and wall time.

    asyncflow plot runs/ppo_CartPole-v1_* -o curve.png

Each run's ``progress.csv`` gives the points. A run alone is drawn as its raw
points and a smoothed line; runs that share a config except for the seed are
drawn as one curve: the mean of their smoothed curves with a band from the
lowest to the highest, on a common x grid. A run that evaluated during
training (``evaluation_interval``) also gets its evaluation returns, dashed, at
the steps where each evaluation was reported.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ConfigError

__all__ = ["Run", "group_runs", "load_run", "plot_runs", "smooth"]


@dataclass(frozen=True)
class Run:
    """One run folder's curve: env steps, wall seconds and returns per iteration, and its evaluations."""

    path: Path
    label: str
    group: str  # the config without its seed
    steps: np.ndarray
    seconds: np.ndarray
    returns: np.ndarray
    evaluations: np.ndarray  # rows of (steps, seconds, evaluation return) where one was new


def load_run(path: str | os.PathLike[str]) -> Run:
    """A run folder's curve (points with a finished episode) and its config group."""
    path = Path(path)
    try:
        with open(path / "progress.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        params = json.loads((path / "params.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"plot: {path} is not a run folder (needs progress.csv and params.json): {exc}") from exc
    points = [(float(r["num_env_steps_sampled"]), float(r["time_total_s"]), float(r["episode_return_mean"] or "nan"))
              for r in rows]  # fmt: skip
    points = [p for p in points if not math.isnan(p[2])]
    evaluations, seen = [], None
    for r in rows:
        key, value = r.get("evaluation/training_iteration"), r.get("evaluation/episode_return_mean")
        if key and value and key != seen:  # a new evaluation finished by this row
            seen = key
            evaluations.append((float(r["num_env_steps_sampled"]), float(r["time_total_s"]), float(value)))
    if not points:
        raise ConfigError(f"plot: {path} has no finished episodes yet")
    steps, seconds, returns = (np.array(column) for column in zip(*points, strict=True))
    name = path.name.rsplit("_", 1)[0] if "_" in path.name else path.name
    group = json.dumps({k: v for k, v in params.items() if k != "seed"}, sort_keys=True, default=str)
    label = f"{name} seed {params.get('seed', '?')}"
    return Run(path, label, group, steps, seconds, returns, np.array(evaluations, dtype=float).reshape(-1, 3))


def smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """An exponential moving average (TensorBoard's smoothing), debiased at the start."""
    out = np.empty_like(values, dtype=float)
    running, norm = 0.0, 0.0
    for i, v in enumerate(values):
        running = weight * running + (1 - weight) * v
        norm = weight * norm + (1 - weight)
        out[i] = running / norm
    return out


def group_runs(runs: Sequence[Run]) -> list[list[Run]]:
    """Runs with the same config apart from the seed, in first-seen order."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.group, []).append(run)
    return list(groups.values())


def plot_runs(
    run_dirs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *, smoothing: float = 0.6
) -> Path:
    """Draw every run (or group of seeds) into ``out`` (PNG, or any format matplotlib writes)."""
    if not run_dirs:
        raise ConfigError("plot: name at least one run folder")
    if not 0 <= smoothing < 1:
        raise ConfigError(f"plot: --smooth must be in [0, 1), not {smoothing}")
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("plot: needs matplotlib (pip install 'asyncflow[plot]')") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [load_run(d) for d in run_dirs]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, group in enumerate(group_runs(runs)):
        color = colors[i % len(colors)]
        base = group[0].label.rsplit(" seed ", 1)[0]
        label = f"{base} ({len(group)} seeds)" if len(group) > 1 else group[0].label
        for ax, attr in zip(axes, ("steps", "seconds"), strict=True):
            for j, run in enumerate(group):
                ax.scatter(getattr(run, attr), run.returns, s=6, alpha=0.25, color=color, linewidths=0)
                if len(run.evaluations):
                    column = 0 if attr == "steps" else 1
                    ax.plot(run.evaluations[:, column], run.evaluations[:, 2], "--o", markersize=3, color=color,
                            label=f"{label}, evaluation" if j == 0 else None)  # fmt: skip
            if len(group) == 1:
                run = group[0]
                ax.plot(getattr(run, attr), smooth(run.returns, smoothing), color=color, label=label)
                continue
            end = min(float(getattr(r, attr)[-1]) for r in group)
            start = max(float(getattr(r, attr)[0]) for r in group)
            grid = np.linspace(start, end, 200) if end > start else np.array([start])
            curves = np.stack([np.interp(grid, getattr(r, attr), smooth(r.returns, smoothing)) for r in group])
            ax.plot(grid, curves.mean(axis=0), color=color, label=label)
            ax.fill_between(grid, curves.min(axis=0), curves.max(axis=0), color=color, alpha=0.2)
    for ax, xlabel in zip(axes, ("env steps", "wall time (s)"), strict=True):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("episode return (mean)")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize="small")
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
