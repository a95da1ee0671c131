"""Piecewise-linear schedules over env steps: ``((steps, value), ...)``, as RLlib's
``lr_schedule`` (Stable-Baselines3's ``linear`` schedule is ``((0, v), (budget, 0))``)."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ConfigError

__all__ = ["check_schedule", "scheduled"]


def check_schedule(name: str, points: Sequence[Sequence[float]]) -> None:
    """At least one ``(steps, value)`` pair, steps from 0 up and strictly increasing, values >= 0."""
    if not points or not all(isinstance(p, Sequence) and len(p) == 2 for p in points):
        raise ConfigError(f"{name}: expected ((env_steps, value), ...) pairs, got {points!r}")
    steps = [p[0] for p in points]
    if steps[0] < 0 or any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
        raise ConfigError(f"{name}: env steps must start at >= 0 and increase, got {steps}")
    if any(not p[1] >= 0 for p in points):
        raise ConfigError(f"{name}: values must be >= 0, got {[p[1] for p in points]}")


def scheduled(points: Sequence[Sequence[float]], t: float) -> float:
    """The schedule's value at ``t`` env steps: linear between the points, the first one's
    before the first, the last one's after the last."""
    (t0, v0), rest = points[0], points[1:]
    if t <= t0:
        return float(v0)
    for t1, v1 in rest:
        if t <= t1:
            return float(v0 + (v1 - v0) * (t - t0) / (t1 - t0))
        t0, v0 = t1, v1
    return float(v0)
