"""``FrameStore``: each distinct frame of stacked observations held once.

An Atari observation stacks the last 4 frames, and a transition holds two
observations (``obs`` and ``next_obs``), so a replay buffer that stores rows as
they come holds every frame 8 times. DQN's and Dopamine's buffers store each
frame once and rebuild the stacks when they sample; this store does the same
for any rows of stacked frames, whatever order they come in (interleaved
envs, n-step rows, several workers): a stack becomes ``K`` slots into one
array of frames, found by content, and reference-counted, so a frame goes
when the last row that uses it is overwritten.

Finding a frame by content is a 64-bit hash of its bytes (vectorized over the
batch) followed by an exact comparison, so two different frames are never
merged, whatever the hash does.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FrameStore", "is_frame_stack"]


def is_frame_stack(column: object) -> bool:
    """Rows of stacked frames, channels first: ``uint8`` of shape ``(N, K, H, W)`` with ``2 <= K <= 16``
    and ``K`` smaller than the frame (``(N, 4, 84, 84)``, not an RGB image ``(N, H, W, 3)``)."""
    if not isinstance(column, np.ndarray) or column.dtype != np.uint8 or column.ndim != 4:
        return False
    k, h, w = column.shape[1:]
    return bool(2 <= k <= 16 and k < min(h, w))


def _multipliers(words: int) -> np.ndarray:
    """The hash's odd 64-bit multipliers, one per word of a frame (the same in every process)."""
    return np.random.default_rng(0x5EED).integers(1, 2**63, words, dtype=np.uint64) | np.uint64(1)


class FrameStore:
    """Frames of one shape, each held once with a count of the stack slots that use it."""

    def __init__(self, frame_shape: tuple[int, ...], capacity: int) -> None:
        self.frame_shape = tuple(frame_shape)
        self.frame_bytes = int(np.prod(frame_shape))
        capacity = max(int(capacity), 1)
        self.frames = np.zeros((capacity, *self.frame_shape), np.uint8)
        self.refs = np.zeros(capacity, np.int64)
        self.hashes = np.zeros(capacity, np.uint64)
        self.slots_by_hash: dict[int, list[int]] = {}
        self.free = list(range(capacity - 1, -1, -1))
        self._multipliers = _multipliers(-(-self.frame_bytes // 8))

    def __getstate__(self) -> dict[str, object]:
        # What a checkpoint keeps: arrays and numbers. The index by hash and the hash's
        # multipliers are rebuilt from them (``__setstate__``).
        state = {k: v for k, v in vars(self).items() if k not in ("slots_by_hash", "_multipliers")}
        state["free"] = np.asarray(self.free, np.int64)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state)
        self.free = [int(i) for i in np.asarray(self.free)]
        self.slots_by_hash = {}
        for slot in np.flatnonzero(self.refs > 0).tolist():
            self.slots_by_hash.setdefault(int(self.hashes[slot]), []).append(slot)
        words = -(-self.frame_bytes // 8)
        self._multipliers = _multipliers(words)

    def __len__(self) -> int:
        """Distinct frames held."""
        return len(self.frames) - len(self.free)

    @property
    def nbytes(self) -> int:
        """Bytes of the frames held (the array has room for more)."""
        return len(self) * self.frame_bytes

    def _hash(self, flat: np.ndarray) -> np.ndarray:
        pad = (-flat.shape[1]) % 8
        if pad:
            flat = np.pad(flat, ((0, 0), (0, pad)))
        words = np.ascontiguousarray(flat).view(np.uint64)
        words = words ^ (words >> np.uint64(29))  # high bytes reach the low bits before the products
        with np.errstate(over="ignore"):
            h = (words * self._multipliers).sum(axis=1, dtype=np.uint64)
            h ^= h >> np.uint64(31)
            h *= np.uint64(0x9E3779B97F4A7C15)
        return np.asarray(h, np.uint64)

    def add(self, stacks: np.ndarray) -> np.ndarray:
        """Take ``(N, K, *frame)`` stacks; return their ``(N, K)`` slots (each slot's count goes up by one)."""
        n, k = stacks.shape[:2]
        flat = np.ascontiguousarray(stacks).reshape(n * k, self.frame_bytes)
        hashes = self._hash(flat)
        unique, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        found = np.array([self._find_or_put(int(h), flat[i]) for h, i in zip(unique, first, strict=True)], np.int64)
        slots = found[inverse.reshape(-1)]
        # A hash shared by different frames in this batch: those after the first get their own slot.
        wrong = np.flatnonzero((self.frames.reshape(len(self.frames), -1)[slots] != flat).any(axis=1))
        for i in wrong.tolist():
            slots[i] = self._find_or_put(int(hashes[i]), flat[i])
        np.add.at(self.refs, slots, 1)
        return slots.reshape(n, k)

    def release(self, slots: np.ndarray) -> None:
        """The rows holding ``slots`` are gone: count them down, and free the frames no row uses."""
        slots = np.asarray(slots, np.int64).reshape(-1)
        np.subtract.at(self.refs, slots, 1)
        for slot in np.unique(slots[self.refs[slots] == 0]).tolist():
            same = self.slots_by_hash[int(self.hashes[slot])]
            same.remove(slot)
            if not same:
                del self.slots_by_hash[int(self.hashes[slot])]
            self.free.append(slot)

    def get(self, slots: np.ndarray) -> np.ndarray:
        """The stacks of ``(N, K)`` slots: ``(N, K, *frame)``."""
        return np.asarray(self.frames[slots])

    def _find_or_put(self, h: int, frame: np.ndarray) -> int:
        for slot in self.slots_by_hash.get(h, ()):
            if np.array_equal(self.frames[slot].reshape(-1), frame):
                return slot
        if not self.free:
            self._grow()
        slot = self.free.pop()
        self.frames[slot] = frame.reshape(self.frame_shape)
        self.hashes[slot] = h
        self.slots_by_hash.setdefault(h, []).append(slot)
        return slot

    def _grow(self) -> None:
        old = len(self.frames)
        new = old + old // 4 + 1024
        frames = np.zeros((new, *self.frame_shape), np.uint8)
        frames[:old] = self.frames
        self.frames = frames
        self.refs = np.concatenate([self.refs, np.zeros(new - old, np.int64)])
        self.hashes = np.concatenate([self.hashes, np.zeros(new - old, np.uint64)])
        self.free.extend(range(new - 1, old - 1, -1))
