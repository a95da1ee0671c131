"""Segment trees over numpy arrays: sums (for proportional sampling) and minima.

A tree of capacity ``C`` (rounded up to a power of two) keeps its leaves in
``tree[C:2C]`` and node ``i``'s children at ``2i`` and ``2i+1``; the root is
``tree[1]``. Updates and prefix searches touch one node per level for a whole
batch of indices at once (``log2 C`` vectorized steps, no Python loop per item).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import ConfigError

__all__ = ["MinTree", "SumTree"]


class _Tree:
    combine: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """How two children make their parent (a class attribute: an instance holds only arrays
    and numbers, which a checkpoint keeps as they are, ``state_tree.py``)."""

    def __init__(self, capacity: int, neutral: float) -> None:
        if capacity < 1:
            raise ConfigError(f"capacity must be >= 1, not {capacity}")
        self.size = 1 << (capacity - 1).bit_length()
        self.depth = self.size.bit_length() - 1
        self.tree = np.full(2 * self.size, neutral, dtype=np.float64)

    def __setstate__(self, state: dict[str, object]) -> None:
        state.pop("_combine", None)  # pickled by checkpoint formats 1 and 2
        vars(self).update(state)

    def __setitem__(self, index: np.ndarray | int, values: np.ndarray | float) -> None:
        nodes = np.atleast_1d(np.asarray(index, dtype=np.int64)) + self.size
        self.tree[nodes] = values
        for _ in range(self.depth):
            nodes = np.unique(nodes >> 1)
            self.tree[nodes] = self.combine(self.tree[2 * nodes], self.tree[2 * nodes + 1])

    def __getitem__(self, index: np.ndarray | int) -> np.ndarray:
        return self.tree[np.asarray(index, dtype=np.int64) + self.size]  # type: ignore[no-any-return]

    def root(self) -> float:
        return float(self.tree[1])


class SumTree(_Tree):
    combine = np.add

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, 0.0)

    def total(self) -> float:
        return self.root()

    def find_prefix(self, prefix: np.ndarray) -> np.ndarray:
        """For each value ``p``, the leaf ``i`` whose cumulative range holds it:
        ``sum(leaves[:i]) <= p < sum(leaves[:i+1])``."""
        values = np.array(prefix, dtype=np.float64)
        nodes = np.ones(len(values), dtype=np.int64)
        for _ in range(self.depth):
            left = 2 * nodes
            left_sum = self.tree[left]
            right = values >= left_sum
            values -= np.where(right, left_sum, 0.0)
            nodes = left + right
        return nodes - self.size


class MinTree(_Tree):
    combine = np.minimum

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, float("inf"))

    def min(self) -> float:
        return self.root()
