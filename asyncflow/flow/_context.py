"""The flow context of one running plan: its counters, timers and learner stats, the
thread its learner runs in (``LearnerThread``), and its background tasks (``TaskSet``).

Operators find it through a ``contextvars.ContextVar`` (``use_context`` for a
block, ``set_context`` for the rest of a task, as ``Algorithm.train`` does) or
take it as an explicit ``ctx`` argument; there is no thread-local global. An
operator that finds none raises ``NoContextError``: a context made up on the
spot would split the counters of one plan without a word.

Operators keep whatever must survive a checkpoint here too (in ``counters``
and ``marks``), not in their generator frames: a plan rebuilt from a restored
context continues where the saved one stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Coroutine, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import NoContextError
from .learner_thread import LearnerThread

__all__ = ["FlowContext", "TaskSet", "current_context", "set_context", "spawn", "use_context"]

T = TypeVar("T")


class TaskSet:
    """The background tasks of one run. Each is started here (``spawn``), and ``aclose``
    cancels whichever still run and waits for them: leaving a session ends them all, even a
    task of a plan that was dropped without being closed."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
        """Start ``coro`` as a task of this set."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    async def aclose(self) -> None:
        """Cancel every task still running and wait until each has ended."""
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)


def spawn(coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
    """Start ``coro`` as a task of the current run's ``TaskSet`` (a plain task outside any run)."""
    ctx = _current.get(None)
    if ctx is None:
        return asyncio.get_running_loop().create_task(coro, name=name)
    return ctx.tasks.spawn(coro, name)


NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
NUM_AGENT_STEPS_SAMPLED = "num_agent_steps_sampled"
NUM_LEARNER_STEPS = "num_learner_steps"
TRAINING_ITERATION = "training_iteration"


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
    marks: dict[str, float] = field(default_factory=dict)
    """Operators' own bookkeeping (the counter value at the last report, ...)."""
    learner_thread: LearnerThread = field(default_factory=LearnerThread)
    """Where the run's torch work runs (``learner_thread.py``)."""
    tasks: TaskSet = field(default_factory=TaskSet)
    """The run's background tasks (fan-in producers, evaluation)."""
    _token: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.episode_returns: deque[float] = deque(maxlen=self.smoothing_episodes)
        self.episode_lengths: deque[int] = deque(maxlen=self.smoothing_episodes)
        self.policy_returns: dict[str, deque[float]] = {}
        self.values: dict[str, deque[float]] = {}
        """The values samplers measured (``SampleBatch.metrics``), the latest ``smoothing_episodes``
        of each (Atari's ``training_return``: the per-life, clipped-reward episodes the learner saw)."""
        self.measured: set[str] = set()
        """The counters that samplers measured (``SampleBatch.metrics``): results report each."""
        self.extras: dict[str, Any] = {}
        """What operators keep across iterations and checkpoints (plain values and arrays: a
        self-play league)."""
        self.children: dict[str, FlowContext] = {}
        """The contexts of the plans inside this one (a multi-agent run's, by policy id)."""

    def child(self, name: str) -> FlowContext:
        """The context of the plan ``name`` inside this one (made on first use): its own
        counters, marks and statistics; this one's learner thread and background tasks."""
        if name not in self.children:
            self.children[name] = FlowContext(start_time=self.start_time, smoothing_episodes=self.smoothing_episodes,
                                              learner_thread=self.learner_thread, tasks=self.tasks)  # fmt: skip
        return self.children[name]

    async def __aenter__(self) -> FlowContext:
        """``async with FlowContext() as ctx:`` runs a plan of your own (``Algorithm`` does the
        same for its plans): the context is current inside the block, and leaving the block
        ends the run's background tasks (samples in flight, fan-in producers) and its learner
        thread, however the block ends; nothing needs closing by hand."""
        self._token = _current.set(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            await self.tasks.aclose()
        finally:
            self.learner_thread.close()
            token, self._token = self._token, None
            if token is not None:
                _current.reset(token)

    def add(self, counter: str, n: int) -> None:
        """Add ``n`` to a counter."""
        self.counters[counter] = self.counters.get(counter, 0) + n

    @property
    def iteration(self) -> int:
        """Results reported so far (the last ``training_iteration``)."""
        return self.get(TRAINING_ITERATION)

    @property
    def env_steps_sampled(self) -> int:
        """Env steps sampled so far."""
        return self.get(NUM_ENV_STEPS_SAMPLED)

    def get(self, counter: str) -> int:
        """A counter's value (0 if it was never added to)."""
        return self.counters.get(counter, 0)

    def record_episodes(self, returns: list[float], lengths: list[int]) -> None:
        """Note completed episodes (their returns and lengths)."""
        self.episode_returns.extend(returns)
        self.episode_lengths.extend(lengths)
        self.episodes_total += len(returns)

    def record_metrics(self, metrics: Mapping[str, int | list[float]]) -> None:
        """Note what a sampler measured (``SampleBatch.metrics``): counts add to counters,
        values to ``values``."""
        for name, value in metrics.items():
            if isinstance(value, list):
                self.values.setdefault(name, deque(maxlen=self.smoothing_episodes)).extend(value)
            else:
                self.add(name, value)
                self.measured.add(name)

    def record_policy_returns(self, returns: dict[str, list[float]]) -> None:
        """Each agent's own episode return, by the policy that controlled it."""
        for pid, values in returns.items():
            self.policy_returns.setdefault(pid, deque(maxlen=self.smoothing_episodes)).extend(values)

    def get_state(self) -> dict[str, Any]:
        """Everything a restored plan needs to continue (plain Python values)."""
        return {
            "counters": dict(self.counters),
            "marks": dict(self.marks),
            "timers": {k: (t.total_s, t.count) for k, t in self.timers.items()},
            "learner_info": dict(self.learner_info),
            "episode_returns": list(self.episode_returns),
            "episode_lengths": list(self.episode_lengths),
            "policy_returns": {p: list(r) for p, r in self.policy_returns.items()},
            "values": {name: list(v) for name, v in self.values.items()},
            "measured": sorted(self.measured),
            "episodes_total": self.episodes_total,
            "workers_restarted": self.workers_restarted,
            "elapsed_s": time.perf_counter() - self.start_time,
            "children": {name: child.get_state() for name, child in self.children.items()},
            "extras": self.extras,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back what ``get_state`` captured; ``time_total_s`` continues from there."""
        self.counters = dict(state["counters"])
        self.marks = dict(state["marks"])
        self.timers = {k: Timer(total, count) for k, (total, count) in state["timers"].items()}
        self.learner_info = dict(state["learner_info"])
        self.episode_returns = deque(state["episode_returns"], maxlen=self.smoothing_episodes)
        self.episode_lengths = deque(state["episode_lengths"], maxlen=self.smoothing_episodes)
        self.policy_returns = {p: deque(r, maxlen=self.smoothing_episodes) for p, r in state["policy_returns"].items()}
        values = state.get("values", {"training_return": state.get("training_returns", [])})  # before: Atari's only
        self.values = {name: deque(v, maxlen=self.smoothing_episodes) for name, v in values.items() if v}
        self.measured = set(state.get("measured", [n for n in ("num_env_step_timeouts", "num_env_errors")
                                                   if n in self.counters]))  # fmt: skip
        self.episodes_total = state["episodes_total"]
        self.workers_restarted = state["workers_restarted"]
        self.start_time = time.perf_counter() - state["elapsed_s"]  # time_total_s runs on
        self.extras = dict(state.get("extras", {}))
        for name, child in state.get("children", {}).items():
            self.child(name).set_state(child)

    @contextlib.contextmanager
    def timer(self, name: str) -> Iterator[None]:
        """Time the ``with`` block under ``name`` (mean and count go to results)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            t = self.timers.setdefault(name, Timer())
            t.total_s += time.perf_counter() - start
            t.count += 1


_current: ContextVar[FlowContext] = ContextVar("asyncflow_flow_context")


def current_context() -> FlowContext:
    """The context of the plan this task runs; ``NoContextError`` where none was installed."""
    try:
        return _current.get()
    except LookupError:
        raise NoContextError(
            "a flow operator ran outside any plan's context: iterate the plan inside "
            "'async with FlowContext():' (or 'with use_context(ctx):'), or through Algorithm.train()"
        ) from None


def set_context(ctx: FlowContext) -> None:
    """Make ``ctx`` the calling task's context from now on (tasks it starts inherit it).
    For an async generator, which a ``with use_context`` block cannot span: its
    ``async for`` may resume it from another task each time."""
    _current.set(ctx)


@contextlib.contextmanager
def use_context(ctx: FlowContext) -> Iterator[FlowContext]:
    """Make ``ctx`` the current flow context inside the ``with`` block."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)
