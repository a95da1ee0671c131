"""A single-producer, single-consumer byte ring in POSIX shared memory.

Layout of one segment::

    offset 0    write index   (u64, producer stores, consumer loads)
    offset 64   read index    (u64, consumer stores, producer loads)
    offset 128  consumer sleep number (u64; 0 while awake)
    offset 192  bytes of space a sleeping producer waits for (u64; 0 while awake)
    offset 256  capacity      (u64, written once)
    offset 320  bytes a sleeping consumer waits for (u64)
    offset 384  data: ``capacity`` bytes, used as a circular byte stream

Indices grow without bound (2**64 bytes never wrap in practice); the position
in the data area is ``index % capacity``. Because the ring is a byte stream, a
message larger than the ring simply streams through it in pieces.

Wake-ups follow the "sleeping flag" handshake (Dekker's pattern): a side that
is about to wait stores its flag, issues a full fence, and looks at the ring
once more; the other side publishes its index, fences, and rings the
doorbell only if the flag is set. With both fences, one of the two always
sees the other, so no wake-up is lost, and a busy peer costs no syscall.

The consumer's flag is a sleep *number* that grows with each sleep, so the
producer rings at most once per sleep: once it has rung for sleep ``s``, the
consumer is bound to wake and drain everything published before it clears
the flag. On this kind of VM a wake-up costs the ringer about 20 us, more
than the rest of a small message, so this matters.

The producer's flag is a low-water mark: the space it waits for, at most a
quarter of the ring. The consumer rings only once that much is free, so a
blocked producer is not woken for every few freed bytes (TCP's "silly
window"): with 4 MiB messages in an 8 MiB ring that took streaming from 118
to over 400 messages/s. It cannot deadlock: a drained ring is all free.

The consumer has a low-water mark too. A reader in the middle of a large
frame asks to be woken only when min(rest of the frame, a quarter of the ring)
unread bytes are there. Otherwise it chases the writer, copying cache lines
the other core has just written, one latency-bound line at a time: 4 MiB
messages through an 8 MiB ring ran at 120 messages/s that way, and at 500
when each frame sat whole in the ring. It cannot deadlock either: the rest of
the frame is in the producer's backlog, and the ring has room for it.

Why every segment is reserved when it is made (``posix_fallocate``): a
segment is a sparse file in ``/dev/shm``, whose pages are found only when
first written. When the tmpfs is full (Docker gives containers 64 MiB) that
first write is a SIGBUS, minutes into a run, in whichever process touched
the page: the driver died with a bare "Bus error" with 2 workers and a 24 MiB
``/dev/shm``. Reserved up front, a lack of space is a ``SharedMemoryError``
at spawn that says how much is needed and how to get it, and a reserved
page can never fault later. Reserving 8 MiB takes about 2 ms.

Why a ``threading.Lock`` as the fence: Python exposes no atomics, but taking
and releasing an uncontended lock executes a locked read-modify-write, which
is a full barrier on x86-64 (and acquire + release barriers on arm64). It
costs about 0.2 us, against 0.6 us for the eventfd write it usually saves.
Aligned 8-byte stores through a ``memoryview`` cast to ``Q`` are single
machine stores, so the indices are never torn.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import threading
from multiprocessing import shared_memory
from typing import Protocol

from ..errors import SharedMemoryError

__all__ = ["OWNER_PREFIX", "Ring", "RingReader", "RingWriter", "SEGMENT_PREFIX", "sweep_stale_segments"]

SEGMENT_PREFIX = "asyncflow_"
OWNER_PREFIX = "asyncflow-owner_"
SHM_DIR = "/dev/shm"
_HEADER = 384
_WRITE, _READ, _CONSUMER_SLEEPING, _PRODUCER_SLEEPING = 0, 8, 16, 24
_CAPACITY, _CONSUMER_WANTS = 32, 40

_fence_lock = threading.Lock()


class _Ringer(Protocol):
    """Anything with a ``ring()`` method (a :class:`~._doorbell.Doorbell`)."""

    def ring(self) -> None: ...


def fence() -> None:
    """A full memory barrier (see the module docstring)."""
    _fence_lock.acquire()
    _fence_lock.release()


class Ring:
    """One shared-memory segment holding a ring; created or attached by name."""

    def __init__(self, name: str | None = None, capacity: int = 1 << 22) -> None:
        self.owner = False
        if name is None:
            name = f"{_hold_claim()}{secrets.token_hex(6)}"
            try:
                self.shm = shared_memory.SharedMemory(name=name, create=True, size=_HEADER + capacity)
            except BaseException:
                _release_claim()
                raise
            self.owner = True
            self.name = name
            try:
                _reserve(name, _HEADER + capacity)
            except BaseException:
                self.shm.close()
                self.unlink()
                raise
        else:
            self.shm = shared_memory.SharedMemory(name=name)
        self.name = name
        buf = self.shm.buf
        assert buf is not None
        self.ctl = buf[:_HEADER].cast("Q")
        if self.owner:
            self.ctl[_CAPACITY] = capacity
            self.ctl[_CONSUMER_SLEEPING] = 1  # sleep number 1: nobody reads yet
            self.ctl[_CONSUMER_WANTS] = 1
        self.capacity = int(self.ctl[_CAPACITY])
        self.data = buf[_HEADER : _HEADER + self.capacity]

    def close(self) -> None:
        """Drop this process's mapping (never fails; views may linger)."""
        if self.shm is None:
            return
        self.ctl.release()
        self.data.release()
        # A decoded message may still point into the mapping; GC frees it then.
        with contextlib.suppress(BufferError):
            self.shm.close()
        self.shm = None  # type: ignore[assignment]

    def unlink(self) -> None:
        """Remove the segment's name from /dev/shm (idempotent)."""
        with contextlib.suppress(FileNotFoundError):
            shared_memory.SharedMemory.unlink(self._shm_for_unlink())
        if self.owner:
            self.owner = False
            _release_claim()

    def _shm_for_unlink(self) -> shared_memory.SharedMemory:
        # SharedMemory.unlink only needs ``_name``; build a bare object so that
        # unlinking works after close().
        bare = shared_memory.SharedMemory.__new__(shared_memory.SharedMemory)
        bare._name = "/" + self.name  # type: ignore[attr-defined]
        return bare


def _reserve(name: str, size: int) -> None:
    """Allocate every page of the segment now (see the module docstring), or raise
    ``SharedMemoryError`` saying how much room is needed."""
    path = os.path.join(SHM_DIR, name)
    if not hasattr(os, "posix_fallocate") or not os.path.exists(path):
        return  # not Linux's /dev/shm: nothing to reserve through
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.ENOMEM):
            raise
        stats = os.statvfs(SHM_DIR)
        free, total = stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize
        raise SharedMemoryError(
            f"{SHM_DIR} has no room for a {size / 2**20:.1f} MiB ring ({free / 2**20:.1f} MiB free of "
            f"{total / 2**20:.0f} MiB; each actor needs two rings). Give it more room (docker run --shm-size=1g, "
            f"or mount -o remount,size=1G {SHM_DIR}), or use smaller rings: open_runtime(ring_bytes=...)"
        ) from None
    finally:
        os.close(fd)


class _Claim:
    """This process's claim on the segments it makes: a file in /dev/shm, locked (``flock``)
    while any of them exists, whose name every segment of the claim carries.

    Why a lock and not the pid in the name: a driver in another PID namespace that shares
    /dev/shm (a container, ``unshare -p``) has a pid this process cannot see, or one that
    belongs to somebody else here, so "is the pid alive" unlinked a live run's segments. A
    lock is on the file itself, wherever its holder runs, and the kernel drops it when the
    holder dies however it dies (``kill -9`` too): a sweep that can take it knows the owner
    is gone. The file is locked under another name and then renamed, so that a sweep never
    finds it unlocked while its owner lives."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.token = secrets.token_hex(4)
        self.prefix = f"{SEGMENT_PREFIX}{self.pid}_{self.token}_"
        self.path = os.path.join(SHM_DIR, f"{OWNER_PREFIX}{self.pid}_{self.token}")
        self.segments = 0
        self.fd: int | None = None
        if os.path.isdir(SHM_DIR):
            making = os.path.join(SHM_DIR, f"asyncflow-making_{self.pid}_{self.token}")
            self.fd = os.open(making, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            os.rename(making, self.path)

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            os.close(self.fd)
            self.fd = None


_claim: _Claim | None = None
_claim_lock = threading.Lock()


def _hold_claim() -> str:
    """One segment more under this process's claim (made on first use); its name prefix."""
    global _claim
    with _claim_lock:
        if _claim is None or _claim.pid != os.getpid():  # none yet, or inherited through fork
            _claim = _Claim()
        _claim.segments += 1
        return _claim.prefix


def _release_claim() -> None:
    """One segment fewer; the claim goes with the last one."""
    global _claim
    with _claim_lock:
        if _claim is None or _claim.pid != os.getpid():
            return
        _claim.segments -= 1
        if _claim.segments <= 0:
            _claim.close()
            _claim = None


def _owner_gone(path: str) -> bool:
    """Whether the owner of the claim file ``path`` is gone (its lock can be taken)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True  # it gave the claim up; what is left of it is left over
    except OSError:
        return False  # someone else's (mode 0600), or not ours to judge
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # releases the lock again, if taken
    return True


def sweep_stale_segments() -> list[str]:
    """Unlink the segments of drivers that are gone: what a ``kill -9`` of a whole process
    group leaves behind, since then no process of it is left to clean up. A segment belongs
    to the claim its name carries (``_Owner``); one named the old way (pid only) to its pid.
    Returns the names removed."""
    removed: list[str] = []
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return removed
    gone: dict[str, bool] = {}
    mine = _claim.prefix if _claim is not None else None
    for name in names:
        if not name.startswith(SEGMENT_PREFIX) or (mine is not None and name.startswith(mine)):
            continue
        parts = name[len(SEGMENT_PREFIX) :].split("_")
        if len(parts) == 3 and parts[0].isdigit():
            claim = os.path.join(SHM_DIR, f"{OWNER_PREFIX}{parts[0]}_{parts[1]}")
            if claim not in gone:
                gone[claim] = _owner_gone(claim)
            stale = gone[claim]
        else:
            stale = len(parts) == 2 and parts[0].isdigit() and not _running(int(parts[0]))
        if stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(SHM_DIR, name))
                removed.append(name)
    for name in names:  # claims whose owner died (or died making one): nothing of theirs is left now
        claim = os.path.join(SHM_DIR, name)
        ours = _claim is not None and claim == _claim.path
        if name.startswith((OWNER_PREFIX, "asyncflow-making_")) and not ours and gone.get(claim, _owner_gone(claim)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(claim)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


class RingWriter:
    """The producer end. ``write`` copies what fits and keeps the rest."""

    def __init__(self, ring: Ring, wake_consumer: _Ringer) -> None:
        self.ring = ring
        self._wake = wake_consumer
        self._ctl = ring.ctl
        self._data = ring.data
        self._cap = ring.capacity
        self._w = self._published = int(self._ctl[_WRITE])
        self._rung = 0  # the consumer sleep number we last rang for
        self.bytes_written = 0

    def free(self) -> int:
        return self._cap - (self._w - int(self._ctl[_READ]))

    def write(self, chunk: memoryview, free: int) -> int:
        """Copy up to ``free`` bytes of ``chunk``; return how many. Unpublished."""
        n = min(len(chunk), free)
        if n == 0:
            return 0
        cap, data = self._cap, self._data
        pos = self._w % cap
        first = min(n, cap - pos)
        data[pos : pos + first] = chunk[:first]
        if first < n:
            data[: n - first] = chunk[first:n]
        self._w += n
        return n

    def reserve(self, n: int) -> int:
        """Claim the next ``n`` bytes as one unwrapped piece; return where they
        start in ``ring.data``, or -1 if they are not free or would wrap (then
        nothing is claimed). The caller fills them before ``publish``."""
        w, cap = self._w, self._cap
        pos = w % cap
        if pos + n > cap or cap - (w - int(self._ctl[_READ])) < n:
            return -1
        self._w = w + n
        return pos

    def publish(self) -> bool:
        """Make written bytes visible; True if the consumer must be woken (see ``wake``)."""
        ctl, w = self._ctl, self._w
        self.bytes_written += w - self._published
        self._published = ctl[_WRITE] = w
        fence()
        return self._consumer_needs_ring() != 0

    def _consumer_needs_ring(self) -> int:
        """The consumer's sleep number if it sleeps, unrung, with what it waits for; else 0."""
        ctl = self._ctl
        sleep = ctl[_CONSUMER_SLEEPING]  # loaded before the mark: stored in the other order
        if sleep == 0 or sleep == self._rung or self._w - ctl[_READ] < ctl[_CONSUMER_WANTS]:
            return 0
        return int(sleep)

    def wake(self) -> None:
        """Ring the consumer if it sleeps, is not yet rung for this sleep, and
        what it waits for is there.

        Safe to call late: whatever was published before is seen by a consumer
        whose flag changed since (it drains before it sleeps again).
        """
        sleep = self._consumer_needs_ring()
        if sleep:
            self._rung = sleep
            self._wake.ring()

    def wait_for_space(self, wanted: int) -> int:
        """Say the producer sleeps until ``wanted`` bytes are free (capped at a
        quarter of the ring); return that mark. Then re-check ``free``."""
        mark = max(1, min(wanted, self._cap // 4))
        self._ctl[_PRODUCER_SLEEPING] = mark
        fence()
        return mark

    def awake(self) -> None:
        self._ctl[_PRODUCER_SLEEPING] = 0


class RingReader:
    """The consumer end: views, copies and a read index it publishes."""

    def __init__(self, ring: Ring, wake_producer: _Ringer) -> None:
        self.ring = ring
        self._wake = wake_producer
        self._ctl = ring.ctl
        self._data = ring.data
        self._cap = ring.capacity
        self._r = int(self._ctl[_READ])
        self._sleep = int(self._ctl[_CONSUMER_SLEEPING])

    def available(self) -> int:
        return int(self._ctl[_WRITE]) - self._r

    def position(self, offset: int = 0) -> int:
        """Where the byte ``offset`` past the read index lies in ``ring.data``."""
        return (self._r + offset) % self._cap

    def contiguous(self, offset: int, n: int) -> memoryview | None:
        """A view of ``n`` bytes at ``offset`` past the read index, or None if they wrap."""
        pos = (self._r + offset) % self._cap
        if pos + n > self._cap:
            return None
        return self._data[pos : pos + n]

    def copy(self, offset: int, dst: memoryview) -> None:
        """Copy ``len(dst)`` bytes at ``offset`` past the read index into ``dst``."""
        n = len(dst)
        cap, data = self._cap, self._data
        pos = (self._r + offset) % cap
        first = min(n, cap - pos)
        dst[:first] = data[pos : pos + first]
        if first < n:
            dst[first:] = data[: n - first]

    def consume(self, n: int) -> None:
        """Release ``n`` bytes to the producer and wake it if it waits for space."""
        self._r += n
        self._ctl[_READ] = self._r
        fence()
        mark = self._ctl[_PRODUCER_SLEEPING]
        if mark and self._cap - (int(self._ctl[_WRITE]) - self._r) >= mark:
            self._wake.ring()

    def sleep_until(self, wanted: int) -> int:
        """Sleep until ``wanted`` unread bytes are there (capped at a quarter of
        the ring); return that mark. Then re-check ``available``."""
        mark = max(1, min(wanted, self._cap // 4))
        self._ctl[_CONSUMER_WANTS] = mark  # before the sleep number (see _consumer_needs_ring)
        self._sleep += 1
        self._ctl[_CONSUMER_SLEEPING] = self._sleep
        fence()
        return mark

    def awake(self) -> None:
        self._ctl[_CONSUMER_SLEEPING] = 0
