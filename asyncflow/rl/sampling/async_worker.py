"""``AsyncRolloutWorker``: many ``AsyncEnv``s in flight on one worker's event loop.

A blocking env makes its worker wait out each step; these envs answer when
they answer. The worker keeps every env's step in flight as a task and acts
for the envs that have come back, in one batched forward pass::

    envs whose step came back ──► ready ──(>= min_ready, or ready_timeout_s)──►
        policy.compute_actions(ready obs) ──► one step task per env ──► ready ...

so a slow env holds back nobody: the others step on. ``min_ready`` defaults to
half the envs (as the algorithms' config does). With ``min_ready`` equal to
the number of envs and no ``ready_timeout_s``, every env steps each time
(lock step).

**Sequences stay whole.** Each env records its own steps, in order, into
sequences of ``rollout_fragment_length`` steps; ``sample()`` returns the first
``num_envs`` sequences completed, whichever envs they came from (a fast env
may give two, a slow one none), shaped ``(T, k)`` like the lock-step
worker's, so GAE, n-step returns and V-trace run on them unchanged. A sequence
still being filled carries over to the next ``sample()``; steps in flight
when ``sample()`` returns finish in the background and are kept. Every
action's log-probability and value are recorded when it is chosen, so a
sequence that spans a weight update still carries its behaviour policy's
numbers (what PPO's ratio and V-trace correct with). In lock step every
sequence ends within one ``sample()``, as in ``RolloutWorker``.

**Faults.** A step (or reset) that takes longer than ``env_step_timeout_s`` or
raises gets its env closed and replaced by a new one from the factory; the
episode is dropped from the statistics, the env's unfinished sequence is
discarded (a sequence never has a hole), and the batch counts it
(``num_env_step_timeouts``, ``num_env_errors`` in its ``metrics``). With ``restart_failed_envs=False``
the next ``sample()`` raises the env's own exception instead. An env that
returns a misfit observation or a NaN always fails the run (``EnvOutputError``).
``aclose()`` (the actor layer awaits it when the worker stops) cancels what is
in flight and awaits every env's ``close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import EnvOutputError, EnvStepTimeoutError
from ..data.sample_batch import DONES, BatchMetrics, SampleBatch
from ..data.state import get_state, set_state
from ..data.tree import tree_map, tree_stack
from ..envs.async_env import AsyncEnv
from ..envs.checks import FLAG_TYPES, REWARD_TYPES, EnvChecker, env_name
from ..envs.make import EnvSpec, make_async_env
from ..offline.writer import LaneSteps, Output
from ..policy import PolicyFactory
from .recorder import segment_batch
from .rollout_worker import PolicyDelegation, default_policy
from .trajectory import EpisodeBook, Postprocessing, PostprocessMode, Segment, worker_seed

__all__ = ["AsyncRolloutWorker"]

CLOSE_TIMEOUT_S = 1.0
"""How long ``close()`` of a failed or finished env may take before it is abandoned (the
actor layer gives a stopping actor 2 s before it terminates the process)."""
MAX_RESET_FAILURES = 3
"""A replacement env whose ``reset`` fails this many times in a row fails the run."""


class _Sequence:
    """One env's steps, in order, until ``rollout_fragment_length`` of them are recorded."""

    __slots__ = ("actions", "dones", "eps", "first_step", "lane", "last_obs", "logps", "next_obs", "obs", "rewards",
                 "sent", "terminateds", "truncations", "values")  # fmt: skip

    def __init__(self, first_step: int, lane: int) -> None:
        self.first_step = first_step
        self.lane = lane
        self.sent: list[Any] = []  # the actions as the env took them (for the writer, ``output``)
        self.obs: list[Any] = []
        self.actions: list[Any] = []
        self.logps: list[float] = []
        self.values: list[float] = []
        self.eps: list[int] = []
        self.rewards: list[float] = []
        self.dones: list[bool] = []
        self.terminateds: list[bool] = []
        self.next_obs: list[Any] = []
        self.truncations: list[tuple[int, Any]] = []
        self.last_obs: Any = None


class _Lane:
    """One env: what it observed last, the action it waits for, the sequence being filled."""

    __slots__ = ("action", "env", "index", "obs", "seq", "since", "steps", "task")

    def __init__(self, index: int, env: AsyncEnv, obs: Any) -> None:
        self.index = index
        self.env = env
        self.obs = obs
        self.steps = 0
        self.seq = _Sequence(0, index)
        self.action: asyncio.Future[Any] | None = None
        """Set by the worker's forward pass: the action this env steps with next."""
        self.since = 0.0
        """Loop time at which the step (or reset) in flight began; 0.0 when none is."""
        self.task: asyncio.Task[None] | None = None
        """The lane's own loop (``AsyncRolloutWorker._run``)."""


class AsyncRolloutWorker(PolicyDelegation):
    """``AsyncEnv``s plus a policy: ``await sample()`` returns one postprocessed ``SampleBatch``.

    Build it with ``await AsyncRolloutWorker.create(...)`` (the envs' first
    ``reset`` is awaited there); the keywords are ``RolloutWorker``'s, plus
    ``min_ready``, ``ready_timeout_s``, ``env_step_timeout_s`` and
    ``restart_failed_envs`` (the module docstring says what they do).
    """

    actor_event_loop = "precise"
    """Its process runs timers to the microsecond (``asyncflow/actors/_loop.py``): an env's
    5 ms wait, or a 0.5 ms ``ready_timeout_s``, is not rounded up to the next millisecond."""

    def __init__(
        self,
        env: EnvSpec,
        *,
        policy_factory: PolicyFactory | None = None,
        num_envs: int = 1,
        rollout_fragment_length: int = 128,
        gamma: float = 0.99,
        lam: float = 0.95,
        seed: int = 0,
        worker_index: int = 0,
        use_critic: bool = True,
        postprocess: PostprocessMode = "gae",
        n_step: int = 1,
        check_env_output: bool = True,
        min_ready: int | None = None,
        ready_timeout_s: float | None = None,
        env_step_timeout_s: float | None = None,
        restart_failed_envs: bool = True,
        output: Output | None = None,
    ) -> None:
        self.spec = env
        self.postprocessing = Postprocessing(postprocess, gamma, lam, n_step, use_critic and postprocess == "gae")
        self.num_envs = num_envs
        self.fragment = rollout_fragment_length
        self.worker_index = worker_index
        self.min_ready = max(1, num_envs // 2) if min_ready is None else max(1, min(min_ready, num_envs))
        self.ready_timeout_s = ready_timeout_s
        self.step_timeout_s = env_step_timeout_s
        self.restart_failed_envs = restart_failed_envs
        self.base_seed = worker_seed(seed, worker_index)
        envs = [make_async_env(env) for _ in range(num_envs)]
        self.lanes = [_Lane(i, e, None) for i, e in enumerate(envs)]
        self.observation_space, action_space = envs[0].observation_space, envs[0].action_space
        factory = policy_factory or default_policy
        self.policy: Any = factory(self.observation_space, action_space, seed=self.base_seed, worker_index=worker_index)
        self.checker = EnvChecker(env, self.observation_space, worker_index) if check_env_output else None
        self.episodes = EpisodeBook(worker_index, num_envs)
        self.writer = None if output is None else output.writer("worker", worker_index, self.observation_space,
                                                                 action_space, num_envs)  # fmt: skip
        """Writes what is sampled as a Minari dataset of this worker's own (``output``)."""
        self.keeps_next_obs = self.postprocessing.keeps_next_obs or self.writer is not None
        self.env_step_timeouts = 0
        self.env_errors = 0
        self.envs_made = num_envs
        self._complete: list[_Sequence] = []
        self._ready: list[_Lane] = []
        self._wanted = 1
        self._wake: asyncio.Event | None = None
        self._turn: asyncio.Lock | None = None
        self._failure: BaseException | None = None
        self._watchdog: asyncio.TimerHandle | None = None

    @classmethod
    async def create(cls, env: EnvSpec, **options: Any) -> AsyncRolloutWorker:
        """A worker whose envs have all been reset (concurrently), ready to ``sample()``."""
        worker = cls(env, **options)
        try:
            await worker.start()
        except BaseException:
            await worker.aclose()
            raise
        return worker

    async def start(self) -> None:
        """Reset every env (each with its own seed), concurrently; start each env's loop."""
        loop = asyncio.get_running_loop()
        self._wake, self._turn = asyncio.Event(), asyncio.Lock()
        firsts = await asyncio.gather(*(self._reset(lane.env, self.base_seed + lane.index, lane.index)
                                        for lane in self.lanes))  # fmt: skip
        for lane, obs in zip(self.lanes, firsts, strict=True):
            self._check_obs(obs, lane)
            lane.obs = obs
        for lane in self.lanes:
            lane.task = loop.create_task(self._run(lane))
        if self.step_timeout_s is not None:
            self._watchdog = loop.call_later(self._watch_period, self._watch)

    # -- sampling --------------------------------------------------------

    async def sample(self) -> SampleBatch:
        """The next ``num_envs`` sequences of ``rollout_fragment_length`` steps, postprocessed.

        Calls in flight at once (a plan's ``num_async``) take their turns, as a blocking
        worker's would."""
        assert self._turn is not None, "AsyncRolloutWorker.create() starts the envs"
        async with self._turn:
            while len(self._complete) < self.num_envs:
                ready = await self._wait_ready()
                self._act(ready)
            taken, self._complete = self._complete[: self.num_envs], self._complete[self.num_envs :]
            return self._batch(taken)

    async def sample_with_gradients(self) -> tuple[list[np.ndarray], dict[str, float], SampleBatch]:
        """Sample, then compute gradients on that sample (A3C's worker step); the returned
        batch keeps only its episode records and size (``RolloutWorker``'s)."""
        batch = await self.sample()
        grads, stats = self.compute_gradients(batch)
        summary = SampleBatch({DONES: batch[DONES]}, episode_returns=batch.episode_returns,
                              episode_lengths=batch.episode_lengths, metrics=batch.metrics)  # fmt: skip
        return grads, stats, summary

    async def _wait_ready(self) -> list[_Lane]:
        """The envs whose step has come back: at least ``min_ready`` of them, or as many as
        there are after ``ready_timeout_s`` (at least one)."""
        assert self._wake is not None, "AsyncRolloutWorker.create() starts the envs"
        self._raise_failure()
        if len(self._ready) < self.min_ready:
            self._wanted = self.min_ready
            self._wake.clear()
            # A timer that sets the event, not asyncio.timeout: no CancelledError is thrown
            # into this task, and caught, each time the wait times out.
            timer = None if self.ready_timeout_s is None else (
                asyncio.get_running_loop().call_later(self.ready_timeout_s, self._wake.set))  # fmt: skip
            try:
                await self._wake.wait()
            finally:
                if timer is not None:
                    timer.cancel()
            self._raise_failure()  # what woke it may be an env that failed the run, with none ready
            if not self._ready:
                self._wanted = 1
                self._wake.clear()
                await self._wake.wait()
            self._raise_failure()
        ready = self._ready.copy()
        self._ready.clear()  # in place: each env's loop holds this list
        return ready

    def _act(self, ready: list[_Lane]) -> None:
        """One forward pass for the ready envs; each env's loop gets its action."""
        obs = tree_stack([lane.obs for lane in ready])
        action, logp, value = self.policy.compute_actions(obs)
        env_action = self.policy.env_actions(action)
        ids = self.episodes.ids
        for j, lane in enumerate(ready):
            seq = lane.seq
            seq.obs.append(lane.obs)
            seq.actions.append(action[j])
            seq.logps.append(logp[j])
            seq.values.append(value[j])
            seq.eps.append(ids[lane.index])
            if self.writer is not None:
                seq.sent.append(tree_map(np.array, env_action[j]))
            assert lane.action is not None
            lane.action.set_result(env_action[j])

    async def _run(self, lane: _Lane) -> None:
        """An env's loop: wait for an action, step, record; an env that raises is replaced
        (or fails the run), one that returns garbage fails the run."""
        while True:
            try:
                await self._step_forever(lane)
            except EnvOutputError as exc:
                self._fail(exc)
                return
            except Exception as exc:  # noqa: BLE001 - the env failed: replaced, or the run fails
                if not await self._replace(lane, exc, timed_out=isinstance(exc, TimeoutError)):
                    return

    async def _step_forever(self, lane: _Lane) -> None:
        loop = asyncio.get_running_loop()
        env, keeps_next, check = lane.env, self.keeps_next_obs, self.checker
        shape, dtype = check.expected if check is not None and check.expected is not None else ((), None)
        ready, wake = self._ready, self._wake
        assert wake is not None
        while True:
            lane.action = loop.create_future()
            ready.append(lane)
            if len(ready) >= self._wanted:
                wake.set()
            action = await lane.action
            lane.since = loop.time()
            out = await env.step(action)
            try:
                obs, reward, terminated, truncated, info = out
            except (TypeError, ValueError):
                if check is None:
                    raise
                check.step_output(out, lane.index, lane.steps + 1)  # names the old gym API
                raise
            if check is not None:  # inline: the usual step costs no call
                if type(reward) not in REWARD_TYPES:
                    reward = check.reward(reward, lane.index, lane.steps + 1)
                if type(terminated) not in FLAG_TYPES or type(truncated) not in FLAG_TYPES or type(info) is not dict:
                    check.flags(terminated, truncated, info, lane.index, lane.steps + 1)
            first = None
            if terminated or truncated:
                reset = await env.reset()
                first = reset[0] if check is None else check.reset_output(reset, lane.index, lane.steps + 1)
            lane.since = 0.0
            if check is not None:
                if type(obs) is not np.ndarray or obs.shape != shape or obs.dtype != dtype:  # inline: no call
                    check.observation(obs, lane.index, lane.steps + 1)
                if first is not None:
                    check.observation(first, lane.index, lane.steps + 1)
            # The step, in the lane's sequence and episode (inline: this runs once per env step).
            seq, book, i = lane.seq, self.episodes, lane.index
            t = len(seq.rewards)
            reward = float(reward)
            seq.rewards.append(reward)
            seq.dones.append(first is not None)
            seq.terminateds.append(bool(terminated))
            if keeps_next:
                seq.next_obs.append(obs)
            book.step(i, reward)
            lane.steps += 1
            if first is not None:
                if truncated and not terminated:
                    seq.truncations.append((t, tree_map(np.array, obs)))
                book.end(i)
                obs = first
            lane.obs = obs
            if t + 1 == self.fragment:
                seq.last_obs = obs
                self._complete.append(seq)
                lane.seq = _Sequence(lane.steps, lane.index)

    async def _reset(self, env: AsyncEnv, seed: int | None, index: int, step: int = 0) -> Any:
        async with asyncio.timeout(self.step_timeout_s):
            out = await env.reset(seed=seed)
        return out[0] if self.checker is None else self.checker.reset_output(out, index, step)

    # -- faults ----------------------------------------------------------

    @property
    def _watch_period(self) -> float:
        assert self.step_timeout_s is not None
        return min(max(self.step_timeout_s / 4, 0.01), 1.0)

    def _watch(self) -> None:
        """Every ``_watch_period``: replace each env whose step has taken longer than
        ``env_step_timeout_s`` (one timer for all envs, not one per step)."""
        loop = asyncio.get_running_loop()
        assert self.step_timeout_s is not None
        now = loop.time()
        for lane in self.lanes:
            if lane.since and now - lane.since > self.step_timeout_s and lane.task is not None:
                lane.since = 0.0
                lane.task.cancel()  # the lane's loop ends; a new one starts once the env is replaced
                lane.task = loop.create_task(self._run_after_timeout(lane))
        self._watchdog = loop.call_later(self._watch_period, self._watch)

    async def _run_after_timeout(self, lane: _Lane) -> None:
        exc = EnvStepTimeoutError(f"{self._where(lane)} did not answer within {self.step_timeout_s:g} s "
                                  f"(env_step_timeout_s) at its step {lane.steps + 1}")  # fmt: skip
        if await self._replace(lane, exc, timed_out=True):
            await self._run(lane)

    def _where(self, lane: _Lane) -> str:
        return f"env {env_name(self.spec)!r} (worker {self.worker_index}, sub-env {lane.index})"

    async def _replace(self, lane: _Lane, exc: Exception, *, timed_out: bool) -> bool:
        """Close ``lane``'s env and put a freshly reset one in its place (True), or fail the
        run with ``exc`` (False: ``restart_failed_envs`` is off, or the new envs fail too)."""
        if timed_out and not isinstance(exc, EnvStepTimeoutError):
            exc = EnvStepTimeoutError(f"{self._where(lane)} timed out at its step {lane.steps + 1}: {exc!r}")
        if not self.restart_failed_envs:
            self._fail(exc)
            return False
        for _attempt in range(MAX_RESET_FAILURES):
            if timed_out:
                self.env_step_timeouts += 1
            else:
                self.env_errors += 1
            self.episodes.drop(lane.index)
            lane.seq = _Sequence(lane.steps, lane.index)  # the unfinished sequence goes: no sequence has a hole
            await _close_quietly(lane.env)
            try:
                lane.env = make_async_env(self.spec)
                self.envs_made += 1
                lane.obs = await self._reset(lane.env, self.base_seed + self.envs_made, lane.index, lane.steps)
                self._check_obs(lane.obs, lane, lane.steps)
            except EnvOutputError as garbage:
                self._fail(garbage)
                return False
            except Exception as again:  # noqa: BLE001 - counted, tried again
                exc, timed_out = again, isinstance(again, TimeoutError)
                continue
            return True
        exc.add_note(f"{self._where(lane)}: its replacement failed {MAX_RESET_FAILURES} times in a row")
        self._fail(exc)
        return False

    def _fail(self, exc: BaseException) -> None:
        """Fail the run at the next ``sample()`` with ``exc`` (its traceback travels with it)."""
        if self._failure is None:
            self._failure = exc
        if self._wake is not None:
            self._wake.set()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _check_obs(self, obs: Any, lane: _Lane, step: int = 0) -> None:
        if self.checker is not None:
            self.checker.observation(obs, lane.index, step)

    # -- batches ---------------------------------------------------------

    def _batch(self, seqs: Sequence[_Sequence]) -> SampleBatch:
        """``seqs`` as one ``(T, k)`` segment, made a batch as every worker's is (``segment_batch``),
        with the env faults counted since the last batch."""
        with np.errstate(over="ignore", invalid="ignore"):  # too large for float32: inf, which the checks name
            segment = _segment(seqs, self.keeps_next_obs)
        if self.writer is not None:
            sent = tree_map(lambda x: np.swapaxes(x, 0, 1), tree_stack([tree_stack(s.sent) for s in seqs]))
            self.writer.record(LaneSteps(segment.obs, segment.next_obs, sent, segment.rewards, segment.terminateds,
                                         segment.dones, segment.logps, segment.eps_ids,
                                         lanes=[s.lane for s in seqs]))  # fmt: skip
        return segment_batch(segment, first=np.array([s.first_step for s in seqs]), checker=self.checker,
                             postprocessing=self.postprocessing, policy=self.policy, episodes=self.episodes,
                             report=self._report)  # fmt: skip

    def _report(self, returns: list[float], lengths: list[int]) -> tuple[list[float], list[int], BatchMetrics]:
        faults: BatchMetrics = {"num_env_step_timeouts": self.env_step_timeouts, "num_env_errors": self.env_errors}
        self.env_step_timeouts = self.env_errors = 0
        return returns, lengths, faults

    # -- state and closing -----------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """The policy and its random state and the episode counters; not the envs (an env
        behind a network cannot be saved mid-episode: a restored worker starts fresh episodes)."""
        return {"policy": get_state(self.policy), "next_episode": self.episodes.issued, "envs_made": self.envs_made}

    def set_state(self, state: dict[str, Any] | bytes) -> None:
        """Put back what ``get_state`` returned; the envs go on with their (fresh) episodes."""
        saved = pickle.loads(state) if isinstance(state, bytes) else state  # bytes: checkpoint formats 1 and 2
        set_state(self.policy, saved["policy"])
        self.episodes.issued = max(self.episodes.issued, int(saved["next_episode"]))
        self.envs_made = max(self.envs_made, int(saved["envs_made"]))

    async def aclose(self) -> None:
        """Cancel every step in flight, then close every env (each within ``CLOSE_TIMEOUT_S``),
        and write the experiences not yet written (``output``)."""
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.close()
        if self._watchdog is not None:
            self._watchdog.cancel()
        tasks = [lane.task for lane in self.lanes if lane.task is not None and not lane.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        await asyncio.gather(*(_close_quietly(lane.env) for lane in self.lanes))
        self.lanes = []


async def _close_quietly(env: AsyncEnv) -> None:
    """``await env.close()``, abandoned after ``CLOSE_TIMEOUT_S``; its errors are not the run's."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await env.close()


def _segment(seqs: Sequence[_Sequence], keeps_next: bool) -> Segment:
    """Sequences of equal length as one segment, arrays ``(T, k, ...)``."""

    def columns(name: str, dtype: Any = None) -> np.ndarray:
        return np.stack([np.asarray(getattr(s, name), dtype) for s in seqs], axis=1)

    def obs_columns(rows: Sequence[list[Any]]) -> Any:
        return tree_map(lambda x: np.swapaxes(x, 0, 1), tree_stack([tree_stack(r) for r in rows]))

    truncations = [(t, k, obs) for k, s in enumerate(seqs) for t, obs in s.truncations]
    return Segment(obs_columns([s.obs for s in seqs]), columns("actions"), columns("rewards", np.float32),
                   columns("dones", bool), columns("terminateds", bool), columns("logps", np.float32),
                   columns("values", np.float32), columns("eps", np.int64),
                   last_obs=tree_stack([s.last_obs for s in seqs]),
                   next_obs=obs_columns([s.next_obs for s in seqs]) if keeps_next else None,
                   truncations=truncations)  # fmt: skip
