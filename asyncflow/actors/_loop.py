"""The event loop an actor process runs: uvloop's, or asyncio's with timers to the microsecond.

uvloop runs callbacks and I/O in C, which makes the actor layer's own calls
faster (``benchmarks/ipc.py``, 2026-12-04: 7,201 small round trips/s against
6,369 with every actor on the loop below), so actors run it by default. But its
timers count whole milliseconds: uvloop rounds each delay to the nearest one (a
0.5 ms delay runs at once: ``call_later`` in uvloop's ``loop.pyx``), and libuv
fires timers off a clock it reads in milliseconds. asyncio's own
``EpollSelector`` rounds each wait up to a whole millisecond, as ``epoll_wait``
takes it: an ``asyncio.sleep(0.005)`` comes back after 5 to 6 ms.

An actor whose work waits on short timers (``AsyncRolloutWorker``: its envs'
delays, its ``ready_timeout_s``) sets ``actor_event_loop = "precise"`` on its
class and runs asyncio's loop on ``PreciseEpollSelector``. That selector waits
out a timeout in ``select()`` on the epoll descriptor itself (microseconds; it
wakes as soon as any registered descriptor is ready), then collects the events
from epoll without waiting.
Descriptors stay in epoll, so their number is not bounded by ``select()``'s 1,024.
"""

from __future__ import annotations

import asyncio
import select
import selectors
from typing import Any, Literal

__all__ = ["EventLoopKind", "PreciseEpollSelector", "actor_event_loop", "new_actor_loop"]

EventLoopKind = Literal["uvloop", "precise"]

FD_SETSIZE = 1024
"""``select()`` takes descriptors below this; an epoll descriptor above it (a process
with a thousand files open first) keeps epoll's millisecond timeouts."""


class PreciseEpollSelector(selectors.EpollSelector):
    """``EpollSelector`` whose timeouts are kept to the microsecond, not rounded up to the
    millisecond (module docstring)."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0:
            epoll_fd = self.fileno()
            if epoll_fd < FD_SETSIZE:
                select.select([epoll_fd], [], [], timeout)
                timeout = 0
        return super().select(timeout)


def actor_event_loop(factory: Any) -> EventLoopKind:
    """The loop for an actor that ``factory`` builds: ``"precise"`` when the factory (a
    class), or the class a factory classmethod is bound to, sets ``actor_event_loop`` so."""
    for owner in (factory, getattr(factory, "__self__", None)):
        if getattr(owner, "actor_event_loop", None) == "precise":
            return "precise"
    return "uvloop"


def new_actor_loop(kind: EventLoopKind) -> asyncio.AbstractEventLoop:
    """A new event loop of ``kind`` for an actor process; asyncio's default loop where
    uvloop is not installed, or where ``"precise"`` finds no epoll."""
    if kind == "precise" and hasattr(selectors, "EpollSelector"):
        return asyncio.SelectorEventLoop(PreciseEpollSelector())
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()  # type: ignore[no-any-return]
    return asyncio.new_event_loop()
