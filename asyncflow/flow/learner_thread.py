"""The learner's thread: where every operator and ``Algorithm`` runs torch work.

One dedicated thread, by default with one torch thread. Measured on the 2-core
dev VM (64x64 MLP, 256-row PPO minibatches): ~3 ms per SGD step this way, 8-9 ms
with torch's default two threads called from a non-main thread (OpenMP gives
each calling thread its own team), and ``asyncio.to_thread``'s rotating pool
threads pay that set-up again and again. A convolutional model is the other way
round (Nature CNN, 4 epochs of 256-row minibatches of 1,024 Atari frames: 4.1 s
with one thread, 2.6 s with two), so ``set_learner_threads`` is told what the
model needs (``Algorithm``: ``learner_torch_threads``).

One thread also means one order: a checkpoint's ``get_state`` or a weight
broadcast's ``get_weights`` runs between two learner steps, never inside one.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

R = TypeVar("R")

_executor: ThreadPoolExecutor | None = None
_torch_threads = 1


def set_learner_threads(n: int) -> None:
    """The torch threads the learner thread computes with from its next step on."""
    global _torch_threads
    _torch_threads = max(1, int(n))


def _with_torch_threads(fn: Callable[..., R], *args: object) -> R:
    import torch

    if torch.get_num_threads() != _torch_threads:
        torch.set_num_threads(_torch_threads)
    return fn(*args)


async def in_learner_thread(fn: Callable[..., R], *args: object) -> R:
    """``fn(*args)`` in the learner's thread, awaited without blocking the event loop.

    Cancelled, it waits for ``fn`` to return before the cancellation goes on: the
    thread cannot be interrupted, and nobody may touch a learner mid-update.

        info = await in_learner_thread(learner.learn_on_batch, batch)
    """
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(1, "asyncflow-learner")
    future = asyncio.get_running_loop().run_in_executor(_executor, functools.partial(_with_torch_threads, fn, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise


__all__ = ["in_learner_thread", "set_learner_threads"]
