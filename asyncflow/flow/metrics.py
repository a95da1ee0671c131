"""``report_metrics`` and its throttles: one result mapping per training iteration."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, TypeVar

import numpy as np

from ._context import (
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    TRAINING_ITERATION,
    FlowContext,
    current_context,
)
from ._util import closing, named

__all__ = ["Result", "once_per_interval", "once_per_steps", "report_metrics"]

T = TypeVar("T")


class Result(dict[str, Any]):
    """One training iteration's result: a mapping (what logs, the command line and users read,
    ``result["episode_return_mean"]``), with its main figures typed as properties."""

    @property
    def training_iteration(self) -> int:
        """Results reported so far, this one included."""
        return int(self["training_iteration"])

    @property
    def episode_return_mean(self) -> float:
        """Mean return of the latest ``metrics_smoothing_episodes`` episodes (NaN before the first ends)."""
        return float(self["episode_return_mean"])

    @property
    def episode_len_mean(self) -> float:
        """Mean length of those episodes."""
        return float(self["episode_len_mean"])

    @property
    def num_env_steps_sampled(self) -> int:
        """Env steps sampled so far."""
        return int(self["num_env_steps_sampled"])

    @property
    def num_env_steps_trained(self) -> int:
        """Env steps (rows) trained on so far."""
        return int(self["num_env_steps_trained"])

    @property
    def time_total_s(self) -> float:
        """Seconds since the run started (a resumed run counts on)."""
        return float(self["time_total_s"])

    @property
    def learner(self) -> dict[str, float]:
        """The latest learner step's stats (losses, ``grad_norm``, ...)."""
        return dict(self["learner"])

    @property
    def evaluation(self) -> dict[str, Any] | None:
        """The latest finished evaluation (``evaluation_interval``), or None."""
        value = self.get("evaluation")
        return dict(value) if value is not None else None


async def once_per_interval(source: AsyncIterable[T], seconds: float) -> AsyncIterator[T]:
    """Let an item through at most once per ``seconds`` (the first always passes)."""
    with named("once_per_interval"):
        last = -float("inf")
        async with closing(source) as items:
            async for item in items:
                now = time.perf_counter()
                if now - last >= seconds:
                    last = now
                    yield item


async def once_per_steps(
    source: AsyncIterable[T],
    steps: int,
    ctx: FlowContext | None = None,
    counter: str = NUM_ENV_STEPS_SAMPLED,
) -> AsyncIterator[T]:
    """Let an item through once ``counter`` grew by at least ``steps`` since the last one."""
    ctx = ctx or current_context()
    mark = f"once_per_steps:{counter}"
    with named("once_per_steps"):
        async with closing(source) as items:
            async for item in items:
                if ctx.get(counter) - ctx.marks.get(mark, 0) >= steps:
                    ctx.marks[mark] = ctx.get(counter)
                    yield item


async def report_metrics(source: AsyncIterable[Any], ctx: FlowContext | None = None) -> AsyncIterator[Result]:
    """Turn each item into a training result built from the flow context."""
    ctx = ctx or current_context()
    marks = ctx.marks
    with named("report_metrics"):
        async with closing(source) as items:
            async for _ in items:
                ctx.add(TRAINING_ITERATION, 1)
                now = time.perf_counter()
                elapsed_total = now - ctx.start_time
                elapsed = max(elapsed_total - marks.get("report:time", 0.0), 1e-9)
                sampled, trained = ctx.get(NUM_ENV_STEPS_SAMPLED), ctx.get(NUM_ENV_STEPS_TRAINED)
                returns = list(ctx.episode_returns)
                result = Result(
                    {
                        "training_iteration": ctx.get(TRAINING_ITERATION),
                        "episode_return_mean": float(np.mean(returns)) if returns else float("nan"),
                        "episode_return_min": float(np.min(returns)) if returns else float("nan"),
                        "episode_return_max": float(np.max(returns)) if returns else float("nan"),
                        "episode_len_mean": float(np.mean(ctx.episode_lengths)) if returns else float("nan"),
                        # what the samplers measured (SampleBatch.metrics): Atari's training_return, ...
                        **{f"{name}_mean": float(np.mean(values)) for name, values in ctx.values.items() if values},
                        "episodes_this_iter": ctx.episodes_total - int(marks.get("report:episodes", 0)),
                        "episodes_total": ctx.episodes_total,
                        "num_env_steps_sampled": sampled,
                        "num_env_steps_trained": trained,
                        "num_env_steps_sampled_throughput_per_sec": (sampled - marks.get("report:sampled", 0))
                        / elapsed,
                        "num_env_steps_trained_throughput_per_sec": (trained - marks.get("report:trained", 0))
                        / elapsed,
                        "time_this_iter_s": elapsed,
                        "time_total_s": elapsed_total,
                        "num_workers_restarted": ctx.workers_restarted,
                        **{name: ctx.get(name) for name in sorted(ctx.measured)},  # num_env_errors, ...
                        "policy_return_mean": {p: float(np.mean(r)) for p, r in ctx.policy_returns.items() if r},
                        "timers": {f"{k}_time_ms": 1000 * t.mean_s for k, t in ctx.timers.items()},
                        "learner": dict(ctx.learner_info),
                        "counters": dict(ctx.counters),
                    }
                )
                marks.update({"report:time": elapsed_total, "report:sampled": sampled, "report:trained": trained,
                              "report:episodes": ctx.episodes_total})  # fmt: skip
                yield result
