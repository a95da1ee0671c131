"""The fork server leaves at once when its driver is gone.

multiprocessing's fork server ends by raising ``SystemExit`` when the driver
that started it exits; Python then tears the interpreter down, which with
torch, numpy and gymnasium loaded takes about a second on a quiet machine
and 5 to 10 seconds on a busy one. All that time the server still holds the
driver's stdout and stderr, so whoever reads them (a shell pipeline, a
supervisor, a test) waits for a process that has nothing left to do: it owns
no segment and no file. This module is the last entry of every preload list
(see ``preload_with_quick_exit``); imported by the server it registers an
``atexit`` hook that runs before any other and calls ``os._exit``. Imported
anywhere else it does nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Sequence

__all__ = ["imported_by_the_fork_server", "preload_with_quick_exit"]

MODULE = __name__


def preload_with_quick_exit(preload: Sequence[str]) -> list[str]:
    """``preload`` with this module last, so that its hook is registered after every other."""
    return [m for m in preload if m != MODULE] + [MODULE]


def imported_by_the_fork_server() -> bool:
    """Whether this code runs inside the fork server's ``main`` (its preload)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _leave_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(0)


if imported_by_the_fork_server():
    atexit.register(_leave_now)
