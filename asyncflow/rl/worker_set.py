"""``WorkerSet``: the rollout-worker actors of one algorithm, and their weights.

It knows the latest weights, so a worker that died and was restarted by its
restart policy gets them back before it samples again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..actors import ActorHandle
from ..errors import ActorDiedError
from .policy import FlatWeights

__all__ = ["WorkerSet"]


class WorkerSet:
    def __init__(self, workers: Sequence[ActorHandle]) -> None:
        self.workers = list(workers)
        self.latest_weights: FlatWeights | dict[str, FlatWeights] | None = None
        self.restarted = 0
        self._restarts_seen: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.workers)

    async def call(self, worker: ActorHandle, method: str, *args: Any) -> Any:
        """Call ``method``; a worker that was restarted first gets the latest weights."""
        while True:
            await self._resync(worker)
            try:
                return await worker.call(method, *args)
            except ActorDiedError:
                if not worker.alive:
                    raise  # no restart left: the plan fails loudly
                await worker.drain()  # wait for the new process, then resync and retry

    async def _resync(self, worker: ActorHandle) -> None:
        if worker.restarts == self._restarts_seen.get(worker.name, 0):
            return
        await worker.drain()
        self.restarted += worker.restarts - self._restarts_seen.get(worker.name, 0)
        self._restarts_seen[worker.name] = worker.restarts
        if self.latest_weights is not None:
            await worker.call("set_weights", self.latest_weights)

    async def broadcast(
        self, weights: FlatWeights | dict[str, FlatWeights], to: Sequence[ActorHandle] | None = None
    ) -> None:
        """Send ``weights`` to every worker (or to ``to``).

        The weights are one flat array: pickling it is trivial and its bytes
        travel out of band, copied once into each worker's ring. Multi-agent
        workers take ``{policy_id: weights}``; the latest of each policy is
        kept for workers that restart.
        """
        if isinstance(weights, dict) and isinstance(self.latest_weights, dict):
            self.latest_weights = {**self.latest_weights, **weights}
        else:
            self.latest_weights = weights
        targets = self.workers if to is None else to
        await asyncio.gather(*(self.call(w, "set_weights", weights) for w in targets))
