"""``DatasetShard``: part of a dataset, held by an actor that answers like a replay shard.

Each reader actor reads its share of a dataset's shards (in parallel with the others) into
a uniform ``ReplayBuffer`` and answers ``replay(n)`` with ``n`` rows drawn from it, so an
offline plan is the replay operator over readers: ``replay(readers, batch_size)``. A share
that fits in ``memory_rows`` is read once. A larger one streams: the reader holds a window of
whole episodes, drawn in a shuffled order, and moves on to the next window once it has
served as many rows as the window holds (every episode is seen once per pass).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..data.replay_buffer import ReplayBuffer
from ..data.sample_batch import ACTIONS, SampleBatch
from .dataset import read_transitions

__all__ = ["DatasetShard"]


class DatasetShard:
    """Rows of ``shards`` (Minari ``data`` folders), served by ``replay(n)``."""

    def __init__(
        self,
        shards: list[str],
        *,
        gamma: float,
        seed: int = 0,
        memory_rows: int | None = None,
        action_bounds: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """``action_bounds``: ``(low, high)`` of a ``Box`` action space, to serve its actions
        scaled to ``[-1, 1]`` (the SAC-family learners' own units)."""
        import minari

        self.action_bounds = action_bounds
        self.shards = [Path(s) for s in shards]
        self.gamma = gamma
        self.rng = np.random.default_rng(seed)
        self.memory_rows = memory_rows
        storages = [minari.MinariDataset(s).storage for s in self.shards]
        self.steps = [[int(m["total_steps"]) for m in st.get_episode_metadata(range(st.total_episodes))]
                      for st in storages]  # fmt: skip
        """Each shard's episode lengths."""
        self.rows = sum(sum(lengths) for lengths in self.steps)
        self.streams = memory_rows is not None and self.rows > memory_rows
        self.passes = 0
        self.served = 0
        self._queue: list[tuple[int, int]] = []  # (shard, episode) not yet read in this pass
        self.buffer = self._next_window() if self.streams else self._buffer(read_transitions(self.shards, gamma))

    def _buffer(self, rows: SampleBatch) -> ReplayBuffer:
        if self.action_bounds is not None and ACTIONS in rows:
            low, high = self.action_bounds
            scaled = 2 * (np.asarray(rows[ACTIONS], np.float32) - low) / (high - low) - 1
            rows[ACTIONS] = np.clip(scaled.reshape(len(rows), -1), -1 + 1e-6, 1 - 1e-6).astype(np.float32)
        buffer = ReplayBuffer(max(len(rows), 1), seed=int(self.rng.integers(2**31)), frame_dedup=False)
        buffer.add(rows)
        self.served = 0
        return buffer

    def _next_window(self) -> ReplayBuffer:
        """The next episodes of the shuffled pass, up to ``memory_rows`` rows (one at least)."""
        assert self.memory_rows is not None
        if not self._queue:
            self._queue = [(i, e) for i, lengths in enumerate(self.steps) for e in range(len(lengths))]
            order = self.rng.permutation(len(self._queue))
            self._queue = [self._queue[j] for j in order]
            self.passes += 1
        taken: list[list[int]] = [[] for _ in self.shards]
        total = 0
        while self._queue:
            shard, episode = self._queue[-1]
            if total and total + self.steps[shard][episode] > self.memory_rows:
                break
            self._queue.pop()
            taken[shard].append(episode)
            total += self.steps[shard][episode]
        return self._buffer(read_transitions(self.shards, self.gamma, episodes=[sorted(e) for e in taken]))

    async def replay(self, n: int) -> SampleBatch:
        """``n`` rows drawn uniformly from what the reader holds."""
        if self.streams and self.served >= len(self.buffer):
            self.buffer = self._next_window()
        self.served += n
        return self.buffer.sample(n)

    def update_priorities(self, indexes: np.ndarray, td_errors: np.ndarray) -> None:
        """Uniform: nothing to update (accepted so replay learners need not care)."""

    def stats(self) -> dict[str, Any]:
        """Rows in the dataset share and held now, and passes made over a streamed share."""
        return {"rows": self.rows, "held": len(self.buffer), "passes": self.passes}
