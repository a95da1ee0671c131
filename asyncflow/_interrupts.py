"""Ctrl-C while the command line starts up is held until a safe point.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when
the signal comes. While ``asyncflow train`` starts, that is mostly inside
imports, and there it does harm:

- raised inside a weakref callback (the import system's module locks have
  one), it is printed as "Exception ignored" and lost: the driver trained on;
- raised inside torch's C++ import (pybind11 code), it aborted the process
  (``terminate called after throwing ... KeyboardInterrupt``), or made the
  interpreter end itself by SIGINT after the CLI had printed its message.

A Ctrl-C in the 1.5 s or so of imports and checks therefore only marks the
interrupt; ``check()`` raises it at points where nothing is half done. A second
Ctrl-C before then raises at once. ``release()`` puts Python's handler back
before the event loop starts, whose own handler turns Ctrl-C into a
cancellation of the run. Main thread only, and only for a process whose main
program is the CLI: a program that calls ``main(argv)`` keeps its handlers.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

_pending = False


def _mark(signum: int, frame: FrameType | None) -> None:
    global _pending
    _pending = not _pending
    if not _pending:
        raise KeyboardInterrupt  # pressed again: the user means now


def hold() -> None:
    """Hold Ctrl-C from now on (nothing happens off the main thread, or when
    someone else handles SIGINT already)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _mark)


def check() -> None:
    """Raise ``KeyboardInterrupt`` here if Ctrl-C came while held."""
    global _pending
    if _pending:
        _pending = False
        raise KeyboardInterrupt


def release() -> None:
    """Python's own handler again, then ``check()``. Idempotent."""
    if signal.getsignal(signal.SIGINT) is _mark:  # held (by hold(), in the main thread)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    check()


def release_quietly() -> None:
    """Python's own handler again; a held Ctrl-C is dropped (the command ends anyway)."""
    global _pending
    _pending = False
    release()
