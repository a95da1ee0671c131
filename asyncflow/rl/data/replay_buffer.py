"""Replay buffers: uniform, and prioritized (Schaul et al. 2016, proportional).

Storage is one preallocated numpy array per column (per leaf, for ``Dict``
observations), in the column's own dtype, written as a ring: adding a batch
copies its rows in (wrapping around), and sampling gathers rows by index.
Both buffers are plain classes; ``ReplayActor`` (replay_actor.py) serves one
from its own process.

Sampled batches carry ``batch_indexes`` (the rows they came from) and
``weights`` (importance weights; all ones for the uniform buffer), so a
learner can use one loss for both and send TD errors back with
``update_priorities``.

With ``frame_dedup``, columns of stacked frames (Atari's ``(N, 4, 84, 84)``
``uint8`` observations, ``frame_store.py``) hold slots into one ``FrameStore``
instead of the pixels: each frame is stored once for all the stacks, rows and
columns (``obs``, ``next_obs``) that contain it, and the stacks are rebuilt when
the buffer samples.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import ConfigError
from .frame_store import FrameStore, is_frame_stack
from .sample_batch import SampleBatch
from .sum_tree import MinTree, SumTree
from .tree import Tree, tree_assign, tree_leaves, tree_map

__all__ = ["BATCH_INDEXES", "WEIGHTS", "PrioritizedReplayBuffer", "ReplayBuffer"]

BATCH_INDEXES = "batch_indexes"
WEIGHTS = "weights"


class ReplayBuffer:
    """A FIFO ring of transitions, sampled uniformly with replacement."""

    def __init__(self, capacity: int, *, seed: int = 0, frame_dedup: bool = True) -> None:
        if capacity < 1:
            raise ConfigError(f"ReplayBuffer: capacity must be >= 1, not {capacity}")
        self.capacity = capacity
        self.frame_dedup = frame_dedup
        self._columns: dict[str, Tree] = {}
        self._frames: dict[tuple[int, ...], FrameStore] = {}  # by frame shape
        self._stacked: dict[str, FrameStore] = {}  # the columns kept as frame slots
        self._next = 0
        self._size = 0
        self.rng = np.random.default_rng(seed)
        self.added = 0
        self.sampled = 0
        self._listeners: list[Callable[[], None]] = []

    def __len__(self) -> int:
        return self._size

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after every ``add`` and ``sample`` (lets an operator wait without polling)."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        """Stop calling ``callback`` on changes."""
        self._listeners.remove(callback)

    def _changed(self) -> None:
        for callback in self._listeners:
            callback()

    def add(self, batch: SampleBatch) -> np.ndarray:
        """Copy ``batch``'s rows in, overwriting the oldest; return their slots."""
        n = len(batch)
        if n == 0:
            return np.zeros(0, np.int64)
        if not self._columns:
            self._columns = {k: tree_map(self._storage, v) for k, v in batch.items()}
            for k, v in batch.items():
                if self.frame_dedup and is_frame_stack(v):
                    shape = tuple(v.shape[2:])
                    if shape not in self._frames:  # room for about one new frame per row; it grows if not
                        self._frames[shape] = FrameStore(shape, self.capacity + self.capacity // 8 + 64)
                    self._stacked[k] = self._frames[shape]
                    self._columns[k] = np.zeros((self.capacity, v.shape[1]), np.int64)
        elif batch.keys() != self._columns.keys():
            raise ValueError(f"replay buffer holds columns {sorted(self._columns)}, got {sorted(batch)}")
        if n > self.capacity:  # only the newest rows fit
            batch = batch.slice(n - self.capacity, n)
            n = self.capacity
        slots = (self._next + np.arange(n)) % self.capacity
        overwritten = slots[slots < self._size]
        for k, column in self._columns.items():
            store = self._stacked.get(k)
            if store is None:
                tree_assign(column, slots, batch[k])
                continue
            new_frames = store.add(batch[k])
            store.release(column[overwritten])  # after the add: a frame that stays is not copied again
            column[slots] = new_frames
        self._next = int((self._next + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)
        self.added += n
        self._on_new_slots(slots)
        self._changed()
        return slots

    def _storage(self, column: np.ndarray) -> np.ndarray:
        """A preallocated column for ``capacity`` rows like ``column``'s, in its dtype."""
        return np.zeros((self.capacity, *column.shape[1:]), column.dtype)

    def _on_new_slots(self, slots: np.ndarray) -> None:
        pass

    def __getstate__(self) -> dict[str, object]:
        # Listeners are the waiting operators of one running plan, not data.
        return {k: v for k, v in vars(self).items() if k != "_listeners"}

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state)
        self._listeners = []

    def _gather(self, index: np.ndarray, weights: np.ndarray) -> SampleBatch:
        self.sampled += len(index)
        columns = {k: tree_map(lambda v: v[index], c) for k, c in self._columns.items()}
        for k, store in self._stacked.items():
            columns[k] = store.get(columns[k])
        columns[BATCH_INDEXES] = index
        columns[WEIGHTS] = weights.astype(np.float32)
        self._changed()
        return SampleBatch(columns)

    def sample(self, n: int) -> SampleBatch:
        """``n`` rows drawn uniformly with replacement, with ``batch_indexes`` and unit ``weights``."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = self.rng.integers(0, self._size, n)
        return self._gather(index, np.ones(n))

    def update_priorities(self, indexes: np.ndarray, td_errors: np.ndarray) -> None:
        """Uniform replay has no priorities; accepted so learners need not care."""

    def state(self) -> dict[str, object]:
        """Counts: rows held, added and sampled."""
        counts: dict[str, object] = {"size": self._size, "added": self.added, "sampled": self.sampled}
        if self._frames:
            counts["frames"] = sum(len(store) for store in self._frames.values())
        return counts

    @property
    def nbytes(self) -> int:
        """Bytes of the data held: the columns' storage, and the distinct frames."""
        columns = sum(leaf.nbytes for c in self._columns.values() for leaf in tree_leaves(c))
        return int(columns + sum(store.nbytes for store in self._frames.values()))


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritization: row ``i`` is drawn with probability
    ``p_i**alpha / sum_j p_j**alpha``; ``sample`` returns importance weights
    ``(N * P(i))**-beta`` divided by the largest possible weight, so they are <= 1.

    New rows get the largest priority seen so far, so each is replayed soon.
    """

    def __init__(
        self,
        capacity: int,
        *,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
        seed: int = 0,
        frame_dedup: bool = True,
    ) -> None:
        super().__init__(capacity, seed=seed, frame_dedup=frame_dedup)
        if alpha < 0 or beta < 0:
            raise ConfigError(f"PrioritizedReplayBuffer: alpha and beta must be >= 0, got {alpha}, {beta}")
        self.alpha, self.beta, self.eps = alpha, beta, eps
        self._sums = SumTree(capacity)
        self._mins = MinTree(capacity)
        self._max_priority = 1.0

    def _on_new_slots(self, slots: np.ndarray) -> None:
        p = self._max_priority**self.alpha
        self._sums[slots] = p
        self._mins[slots] = p

    def sample(self, n: int, beta: float | None = None) -> SampleBatch:
        """``n`` rows drawn by priority (stratified), with ``batch_indexes`` and importance ``weights``."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        beta = self.beta if beta is None else beta
        total = self._sums.total()
        # Stratified: one draw from each of n equal slices of the total mass.
        prefix = (np.arange(n) + self.rng.random(n)) * (total / n)
        index = np.minimum(self._sums.find_prefix(prefix), self._size - 1)
        probs = self._sums[index] / total
        min_prob = self._mins.min() / total
        weights = (probs * self._size) ** -beta / (min_prob * self._size) ** -beta
        return self._gather(index, weights)

    def priorities(self, indexes: np.ndarray) -> np.ndarray:
        """The stored ``p**alpha`` of the given rows."""
        return self._sums[indexes]

    def update_priorities(self, indexes: np.ndarray, td_errors: np.ndarray) -> None:
        """New priorities ``(|td_error| + eps)**alpha`` for the rows at ``indexes``. Indexes past
        the rows held are left out: they come from a shard that was restarted empty since
        it sampled them (a row overwritten since is a row like any other, as in RLlib)."""
        indexes = np.asarray(indexes)
        held = indexes < self._size
        if not held.all():
            indexes, td_errors = indexes[held], np.asarray(td_errors)[held]
        priorities = np.abs(np.asarray(td_errors, np.float64)) + self.eps
        self._max_priority = max(self._max_priority, float(priorities.max(initial=0.0)))
        self._sums[indexes] = priorities**self.alpha
        self._mins[indexes] = priorities**self.alpha
