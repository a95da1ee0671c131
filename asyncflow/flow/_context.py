"""The flow context: counters, timers and learner stats of one running plan.

Operators find it through a ``contextvars.ContextVar`` (set by the algorithm
for the plan's task) or take it as an explicit ``ctx`` argument; there is no
thread-local global.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["FlowContext", "current_context", "use_context"]

NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
NUM_AGENT_STEPS_SAMPLED = "num_agent_steps_sampled"


@dataclass
class Timer:
    total_s: float = 0.0
    count: int = 0

    @property
    def mean_s(self) -> float:
        return self.total_s / self.count if self.count else 0.0


@dataclass
class FlowContext:
    counters: dict[str, int] = field(default_factory=dict)
    timers: dict[str, Timer] = field(default_factory=dict)
    learner_info: dict[str, float] = field(default_factory=dict)
    episodes_total: int = 0
    workers_restarted: int = 0
    start_time: float = field(default_factory=time.perf_counter)
    smoothing_episodes: int = 100
    """How many of the latest episodes the return and length statistics cover."""

    def __post_init__(self) -> None:
        self.episode_returns: deque[float] = deque(maxlen=self.smoothing_episodes)
        self.episode_lengths: deque[int] = deque(maxlen=self.smoothing_episodes)
        self.policy_returns: dict[str, deque[float]] = {}

    def add(self, counter: str, n: int) -> None:
        self.counters[counter] = self.counters.get(counter, 0) + n

    def get(self, counter: str) -> int:
        return self.counters.get(counter, 0)

    def record_episodes(self, returns: list[float], lengths: list[int]) -> None:
        self.episode_returns.extend(returns)
        self.episode_lengths.extend(lengths)
        self.episodes_total += len(returns)

    def record_policy_returns(self, returns: dict[str, list[float]]) -> None:
        """Each agent's own episode return, by the policy that controlled it."""
        for pid, values in returns.items():
            self.policy_returns.setdefault(pid, deque(maxlen=self.smoothing_episodes)).extend(values)

    @contextlib.contextmanager
    def timer(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            t = self.timers.setdefault(name, Timer())
            t.total_s += time.perf_counter() - start
            t.count += 1


_current: ContextVar[FlowContext] = ContextVar("asyncflow_flow_context")


def current_context() -> FlowContext:
    """The plan's context; a fresh one is installed on first use."""
    try:
        return _current.get()
    except LookupError:
        ctx = FlowContext()
        _current.set(ctx)
        return ctx


@contextlib.contextmanager
def use_context(ctx: FlowContext) -> Iterator[FlowContext]:
    """Make ``ctx`` the current flow context inside the ``with`` block."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)
