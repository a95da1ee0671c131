"""Messages over a ring: framing, out-of-band buffers, streaming, backlog.

A frame is a fixed header, the lengths of its out-of-band buffers, the pickle
stream, then the raw buffers::

    | tag i64 | kind u8 | pad | nbufs u32 | body u64 | len u64 x nbufs | pickle | buf0 | buf1 ...

The tag and kind sit outside the pickle, so a payload that fails to unpickle
is still delivered as a :class:`DecodeFailure` to the right caller.

The sender copies what fits into the ring and keeps the rest in a backlog
that is written as the consumer frees space; the receiver decodes a small
frame in place once all of it is in the ring (one copy out for each buffer),
and streams a large one piece by piece into buffers it allocates, handing
each piece's ring bytes back as soon as it is copied. So a message larger
than the ring travels too, producer and consumer copy at the same time, and
neither side ever blocks the loop.
"""

from __future__ import annotations

import functools
import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._doorbell import Doorbell
from ._ring import RingReader, RingWriter
from ._serialize import Serializer, loads

__all__ = ["PUMP_BUDGET", "DecodeFailure", "Endpoint", "Message", "Receiver", "Sender"]

_FRAME = struct.Struct("<qB3xIQ")


@functools.lru_cache(maxsize=64)
def _lengths(nbufs: int) -> struct.Struct:
    """The struct of a frame's buffer lengths."""
    return struct.Struct(f"<{nbufs}Q")


Message = tuple[int, int, Any]  # (tag, kind, payload)


@dataclass(frozen=True, slots=True)
class DecodeFailure:
    """Stands in for a payload that could not be unpickled."""

    error: BaseException


# A producer that sends in a tight loop rings the consumer after this many
# messages at the latest; otherwise once per turn of its event loop.
_RING_EVERY = 32

# Messages up to this size are joined into one piece before they are written.
_COALESCE_BYTES = 16 << 10

# Frames larger than this are copied out in steps of ``_STEP``, each step's
# bytes handed back to the producer at once, even when the whole frame is
# already in the ring. Copying a whole 4 MiB frame before consuming any of it
# kept the producer (with the next frame) waiting through every other copy:
# streaming ran at 1,900 4 MiB messages/s that way.
_STREAMED = 1 << 20
_STEP = 1 << 20


class Sender:
    """Frames messages into a :class:`RingWriter`, with a backlog for overflow.

    ``schedule`` (usually ``loop.call_soon``) defers the consumer's wake-up to
    the end of the current loop turn, so a burst of calls costs one wake-up;
    without it every message that finds the consumer asleep rings at once.
    """

    def __init__(self, writer: RingWriter, schedule: Callable[[Callable[[], None]], object] | None = None) -> None:
        self._writer = writer
        self._ring_data = writer.ring.data
        self._serializer = Serializer()
        self._backlog: deque[memoryview] = deque()
        self._backlog_bytes = 0
        self._schedule = schedule
        self._owed = 0  # messages published since the consumer was last woken
        self.messages = 0

    @property
    def bytes_sent(self) -> int:
        return self._writer.bytes_written

    @property
    def backlogged(self) -> bool:
        return bool(self._backlog)

    def send(self, tag: int, kind: int, payload: Any) -> None:
        """Serialize and write one message; raises if ``payload`` cannot be pickled.

        What does not fit now waits in the backlog. The backlog keeps views of
        the caller's arrays instead of copying them (a 4 MiB array is copied
        once, into the ring), so an array passed to a call must not change
        until that call returns or ``drain()`` does.
        """
        data, buffers = self._serializer.dumps(payload)
        self.messages += 1
        writer, head = self._writer, _FRAME.size
        if not buffers:
            size = head + len(data)
            if not self._backlog and (pos := writer.reserve(size)) >= 0:
                # The common small message: header and pickle straight into the ring.
                # (Folding this into the path with buffers below cost a small call
                # 1.7 us more per send, 4.3 against 2.6 us.)
                ring = self._ring_data
                _FRAME.pack_into(ring, pos, tag, kind, 0, len(data))
                ring[pos + head : pos + size] = data
                self._published(writer.publish())
                return
            pieces = [memoryview(_FRAME.pack(tag, kind, 0, len(data)) + data)]
        else:
            nbufs = len(buffers)
            lengths = _lengths(nbufs)
            sizes = list(map(len, buffers))  # raw byte views: len is the byte count
            body = 8 * nbufs + len(data) + sum(sizes)
            if body <= _COALESCE_BYTES and not self._backlog and (pos := writer.reserve(head + body)) >= 0:
                # Small arrays too go straight into the ring, piece by piece.
                ring = self._ring_data
                _FRAME.pack_into(ring, pos, tag, kind, nbufs, body)
                lengths.pack_into(ring, pos + head, *sizes)
                pos += head + lengths.size
                end = pos + len(data)
                ring[pos:end] = data
                for buf, n in zip(buffers, sizes, strict=True):
                    pos, end = end, end + n
                    ring[pos:end] = buf
                self._published(writer.publish())
                return
            framing = _FRAME.pack(tag, kind, nbufs, body) + lengths.pack(*sizes)
            pieces = [memoryview(framing), memoryview(data), *buffers]
        if self._backlog:
            self._backlog.extend(pieces)
            self._backlog_bytes += sum(len(p) for p in pieces)
            self.flush()
            return
        free = writer.free()
        for i, piece in enumerate(pieces):
            n = writer.write(piece, free)
            free -= n
            if n < len(piece):
                rest = [piece[n:], *pieces[i + 1 :]]
                self._backlog.extend(rest)
                self._backlog_bytes += sum(len(p) for p in rest)
                break
        self._published(writer.publish())
        if self._backlog:
            self.flush()

    def _published(self, consumer_sleeps: bool) -> None:
        if not consumer_sleeps:
            return
        self._owed += 1
        if self._schedule is None or self._owed >= _RING_EVERY:
            self.wake()
        elif self._owed == 1:
            self._schedule(self.wake)

    def wake(self) -> None:
        """Wake the consumer now if a published message may be unseen."""
        if self._owed:
            self._owed = 0
            self._writer.wake()

    def flush(self) -> bool:
        """Write as much backlog as fits; True when the backlog is empty."""
        writer, backlog = self._writer, self._backlog
        while backlog:
            writer.awake()
            free = writer.free()
            wrote = False
            while backlog and free:
                piece = backlog[0]
                n = writer.write(piece, free)
                free -= n
                self._backlog_bytes -= n
                wrote = True
                if n == len(piece):
                    backlog.popleft()
                else:
                    backlog[0] = piece[n:]
            if wrote:
                self._published(writer.publish())
            if not backlog:
                break
            # The consumer must run to free space: wake it before we wait.
            self.wake()
            # Say what we wait for, then look once more (see _ring's handshake;
            # the mark must be stored and fenced before free() is read).
            mark = writer.wait_for_space(self._backlog_bytes)
            if writer.free() < mark:
                return False
        writer.awake()
        return True


class _Partial:
    """A frame being streamed into buffers of its own."""

    def __init__(self, tag: int, kind: int, pickle_len: int, lengths: list[int]) -> None:
        self.tag, self.kind = tag, kind
        self.size = _FRAME.size + 8 * len(lengths) + pickle_len + sum(lengths)
        self.data = bytearray(pickle_len)
        self.buffers = [np.empty(n, np.uint8) for n in lengths]
        self.targets = [memoryview(self.data), *(b.data for b in self.buffers)]
        self.index = 0
        self.offset = 0
        self.left = pickle_len + sum(lengths)  # bytes still to copy
        self._skip_empty()

    def _skip_empty(self) -> None:
        while self.index < len(self.targets) and self.offset == len(self.targets[self.index]):
            self.index += 1
            self.offset = 0

    def fill(self, reader: RingReader, available: int) -> bool:
        """Copy what is available; True when the frame is complete.

        Bytes go back to the producer every ``_STEP`` copied, so it refills
        the ring while we copy the rest."""
        done = 0
        while available > done and self.index < len(self.targets):
            target = self.targets[self.index]
            n = min(len(target) - self.offset, available - done, _STEP)
            reader.copy(0, target[self.offset : self.offset + n])
            reader.consume(n)
            done += n
            self.offset += n
            self._skip_empty()
        self.left -= done
        return self.index == len(self.targets)

    def finish(self) -> Message:
        return self.tag, self.kind, _decode(self.data, self.buffers)


def _copy_out(data: memoryview, at: int, n: int) -> Any:
    """A writable copy of ``n`` ring bytes: numpy memory for large buffers
    (it asks the kernel for huge pages), a bytearray for small ones."""
    if n < _COALESCE_BYTES:
        return bytearray(data[at : at + n])
    buf = np.empty(n, np.uint8)
    buf[:] = data[at : at + n]
    return buf


def _decode(data: Any, buffers: Sequence[Any]) -> Any:
    try:
        return loads(data, buffers)
    except Exception as exc:  # noqa: BLE001 - delivered to the caller instead
        return DecodeFailure(exc)


class Receiver:
    """Decodes frames from a :class:`RingReader`."""

    def __init__(self, reader: RingReader) -> None:
        self._reader = reader
        self._partial: _Partial | None = None
        self._seen = 0
        self.messages = 0
        self.bytes_received = 0

    def receive(self, out: list[Message], budget: int | None = None) -> bool:
        """Append every complete message now in the ring to ``out``; with a
        ``budget``, stop once that many bytes were received. True if it
        stopped for the budget (more may be waiting)."""
        reader = self._reader
        start = self.bytes_received
        while True:
            if budget is not None and self.bytes_received - start >= budget:
                return True
            available = self._seen = reader.available()
            partial = self._partial
            if partial is not None:
                if available == 0 or not partial.fill(reader, available):
                    # fill() consumed all it saw. Reading available() again here
                    # would count bytes published since as seen, and the pump
                    # could then sleep on them with no wake-up coming.
                    self._seen = 0
                    return False
                self._partial = None
                self.messages += 1
                self.bytes_received += partial.size
                out.append(partial.finish())
                continue
            if available < _FRAME.size:
                return False
            room = available if budget is None else budget - (self.bytes_received - start)
            taken = self._take_unwrapped(out, available, room)
            if taken:
                reader.consume(taken)
                continue
            tag, kind, nbufs, body = _FRAME.unpack(self._peek(0, _FRAME.size))
            head = _FRAME.size + 8 * nbufs
            if available < head:
                return False
            lengths = list(_lengths(nbufs).unpack(self._peek(_FRAME.size, 8 * nbufs))) if nbufs else []
            pickle_len = body - 8 * nbufs - sum(lengths)
            if available < _FRAME.size + body or body > _STREAMED:
                reader.consume(head)
                self._partial = _Partial(tag, kind, pickle_len, lengths)
                continue
            out.append((tag, kind, self._decode_in_place(head, pickle_len, lengths)))
            self.messages += 1
            self.bytes_received += _FRAME.size + body
            reader.consume(_FRAME.size + body)

    def _take_unwrapped(self, out: list[Message], available: int, room: int) -> int:
        """Decode, in place, the whole frames that lie unwrapped at the read
        index, until about ``room`` bytes are taken; return the bytes taken.
        The caller consumes them at once: one fence for the lot."""
        reader = self._reader
        data, head, unpack = reader.ring.data, _FRAME.size, _FRAME.unpack_from
        pos = first = reader.position()
        end = min(pos + available, reader.ring.capacity)  # a frame that wraps takes the slow path
        last = pos + room
        count = 0
        while pos + head <= end and pos < last:
            tag, kind, nbufs, body = unpack(data, pos)
            size = head + body
            if pos + size > end or body > _STREAMED:
                break
            at = pos + head
            if nbufs:
                lengths = _lengths(nbufs).unpack_from(data, at)
                at += 8 * nbufs
                stop = pos + size - sum(lengths)
                buffers, cursor = [], stop
                for n in lengths:
                    buffers.append(_copy_out(data, cursor, n))
                    cursor += n
                payload = _decode(data[at:stop], buffers)
            else:
                payload = _decode(data[at : pos + size], ())
            out.append((tag, kind, payload))
            count += 1
            pos += size
        self.messages += count
        self.bytes_received += pos - first
        return pos - first

    def wanted(self) -> int:
        """Unread bytes needed before ``receive`` can make progress again."""
        if self._partial is not None:
            return self._partial.left  # it consumed all it saw
        return self._seen + 1

    def _peek(self, offset: int, n: int) -> bytes:
        view = self._reader.contiguous(offset, n)
        if view is None:
            buf = bytearray(n)
            self._reader.copy(offset, memoryview(buf))
            return bytes(buf)
        with view:
            return bytes(view)

    def _decode_in_place(self, offset: int, pickle_len: int, lengths: list[int]) -> Any:
        reader = self._reader
        buffers = []
        at = offset + pickle_len
        for n in lengths:
            buf = np.empty(n, np.uint8)
            reader.copy(at, buf.data)
            buffers.append(buf)
            at += n
        view = reader.contiguous(offset, pickle_len)
        if view is None:
            data = bytearray(pickle_len)
            reader.copy(offset, memoryview(data))
            return _decode(data, buffers)
        with view:
            return _decode(view, buffers)


# Bytes one pump takes before it lets the loop handle them (see Endpoint.pump).
PUMP_BUDGET = 4 << 20


class Endpoint:
    """One side of a duplex link: a sender, a receiver, and our own doorbell."""

    def __init__(self, sender: Sender, receiver: Receiver, reader: RingReader, bell: Doorbell) -> None:
        self.sender = sender
        self.receiver = receiver
        self._reader = reader
        self.bell = bell

    def pump(self, budget: int | None = None) -> tuple[list[Message], bool]:
        """Called when our doorbell fires: flush our backlog, take what arrived.

        Returns the messages and whether more may be waiting. With a
        ``budget`` (bytes), it stops after about that much and stays awake
        (the producer will not ring): the caller handles what it got, which
        frees those arrays, and calls ``pump`` again soon. Without the
        budget a flood of large messages all piled up in the list before
        any was handled: 150 arrays of 4 MiB held at once, each one fresh
        memory to fault in, and streaming ran at a fifth of its speed.
        """
        self.bell.clear()
        out: list[Message] = []
        while True:
            self._reader.awake()
            self.sender.flush()
            if self.receiver.receive(out, budget):
                return out, True
            # Sleep until what the receiver needs to go on is there, then look
            # once more (the handshake in _ring's docstring). The order matters:
            # the mark must be stored and fenced before available() is read.
            mark = self._reader.sleep_until(self.receiver.wanted())
            if self._reader.available() < mark:
                return out, False
