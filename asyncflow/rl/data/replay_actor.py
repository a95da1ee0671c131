"""``ReplayActor``: a replay buffer served from its own process (one Ape-X shard).

``replay(n)`` is an ``async`` method: it waits on the actor's own event loop
until the shard holds ``learning_starts`` rows, so a plan can keep requests
in flight from the start without polling.
"""

from __future__ import annotations

import asyncio
import pickle

import numpy as np

from .replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
from .sample_batch import SampleBatch

__all__ = ["ReplayActor"]


class ReplayActor:
    """A (prioritized) replay buffer with ``add``, async ``replay(n)`` and ``update_priorities``."""

    def __init__(
        self,
        capacity: int,
        *,
        prioritized: bool = True,
        alpha: float = 0.6,
        beta: float = 0.4,
        learning_starts: int = 1,
        seed: int = 0,
        frame_dedup: bool = True,
    ) -> None:
        self.buffer: ReplayBuffer = (
            PrioritizedReplayBuffer(capacity, alpha=alpha, beta=beta, seed=seed, frame_dedup=frame_dedup)
            if prioritized
            else ReplayBuffer(capacity, seed=seed, frame_dedup=frame_dedup)
        )
        self.learning_starts = max(1, learning_starts)
        self._ready = asyncio.Event()

    def add(self, batch: SampleBatch) -> int:
        """Store a batch; returns the rows now held."""
        self.buffer.add(batch)
        if len(self.buffer) >= self.learning_starts:
            self._ready.set()
        return len(self.buffer)

    async def replay(self, n: int) -> SampleBatch:
        """``n`` sampled rows, once the shard holds ``learning_starts`` rows."""
        await self._ready.wait()
        return self.buffer.sample(n)

    def update_priorities(self, indexes: np.ndarray, td_errors: np.ndarray) -> None:
        """New priorities from TD errors for the given rows."""
        self.buffer.update_priorities(indexes, td_errors)

    def priorities(self, indexes: np.ndarray) -> np.ndarray:
        """Stored ``p**alpha`` of the given rows (prioritized shards only)."""
        if not isinstance(self.buffer, PrioritizedReplayBuffer):
            raise TypeError("a uniform replay shard has no priorities")
        return self.buffer.priorities(indexes)

    def get_state(self) -> ReplayBuffer:
        """The buffer (a checkpoint keeps its arrays, ``state_tree.py``)."""
        return self.buffer

    def set_state(self, state: ReplayBuffer | bytes) -> None:
        """Replace the buffer with a saved one (bytes: a pickle, from checkpoint formats 1 and 2)."""
        self.buffer = pickle.loads(state) if isinstance(state, bytes) else state
        if len(self.buffer) >= self.learning_starts:
            self._ready.set()

    def stats(self) -> dict[str, object]:
        """Counts: rows held, added and sampled."""
        return self.buffer.state()
