"""``WorkerSet``: the rollout-worker actors of one algorithm, and their weights.

It knows the latest weights, so a worker that died and was restarted by its
restart policy gets them back before it samples again.

It also keeps a hanging environment, or a frozen process (SIGSTOP, ``docker
pause``, a cgroup freezer, a read stuck on a network file system), from hanging the
run: every call has a deadline (``worker_timeout_s``: a sample, a weight broadcast, a
normalizer sync, a checkpoint's save or restore; an evaluation gets it once per episode).
A worker that misses it is killed (a ``WorkerTimeoutWarning`` names the worker, the
call and the env), and the restart policy replaces it; the call is made again on the
new process, once it has the latest weights. With no restart left it is a
``WorkerTimeoutError``. Workers of the local backend run in the driver's own loop, where
a hanging ``env.step`` blocks everything: the deadline applies to worker processes.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Concatenate, ParamSpec

from ...actors import ActorHandle
from ...actors._handle import method_name
from ...errors import ActorDiedError, WorkerTimeoutError
from ..policy import FlatWeights
from .normalization import NormalizerState
from .protocols import EvaluatingWorker, SamplingWorker

__all__ = ["WorkerSet", "WorkerTimeoutWarning"]


class WorkerTimeoutWarning(RuntimeWarning):
    """A worker did not answer in time and was killed (to be restarted if its policy allows)."""


P = ParamSpec("P")


class WorkerSet:
    """The rollout workers of a plan: calls with restarts and timeouts, and weight broadcasts."""

    def __init__(
        self,
        workers: Sequence[ActorHandle],
        *,
        timeout_s: float | None = None,
        env: str = "the env",
        share: Callable[[Any], Any] | None = None,
        normalizer: NormalizerState | None = None,
    ) -> None:
        self.workers = list(workers)
        self.normalizer = normalizer  # the global statistics (normalize_observations/rewards)
        self.share = share  # Runtime.share: one copy of the weights for every worker (Ray's object store)
        self.latest_weights: FlatWeights | dict[str, FlatWeights] | None = None
        self.restarted = 0
        self.timeouts = 0
        self.timeout_s = timeout_s
        """The deadline of every call (None: none), ``worker_timeout_s``."""
        self.env = env
        self._restarts_seen: dict[str, int] = {}
        self._killed: set[tuple[str, int]] = set()

    def __len__(self) -> int:
        return len(self.workers)

    def call(
        self, worker: ActorHandle, method: Callable[Concatenate[Any, P], Any], *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[Any]:
        """Call ``method`` (``SamplingWorker.sample``: ``protocols.py``) in ``worker``, with the
        set's deadline (``call_within``)."""
        return self.call_within(self.timeout_s, worker, method, *args, **kwargs)

    async def call_within(
        self,
        deadline: float | None,
        worker: ActorHandle,
        method: Callable[Concatenate[Any, P], Any],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Any:
        """Call ``method`` in ``worker``; a worker that was restarted first gets the latest weights.

        A worker process that has not answered within ``deadline`` seconds (None: no
        deadline) is killed; the call is made again once the restart policy has replaced it.
        """
        name = method_name(method)
        while True:
            incarnation = (worker.name, worker.restarts)
            try:
                await self._resync(worker)
                return await self._within(worker, worker.call(name, *args, **kwargs), deadline)
            except TimeoutError:
                assert deadline is not None
                # Several calls may wait on one hung process (num_async): the first to time
                # out kills it; the others find it killed and only wait for its successor.
                if incarnation not in self._killed:
                    self._killed.add(incarnation)
                    await self._kill_late(worker, name, deadline)
                if not worker.alive:
                    raise WorkerTimeoutError(
                        worker.name,
                        f"{name}() on {self.env} took over {deadline:g} s (worker_timeout_s), "
                        f"and it has no restart left ({worker.restarts} of {worker.max_restarts} used)",
                    ) from None
                await worker.drain()  # wait for the new process, then resync and retry
            except ActorDiedError:
                if not worker.alive:
                    raise  # no restart left: the plan fails loudly
                await worker.drain()  # wait for the new process, then resync and retry

    @staticmethod
    async def _within(worker: ActorHandle, call: Awaitable[Any], timeout: float | None) -> Any:
        if timeout is None or worker.pid in (None, os.getpid()):  # in-process actors cannot be killed
            return await call
        # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the call's result when
        # the call completes in the same loop iteration as the caller is cancelled, and the
        # cancellation is lost (gh-86296). An operator that outlived its cancellation so
        # waited for ever to put into a queue that nobody read any more (Ape-X, 1 run in 10).
        async with asyncio.timeout(timeout):
            return await call

    def sample(self, worker: ActorHandle) -> Awaitable[Any]:
        """``call`` ``sample`` (with the set's deadline)."""
        return self.call(worker, SamplingWorker.sample)

    async def evaluate(
        self, weights: FlatWeights | dict[str, FlatWeights], episodes: int, normalizer: NormalizerState | None = None
    ) -> list[tuple[Any, ...]]:
        """Play ``episodes`` whole episodes with ``weights`` (a multi-agent run's: by policy id),
        shared out over the workers (evaluation workers): ``(returns, lengths)`` from each worker
        that played (a multi-agent worker's: and each agent's return by its policy)."""
        n = len(self.workers)
        shares = [episodes // n + (i < episodes % n) for i in range(n)]
        per_episode = self.timeout_s
        played = await asyncio.gather(*(
            self.call_within(None if per_episode is None else per_episode * k, w, EvaluatingWorker.evaluate, weights,
                             k, normalizer)
            for w, k in zip(self.workers, shares, strict=True) if k
        ))  # fmt: skip
        return list(played)

    async def get_states(self) -> list[Any]:
        """Every worker's state (environments mid-episode, schedules, random generators), in order."""
        return await asyncio.gather(*(self.call(w, SamplingWorker.get_state) for w in self.workers))

    async def set_states(self, states: Sequence[Any]) -> None:
        """Give each worker its state from ``get_states``, in the same order."""
        pairs = zip(self.workers, states, strict=True)
        await asyncio.gather(*(self.call(w, SamplingWorker.set_state, s) for w, s in pairs))

    async def _kill_late(self, worker: ActorHandle, method: str, timeout: float) -> None:
        self.timeouts += 1
        restart = "it will be restarted" if worker.restarts < worker.max_restarts else "it has no restart left"
        warnings.warn(
            f"worker {worker.name!r} (pid {worker.pid}) did not answer {method}() on {self.env} within "
            f"{timeout:g} s (worker_timeout_s): killed; {restart}",
            WorkerTimeoutWarning,
            stacklevel=3,
        )
        await worker.kill()

    async def _resync(self, worker: ActorHandle) -> None:
        if worker.restarts == self._restarts_seen.get(worker.name, 0):
            return
        await worker.drain()
        self.restarted += worker.restarts - self._restarts_seen.get(worker.name, 0)
        self._restarts_seen[worker.name] = worker.restarts
        if self.latest_weights is not None:
            await self._within(worker, worker.call(SamplingWorker.set_weights, self.latest_weights), self.timeout_s)
        if self.normalizer is not None:  # a new worker has counted nothing
            await self._within(worker, worker.call(SamplingWorker.sync_normalizer, self.normalizer), self.timeout_s)

    async def broadcast(
        self, weights: FlatWeights | dict[str, FlatWeights], to: Sequence[ActorHandle] | None = None
    ) -> None:
        """Send ``weights`` to every worker (or to ``to``).

        The weights are one flat array: pickling it is trivial and its bytes
        travel out of band, copied once into each worker's ring; on Ray they
        are put into the object store once and every worker gets the reference. Multi-agent
        workers take ``{policy_id: weights}``; the latest of each policy is
        kept for workers that restart.
        """
        if isinstance(weights, dict) and isinstance(self.latest_weights, dict):
            self.latest_weights = {**self.latest_weights, **weights}
        else:
            self.latest_weights = weights
        targets = self.workers if to is None else to
        shared = self.share(weights) if self.share is not None and len(targets) > 1 else weights
        await asyncio.gather(*(self.call(w, SamplingWorker.set_weights, shared) for w in targets))
        if self.normalizer is not None:
            await self.sync_normalizer(targets)

    async def sync_normalizer(self, targets: Sequence[ActorHandle]) -> None:
        """Merge what ``targets`` counted since they last synced into the global statistics, and
        send those back (each observation and each step's return is counted once)."""
        assert self.normalizer is not None
        state = self.normalizer.copy()  # what every target normalizes with from now on
        deltas = await asyncio.gather(*(self.call(w, SamplingWorker.sync_normalizer, state) for w in targets))
        for delta in deltas:
            self.normalizer.merge(delta)
