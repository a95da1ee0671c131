"""Helpers every operator uses: closing sources and naming errors."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, aclosing, nullcontext
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["closing", "named"]

_PREFIX = "in asyncflow operator "


def closing(source: AsyncIterable[T]) -> AbstractAsyncContextManager[AsyncIterator[T]]:
    """``aclosing`` for async generators; other iterables are entered as they are."""
    iterator = aiter(source)
    if isinstance(iterator, AsyncGenerator):
        return aclosing(iterator)
    return nullcontext(iterator)


@contextlib.contextmanager
def named(operator: str) -> Iterator[None]:
    """Note the operator an exception came from.

    Only the innermost operator writes its name: an error raised upstream
    passes through every downstream operator, which must not claim it.
    """
    try:
        yield
    except Exception as exc:
        notes: list[Any] = getattr(exc, "__notes__", [])
        if not any(str(n).startswith(_PREFIX) for n in notes):
            exc.add_note(f"{_PREFIX}{operator}()")
        raise
