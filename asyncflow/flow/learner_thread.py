"""``LearnerThread``: where a run's torch work runs, off the event loop.

One dedicated thread per run (its ``FlowContext`` holds it), by default with one torch
thread. Measured on the 2-core dev VM (64x64 MLP, 256-row PPO minibatches): ~3 ms per SGD
step this way, 8-9 ms with torch's default two threads called from a non-main thread
(OpenMP gives each calling thread its own team), and ``asyncio.to_thread``'s rotating pool
threads pay that set-up again and again. A convolutional model is the other way round
(Nature CNN, 4 epochs of 256-row minibatches of 1,024 Atari frames: 4.1 s with one thread,
2.6 s with two), so the session tells it what the model needs (``learner.torch_threads``).

One thread also means one order: a checkpoint's ``get_state`` or a weight broadcast's
``get_weights`` runs between two learner steps, never inside one.

While a run is open, torch ops of the event loop's own thread run on one torch thread
(``loop_thread_on_one_torch_thread``; the count as it was comes back when the last run of
that thread closes). The loop's thread only runs small ops (a driver-side worker's actions, a
weight copy), and its two-thread team took the learner's second core: TD3 on Pendulum (a
400x300 MLP, batches of 256, the worker in the driver) trained 4,000 steps in 48.3 s with the
loop's thread on two torch threads and the learner on two, 26.3 s with the loop's thread on one
(one and one: 34.6 s; 2-core VM, 2026-12-07).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

R = TypeVar("R")

__all__ = ["LearnerThread", "in_learner_thread", "loop_thread_on_one_torch_thread"]

_runs = threading.local()
"""Per thread: the runs open in it (``depth``) and its torch threads before the first (``before``)."""


@contextlib.contextmanager
def loop_thread_on_one_torch_thread() -> Iterator[None]:
    """This thread's torch ops on one torch thread while the block runs; nested blocks (runs
    side by side in one loop) share it, and the last to close puts the count back."""
    import torch

    depth = getattr(_runs, "depth", 0)
    if depth == 0:
        _runs.before = torch.get_num_threads()
        torch.set_num_threads(1)
    _runs.depth = depth + 1
    try:
        yield
    finally:
        _runs.depth -= 1
        if _runs.depth == 0:
            torch.set_num_threads(_runs.before)


class LearnerThread:
    """One thread that runs torch work, with ``torch_threads`` torch threads."""

    def __init__(self, torch_threads: int = 1) -> None:
        self.torch_threads = max(1, int(torch_threads))
        """The torch threads of its next steps (a learner with a CNN wants more than one)."""
        self._executor: ThreadPoolExecutor | None = None

    async def run(self, fn: Callable[..., R], *args: object) -> R:
        """``fn(*args)`` in the thread, awaited without blocking the event loop.

        Cancelled, it waits for ``fn`` to return before the cancellation goes on: the
        thread cannot be interrupted, and nobody may touch a learner mid-update.
        """
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, "asyncflow-learner")
        call = functools.partial(self._with_torch_threads, fn, *args)
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await asyncio.wait([future])
            raise

    def _with_torch_threads(self, fn: Callable[..., R], *args: object) -> R:
        import torch

        if torch.get_num_threads() != self.torch_threads:
            torch.set_num_threads(self.torch_threads)
        return fn(*args)

    def close(self) -> None:
        """End the thread (it is idle: every ``run`` has been awaited)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)


async def in_learner_thread(fn: Callable[..., R], *args: object) -> R:
    """``fn(*args)`` in the learner thread of the current run (its ``FlowContext``)::

    info = await in_learner_thread(learner.learn_on_batch, batch)

    Outside any run (an operator used on its own), in a pool thread.
    """
    from ._context import _current

    ctx = _current.get(None)
    if ctx is None:
        return await asyncio.to_thread(fn, *args)
    return await ctx.learner_thread.run(fn, *args)
