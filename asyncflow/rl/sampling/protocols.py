"""What plans and the session call on worker actors, as protocols. A call names the method
itself, ``workers.call(worker, SamplingWorker.sample)``, not a string: a reader (or an
editor's "go to definition") follows it here, to the signature that every worker class
implements, and a type checker checks its arguments (``ActorHandle.call``).

- ``SamplingWorker``: ``RolloutWorker``, ``AsyncRolloutWorker`` (whose methods are coroutines,
  awaited in the actor alike), ``MultiAgentRolloutWorker``;
- ``EvaluatingWorker``: ``EvaluationWorker``;
- ``ReplayShard``: ``ReplayActor`` (Ape-X's replay shards).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..data.sample_batch import MultiAgentBatch, SampleBatch
from ..policy import FlatWeights
from .normalization import NormalizerState

__all__ = ["EvaluatingWorker", "ReplayShard", "SamplingWorker"]


class SamplingWorker(Protocol):
    def sample(self) -> SampleBatch | MultiAgentBatch:
        """One postprocessed batch of ``rollout_fragment_length`` steps per env."""
        ...

    def sample_with_gradients(self) -> tuple[list[np.ndarray], dict[str, float], SampleBatch]:
        """A sample, the gradients of the loss on it, and its episode records (A3C)."""
        ...

    def set_weights(self, weights: FlatWeights | dict[str, FlatWeights]) -> None:
        """Act with these weights from now on (by policy id, multi-agent)."""
        ...

    def sync_normalizer(self, state: NormalizerState) -> NormalizerState | None:
        """Normalize with the global ``state``; what was counted since the last sync."""
        ...

    def get_state(self) -> Any:
        """What a checkpoint keeps of the worker."""
        ...

    def set_state(self, state: Any) -> None:
        """Put back what ``get_state`` returned."""
        ...


class EvaluatingWorker(Protocol):
    def evaluate(self, weights: Any, episodes: int, normalizer: NormalizerState | None = None) -> tuple[Any, ...]:
        """Play ``episodes`` whole episodes with ``weights`` (``FlatWeights``; a multi-agent
        worker's: by policy id): their returns and lengths (and each policy's agents' returns)."""
        ...


class ReplayShard(Protocol):
    def add(self, batch: SampleBatch) -> int:
        """Store the rows of ``batch``; the rows held."""
        ...

    def replay(self, n: int) -> SampleBatch:
        """``n`` rows, sampled (waiting until the shard holds enough)."""
        ...

    def update_priorities(self, indexes: np.ndarray, td_errors: np.ndarray) -> None:
        """New priorities for the rows at ``indexes`` (prioritized replay)."""
        ...
