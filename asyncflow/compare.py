"""Comparing settings over many runs: ``asyncflow compare RUN_DIR_OR_SWEEP ...``.

Run folders (or folders holding them, such as a sweep's) are grouped into settings: runs whose
configs differ only in ``seed`` and ``env`` are one setting, each env one of its tasks. Each
run gives one score: its final evaluation return (``evaluation_interval``), else its final
training return; or the best one (``score="best"``); or the one reached by a number of env
steps (``at_steps``: runs compared at equal frames). Each setting gets the interquartile mean of
its scores with a 95% stratified bootstrap interval (``aggregate.py``), as a markdown table,
and a plot: learning curves as the IQM over runs with its interval shaded, and the
performance profile (the fraction of runs above each score).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._fields import flatten
from .aggregate import Interval, iqm, iqm_interval, performance_profile
from .errors import ConfigError
from .plot import Run, load_run

__all__ = ["SCORES", "Comparison", "Setting", "compare", "find_run_dirs", "plot_comparison"]

SCORES = ("final", "best")
"""How a run's score is taken from its curve: its last value, or its highest."""


@dataclass(frozen=True)
class Setting:
    """One setting's runs, by task (env), their scores ``(runs, tasks)`` and its aggregates."""

    label: str
    tasks: tuple[str, ...]
    runs: tuple[tuple[Run, ...], ...]  # per task, the same number of runs each
    scores: np.ndarray
    iqm: Interval

    @property
    def num_runs(self) -> int:
        return int(self.scores.shape[0])


@dataclass(frozen=True)
class Comparison:
    """Every setting, and how the scores were taken."""

    settings: tuple[Setting, ...]
    score: str
    at_steps: float | None
    evaluation: bool  # whether the scores are evaluation returns (else training returns)

    def markdown(self) -> str:
        """The table: one row per setting."""
        what = "evaluation return" if self.evaluation else "training return"
        when = f"at {self.at_steps:,.0f} env steps" if self.at_steps is not None else self.score
        lines = [
            f"| setting | tasks | runs | IQM of the {when} {what} | 95% CI | mean | median |",
            "|---|---|---|---|---|---|---|",
        ]
        for s in self.settings:
            interval = f"[{s.iqm.low:.2f}, {s.iqm.high:.2f}]"
            lines.append(f"| {s.label} | {', '.join(s.tasks)} | {s.num_runs} | {s.iqm.point:.2f} | {interval} | "
                         f"{s.scores.mean():.2f} | {np.median(s.scores):.2f} |")  # fmt: skip
        return "\n".join(lines)


def find_run_dirs(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Run folders among ``paths``: each one itself, or every run folder below it."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / "progress.csv").exists():
            found.append(path)
        elif path.is_dir():
            found += sorted(p.parent for p in path.rglob("progress.csv") if (p.parent / "params.json").exists())
        else:
            raise ConfigError(f"compare: {path} does not exist")
    if not found:
        raise ConfigError(f"compare: no run folder (progress.csv and params.json) in {', '.join(map(str, paths))}")
    return list(dict.fromkeys(found))


def _params(run_dir: Path) -> dict[str, str]:
    """A run's config, one comparable text per field path (``learner.lr``)."""
    params = flatten(json.loads((run_dir / "params.json").read_text()))
    return {name: json.dumps(value, sort_keys=True, default=str) for name, value in params.items()}


def _curve(run: Run, evaluation: bool) -> tuple[np.ndarray, np.ndarray]:
    if evaluation:
        return run.evaluations[:, 0], run.evaluations[:, 2]
    return run.steps, run.returns


def _score(run: Run, evaluation: bool, score: str, at_steps: float | None) -> float:
    steps, values = _curve(run, evaluation)
    if at_steps is not None:
        reached = steps <= at_steps
        if not reached.any():
            raise ConfigError(f"compare: {run.path} has no point by {at_steps:,.0f} env steps (its first is at "
                              f"{steps[0]:,.0f})")  # fmt: skip
        values = values[reached]
    return float(values.max() if score == "best" else values[-1])


def compare(
    paths: Sequence[str | os.PathLike[str]],
    *,
    score: str = "final",
    at_steps: float | None = None,
    reps: int = 50_000,
    seed: int = 0,
) -> Comparison:
    """Group the runs under ``paths`` into settings and aggregate their scores (the module docstring)."""
    if score not in SCORES:
        raise ConfigError(f"compare: --score must be one of {', '.join(SCORES)}, not {score!r}")
    if at_steps is not None and at_steps <= 0:
        raise ConfigError(f"compare: --at-steps must be > 0, not {at_steps}")
    dirs = find_run_dirs(paths)
    runs = [load_run(d) for d in dirs]
    params = [_params(d) for d in dirs]
    evaluation = all(len(run.evaluations) for run in runs)
    keys = sorted({k for p in params for k in p} - {"seed", "env"})
    settings: dict[tuple[str, ...], dict[str, list[int]]] = {}
    for i, p in enumerate(params):
        settings.setdefault(tuple(p.get(k, "") for k in keys), {}).setdefault(p.get("env", '""'), []).append(i)
    differing = [k for j, k in enumerate(keys) if len({s[j] for s in settings}) > 1]
    out = []
    for values, by_task in settings.items():
        label = ", ".join(f"{k}={values[keys.index(k)]}" for k in differing) or "all runs"
        counts = {len(v) for v in by_task.values()}
        if len(counts) > 1:
            raise ConfigError(f"compare: setting {label} has a different number of runs per env "
                              f"({ {json.loads(t): len(v) for t, v in by_task.items()} }): stratified "
                              "intervals need as many of each")  # fmt: skip
        tasks = tuple(json.loads(t) for t in by_task)
        task_runs = tuple(tuple(runs[i] for i in v) for v in by_task.values())
        matrix = np.array([[_score(r, evaluation, score, at_steps) for r in column] for column in task_runs]).T
        out.append(Setting(label, tasks, task_runs, matrix, iqm_interval(matrix, reps=reps, seed=seed)))
    return Comparison(tuple(out), score, at_steps, evaluation)


def plot_comparison(comparison: Comparison, out: str | os.PathLike[str], *, reps: int = 2_000, seed: int = 0) -> Path:
    """Learning curves (IQM over runs, its 95% interval shaded) and performance profiles."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("compare: the plot needs matplotlib (pip install 'asyncflow[plot]')") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    fig, (curves, profile) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    everything = np.concatenate([s.scores.reshape(-1) for s in comparison.settings])
    thresholds = np.linspace(everything.min(), everything.max(), 100)
    for s in comparison.settings:
        runs = [r for column in s.runs for r in column]
        xs = [_curve(r, comparison.evaluation) for r in runs]
        start, end = max(x[0][0] for x in xs), min(x[0][-1] for x in xs)
        grid = np.linspace(start, end, 100) if end > start else np.array([start])
        # (runs, tasks, points): each run's curve on the common grid, by task; a resample draws
        # each task's runs with replacement and keeps each drawn run's whole curve
        values = np.stack([np.stack([np.interp(grid, *_curve(r, comparison.evaluation)) for r in column])
                           for column in s.runs], axis=1)  # fmt: skip
        n, tasks, points = values.shape
        rows = rng.integers(0, n, size=(reps, n, tasks))
        drawn = values[rows, np.arange(tasks)[None, None, :], :].reshape(reps, n * tasks, points)
        low, high = np.percentile(iqm(drawn, axis=1), [2.5, 97.5], axis=0)
        point = iqm(values.reshape(n * tasks, points), axis=0)
        (line,) = curves.plot(grid, point, label=f"{s.label} ({s.num_runs} runs)")
        curves.fill_between(grid, low, high, color=line.get_color(), alpha=0.2)
        profile.plot(thresholds, performance_profile(s.scores, thresholds), color=line.get_color(), label=s.label)
    what = "evaluation return" if comparison.evaluation else "training return"
    curves.set(xlabel="env steps", ylabel=f"IQM of the {what}", title="learning curves, 95% CIs")
    profile.set(xlabel=f"score ({comparison.score} {what})", ylabel="fraction of runs above")
    profile.set_title("performance profile")
    for ax in (curves, profile):
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
