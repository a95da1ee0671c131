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
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

R = TypeVar("R")

__all__ = ["LearnerThread", "in_learner_thread"]


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
