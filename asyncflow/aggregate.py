"""Aggregates of many runs that survive review: the interquartile mean with stratified bootstrap
confidence intervals, and performance profiles (Agarwal et al., *Deep Reinforcement Learning at
the Edge of the Statistical Precipice*, NeurIPS 2021; the ``rliable`` library).

Scores are a matrix of ``(runs, tasks)``: one column per task (an env), one row per run (a
seed). A stratified bootstrap resamples the runs of each task independently, as ``rliable``'s
``StratifiedBootstrap`` does (without resampling tasks); the interval is the percentile one.
Only numpy is needed; ``tests/test_compare.py`` checks the figures against ``rliable``'s.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Interval", "iqm", "iqm_interval", "performance_profile", "stratified_bootstrap"]


def iqm(scores: np.ndarray, axis: int | None = None) -> np.ndarray:
    """The interquartile mean: the mean of the middle half of the scores, over all runs and
    tasks (``axis=None``) or along ``axis``; a quarter is cut from each end, rounded down
    (``scipy.stats.trim_mean(scores, 0.25)``)."""
    values = np.asarray(scores, dtype=float)
    if axis is None:
        values, axis = values.reshape(-1), 0
    values = np.sort(np.moveaxis(values, axis, -1), axis=-1)
    n = values.shape[-1]
    cut = int(0.25 * n)
    return np.asarray(values[..., cut : n - cut].mean(axis=-1))


def stratified_bootstrap(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` resamples of ``scores`` ``(runs, tasks)``: each task's runs drawn with replacement,
    independently of the other tasks'. Shape ``(reps, runs, tasks)``."""
    runs, tasks = scores.shape
    rows = rng.integers(0, runs, size=(reps, runs, tasks))
    return np.take_along_axis(np.broadcast_to(scores, (reps, runs, tasks)), rows, axis=1)


class Interval(tuple[float, float, float]):
    """A point estimate with the bounds of its confidence interval: ``(point, low, high)``."""

    __slots__ = ()

    @property
    def point(self) -> float:
        return self[0]

    @property
    def low(self) -> float:
        return self[1]

    @property
    def high(self) -> float:
        return self[2]


def iqm_interval(scores: np.ndarray, *, reps: int = 50_000, size: float = 0.95, seed: int = 0) -> Interval:
    """The IQM of ``scores`` ``(runs, tasks)`` (or ``(runs,)``, one task) with its stratified
    bootstrap percentile interval of coverage ``size`` over ``reps`` resamples."""
    matrix = np.asarray(scores, dtype=float)
    matrix = matrix.reshape(-1, 1) if matrix.ndim == 1 else matrix
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError(f"scores must be (runs, tasks) with at least one run, got shape {matrix.shape}")
    rng = np.random.default_rng(seed)
    stats = np.concatenate([iqm(chunk.reshape(chunk.shape[0], -1), axis=1)
                            for chunk in _chunks(matrix, reps, rng)])  # fmt: skip
    low, high = np.percentile(stats, [50 * (1 - size), 50 * (1 + size)])
    return Interval((float(iqm(matrix)), float(low), float(high)))


def _chunks(matrix: np.ndarray, reps: int, rng: np.random.Generator, rows: int = 2_000_000) -> list[np.ndarray]:
    """The resamples in pieces of at most ``rows`` scores each, so memory stays bounded."""
    per = max(1, rows // matrix.size)
    return [stratified_bootstrap(matrix, min(per, reps - start), rng) for start in range(0, reps, per)]


def performance_profile(scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """The fraction of runs (over every run of every task) whose score exceeds each threshold."""
    values = np.asarray(scores, dtype=float).reshape(-1)
    return np.asarray([(values > tau).mean() for tau in np.asarray(thresholds, dtype=float)])
