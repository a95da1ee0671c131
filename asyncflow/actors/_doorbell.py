"""A wake-up file descriptor: eventfd on Linux, a pipe elsewhere.

The consumer's event loop watches ``fileno`` with ``loop.add_reader``; the
producer calls :meth:`Doorbell.ring`. An eventfd is one descriptor and its
counter coalesces any number of rings into one wake-up, which is why it is
preferred; a non-blocking pipe gives the same semantics where eventfd is
missing (a full pipe already means "wake up", so a failed write is fine).
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["Doorbell"]

_HAVE_EVENTFD = hasattr(os, "eventfd")


class Doorbell:
    """One wake-up channel. ``read_fd`` is watched, ``write_fd`` is rung."""

    __slots__ = ("read_fd", "write_fd")

    def __init__(self, read_fd: int = -1, write_fd: int = -1) -> None:
        if read_fd < 0:
            if _HAVE_EVENTFD:
                read_fd = write_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            else:  # pragma: no cover - non-Linux
                read_fd, write_fd = os.pipe()
                os.set_blocking(read_fd, False)
                os.set_blocking(write_fd, False)
        self.read_fd = read_fd
        self.write_fd = write_fd

    def fds(self) -> tuple[int, int]:
        return self.read_fd, self.write_fd

    def ring(self) -> None:
        try:
            if _HAVE_EVENTFD:
                os.eventfd_write(self.write_fd, 1)
            else:  # pragma: no cover - non-Linux
                os.write(self.write_fd, b"\0")
        except BlockingIOError:
            pass  # counter saturated / pipe full: a wake-up is already pending

    def clear(self) -> None:
        try:
            if _HAVE_EVENTFD:
                os.eventfd_read(self.read_fd)
            else:  # pragma: no cover - non-Linux
                while os.read(self.read_fd, 4096):
                    pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        fds = {self.read_fd, self.write_fd} - {-1}
        self.read_fd = self.write_fd = -1
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
