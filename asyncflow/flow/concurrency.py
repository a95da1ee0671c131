"""Sequencing and concurrency: concurrently, union, duplicate, enqueue, dequeue.

Fan-in never yields from inside a TaskGroup: producers run in tasks that
feed a bounded queue, and the consumer reads the queue (PEP 789's advice).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from typing import Any, Literal, TypeVar

from ..errors import ConfigError
from ._context import spawn
from ._util import closing, named

__all__ = ["concurrently", "dequeue", "duplicate", "enqueue", "union"]

T = TypeVar("T")


class _ProducerEnded:
    """Marks that one producer finished (or failed, with ``error``)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


async def concurrently(
    ops: Sequence[AsyncIterable[Any]],
    mode: Literal["round_robin", "async"] = "round_robin",
    output_indexes: Sequence[int] | None = None,
    round_robin_weights: Sequence[int | Literal["*"]] | None = None,
) -> AsyncIterator[Any]:
    """Run several flows; yield the outputs of those in ``output_indexes`` (default all).

    ``round_robin``: pull ``weight`` items from each op in turn, in index
    order: deterministic. A weight of ``"*"`` means "whatever that op has
    ready without waiting"; it is only allowed in ``async`` mode in RLlib, and
    here it is read as 1. ``async``: every op runs in its own task; items are
    yielded as they arrive, through a bounded queue.
    """
    outputs = set(range(len(ops)) if output_indexes is None else output_indexes)
    with named("concurrently"):
        if mode == "round_robin":
            weights = [1 if w == "*" else int(w) for w in (round_robin_weights or [1] * len(ops))]
            if len(weights) != len(ops):
                raise ConfigError("concurrently(): one round_robin weight per op")
            iterators = [aiter(op) for op in ops]
            try:
                active = list(range(len(ops)))
                while active:
                    for i in list(active):
                        for _ in range(weights[i]):
                            try:
                                item = await anext(iterators[i])
                            except StopAsyncIteration:
                                active.remove(i)
                                break
                            if i in outputs:
                                yield item
            finally:
                for it in iterators:
                    async with closing(it):
                        pass
        elif mode == "async":
            async with closing(_fan_in(ops)) as items:
                async for index, item in items:
                    if index in outputs:
                        yield item
        else:
            raise ConfigError(f"concurrently(): mode must be 'round_robin' or 'async', not {mode!r}")


async def union(*ops: AsyncIterable[T]) -> AsyncIterator[T]:
    """Items of all ops, as they arrive."""
    with named("union"):
        async with closing(_fan_in(ops)) as items:
            async for _, item in items:
                yield item


async def _fan_in(ops: Sequence[AsyncIterable[Any]], maxsize: int = 1) -> AsyncIterator[tuple[int, Any]]:
    queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue(maxsize=maxsize)

    async def produce(index: int, op: AsyncIterable[Any]) -> None:
        try:
            async with closing(op) as items:
                async for item in items:
                    await queue.put((index, item))  # bounded: a fast op waits here
        except Exception as exc:  # noqa: BLE001 - re-raised in the consumer
            await queue.put((index, _ProducerEnded(exc)))
            return
        await queue.put((index, _ProducerEnded()))

    tasks = [spawn(produce(i, op), f"asyncflow producer {i}") for i, op in enumerate(ops)]
    try:
        running = len(tasks)
        while running:
            index, item = await queue.get()
            if isinstance(item, _ProducerEnded):
                running -= 1
                if item.error is not None:
                    raise item.error
                continue
            yield index, item
    finally:
        await _stop_producers(tasks, queue)


async def _stop_producers(tasks: list[asyncio.Task[None]], queue: asyncio.Queue[Any]) -> None:
    """Cancel the producers and wait until every one has ended.

    A producer may outlive a cancellation: code it runs that catches ``CancelledError``, or
    an awaitable that loses one (Python 3.11's ``wait_for``, gh-86296). It then goes on and
    waits to put into the full queue, which nobody reads any more: ``gather`` waited for
    ever. So what it puts is taken and dropped, and a producer still running after it put
    something is cancelled again::

        producer: ... await sample()  <- cancel() lost here   ... await queue.put(x)  (full)
        here:     cancel() ; wait(producers | {queue.get()})  -> x taken, producer cancelled again
    """
    pending: set[asyncio.Future[Any]] = {task for task in tasks if not task.done()}
    for task in pending:
        task.cancel()
    while pending:
        taking = asyncio.ensure_future(queue.get())
        try:
            done, pending = await asyncio.wait(pending | {taking}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            taking.cancel()
        pending.discard(taking)
        if taking in done:  # a producer put something after its cancellation: cancel it again
            for task in pending:
                task.cancel()
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved: its error, if any, went to the consumer or does not matter now


def duplicate(source: AsyncIterable[T], n: int, maxsize: int = 4) -> list[AsyncIterator[T]]:
    """``n`` iterators that each see every item of ``source``.

    Bounded: a branch that runs more than ``maxsize`` items ahead of the
    slowest one waits for it. Closing every branch closes the source.
    """
    if n < 1:
        raise ConfigError(f"duplicate(): n must be >= 1, not {n}")
    iterator = aiter(source)
    buffers: list[deque[T]] = [deque() for _ in range(n)]
    changed = asyncio.Event()
    lock = asyncio.Lock()
    open_branches = set(range(n))
    finished: list[BaseException | None] = []

    async def branch(i: int) -> AsyncIterator[T]:
        try:
            while True:
                if buffers[i]:
                    item = buffers[i].popleft()
                    changed.set()  # before the yield: a waiting branch may go on now
                    yield item
                    continue
                if finished:
                    if finished[0] is not None:
                        raise finished[0]
                    return
                if any(len(buffers[j]) >= maxsize for j in open_branches):
                    # Some branch is maxsize items behind: wait for it to catch up.
                    changed.clear()
                    await changed.wait()
                    continue
                async with lock:
                    if buffers[i] or finished:
                        continue
                    try:
                        item = await anext(iterator)
                    except StopAsyncIteration:
                        finished.append(None)
                        continue
                    except Exception as exc:
                        finished.append(exc)
                        raise
                    for j in open_branches:
                        buffers[j].append(item)
                    changed.set()
        finally:
            open_branches.discard(i)
            buffers[i].clear()
            changed.set()
            if not open_branches:
                async with closing(iterator):
                    pass

    return [branch(i) for i in range(n)]


async def enqueue(source: AsyncIterable[T], queue: asyncio.Queue[T]) -> AsyncIterator[T]:
    """Put each item into ``queue`` (waiting when it is full), and pass it on."""
    with named("enqueue"):
        async with closing(source) as items:
            async for item in items:
                await queue.put(item)
                yield item


async def dequeue(queue: asyncio.Queue[T]) -> AsyncIterator[T]:
    """Items taken from ``queue``, forever."""
    while True:
        yield await queue.get()
