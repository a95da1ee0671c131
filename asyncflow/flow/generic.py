"""Generic operators: map, filter, batch, flatten."""

from __future__ import annotations

import builtins
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeVar

from ..errors import ConfigError
from ._util import closing, named

__all__ = ["batch", "filter", "flatten", "map"]

T = TypeVar("T")
U = TypeVar("U")


async def map(source: AsyncIterable[T], fn: Callable[[T], U | Awaitable[U]]) -> AsyncIterator[U]:
    """Apply ``fn`` (sync or async) to each item."""
    with named("map"):
        async with closing(source) as items:
            async for item in items:
                out = fn(item)
                if inspect.isawaitable(out):
                    out = await out
                yield out  # type: ignore[misc]


async def filter(source: AsyncIterable[T], predicate: Callable[[T], bool]) -> AsyncIterator[T]:
    """Keep the items for which ``predicate`` is true."""
    with named("filter"):
        async with closing(source) as items:
            async for item in items:
                if predicate(item):
                    yield item


async def batch(source: AsyncIterable[T], n: int) -> AsyncIterator[list[T]]:
    """Group items into lists of ``n``; a shorter last list is yielded at the end."""
    if n < 1:
        raise ConfigError(f"batch(): n must be >= 1, not {n}")
    with named("batch"):
        group: list[T] = []
        async with closing(source) as items:
            async for item in items:
                group.append(item)
                if len(group) == n:
                    yield group
                    group = []
        if group:
            yield group


async def flatten(source: AsyncIterable[Iterable[T]]) -> AsyncIterator[T]:
    """Yield the elements of each iterable item."""
    with named("flatten"):
        async with closing(source) as items:
            async for item in items:
                for element in builtins.iter(item):
                    yield element
