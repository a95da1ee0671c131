"""``RolloutWorker``: environments plus a policy; a plain class.

The actor layer makes it remote (``await runtime.spawn(RolloutWorker, ...)``);
with ``num_workers=0`` the same class samples in the driver.

``sample()`` steps ``num_envs`` sub-environments in lock step for
``rollout_fragment_length`` steps with one batched forward pass per step. An
environment that ends is reset on the spot, so no transition ever spans two
episodes. Observations are kept in the observation space's own dtype and
structure (``tree.py``) from the env to the batch. Episode bookkeeping,
seeding and postprocessing (GAE, n-step transitions) are the shared
trajectory pipeline's (``trajectory.py``); this class only steps envs.

With ``vector_env=True`` the sub-environments are one gymnasium vector env
built from the id's own vectorized implementation (``gym.make_vec(...,
vectorization_mode="vector_entry_point")``, CartPole-v1's is numpy over all
lanes): one ``step`` call per time step instead of ``num_envs``. Such envs
reset a finished lane on the *next* step, which ignores that lane's action
and returns its first observation with reward 0 (gymnasium's ``NEXT_STEP``
autoreset). That step belongs to no episode: it is recorded as ``done`` (so
GAE and n-step returns stop at the real end before it) and dropped from the
batch, which so has up to one row fewer per finished episode.
"""

from __future__ import annotations

import contextlib
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import EnvOutputError
from ..data.sample_batch import DONES, BatchMetrics, SampleBatch
from ..data.state import get_state, set_state
from ..data.tree import tree_assign, tree_map, tree_zeros
from ..envs.atari import take_games
from ..envs.checks import FLAG_TYPES, REWARD_TYPES, EnvChecker, env_name
from ..envs.make import EnvSpec, make_env, make_vector_env
from ..policy import FlatWeights, PolicyFactory, StatefulPolicy
from .attributes import pickled_attributes, restore_exactly
from .normalization import NormalizeObservation, NormalizerState, WorkerNormalizer, check_normalizable
from .trajectory import (
    EpisodeBook,
    Postprocessing,
    PostprocessMode,
    Segment,
    drop_rows,
    lane_major,
    new_episode_seed,
    worker_seed,
)

__all__ = ["MAX_ENV_FAILURES", "PolicyDelegation", "RolloutWorker", "check_segment_finite", "default_policy"]

MAX_ENV_FAILURES = 3
"""``restart_failed_envs``: an env that fails this many times in a row, with no step done in
between (each replacement failing at once, at its reset or its first step), fails the run with
its own exception."""


def default_policy(observation_space: Any, action_space: Any, *, seed: int, worker_index: int) -> Any:
    """The built-in actor-critic policy (a ``PolicyFactory``), for workers given none."""
    from ..policies.actor_critic import ActorCriticPolicy

    return ActorCriticPolicy(observation_space, action_space, seed=seed)


class PolicyDelegation:
    """A worker's weight and learning calls, delegated to its ``policy``."""

    policy: Any

    def get_weights(self) -> FlatWeights:
        """The policy's weights."""
        return self.policy.get_weights()  # type: ignore[no-any-return]

    def set_weights(self, weights: FlatWeights) -> None:
        """Load new policy weights."""
        self.policy.set_weights(weights)

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], dict[str, float]]:
        """Gradients of the policy's loss on ``batch``."""
        return self.policy.compute_gradients(batch)  # type: ignore[no-any-return]


def check_segment_finite(check: EnvChecker, seg: Segment, first: np.ndarray) -> None:
    """NaN and inf anywhere in a segment, before it leaves the worker: the observations
    (row ``t`` came from each lane's step ``first + t``: row 0 from the last step before
    the segment), the rewards and next observations (step ``first + t + 1``), the
    observations that end episodes, and the next one to act on (``first + T``)."""
    check.finite_steps(first, 0, observations=seg.obs)
    check.finite_steps(first, 1, rewards=seg.rewards, observations=seg.next_obs)
    last = tree_map(lambda x: x[None], seg.last_obs)
    check.finite_steps(first, len(seg.rewards), observations=last)
    for t, lane, obs in seg.truncations:
        check.finite(obs, 0.0, lane, int(first[lane]) + t + 1)


def _lane_major_zeros(space: gym.Space[Any], steps: int, n: int) -> Any:
    """Zeros indexed ``[t, lane]`` whose memory is lane-major, each lane's steps contiguous:
    the batch's columns (``lane_major``) are then views of them, not copies. An observation
    is copied from the env into this buffer, and next into the ring, and no more."""
    return tree_map(lambda a: a.swapaxes(0, 1), tree_zeros(space, (n, steps)))


def _copy_at(tree: Any, t: int, lane: int) -> Any:
    """A copy of step ``t`` of lane ``lane`` of a ``(T, k, ...)`` tree."""
    return tree_map(lambda a: np.array(a[t, lane]), tree)


def _row(tree: Any, t: int) -> Any:
    """Step ``t`` of a ``(T, k, ...)`` tree: views, one per leaf."""
    return tree[t] if isinstance(tree, np.ndarray) else tree_map(lambda a: a[t], tree)


class RolloutWorker(PolicyDelegation):
    """Environments plus a policy: ``sample()`` returns one postprocessed ``SampleBatch``.

    ``policy_factory`` builds the policy (a ``PolicyFactory``; by default the
    built-in actor-critic); ``postprocess`` and ``n_step`` say how its
    experience is postprocessed (``trajectory.Postprocessing``).
    """

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
        vector_env: bool = False,
        normalize_observations: bool = False,
        normalize_rewards: bool = False,
        normalize_clip: float = 10.0,
        restart_failed_envs: bool = False,
    ) -> None:
        self.postprocessing = Postprocessing(postprocess, gamma, lam, n_step, use_critic and postprocess == "gae")
        self.spec = env
        self.restart_failed_envs = restart_failed_envs
        self.env_errors = 0  # envs replaced since the last sample (restart_failed_envs)
        self.failures = np.zeros(num_envs, np.int64)  # each env's failures with no step done in between
        self.failed_at = np.full(num_envs, -2, np.int64)  # the env step of each env's latest failure
        self.vector: gym.vector.VectorEnv[Any, Any, Any] | None = make_vector_env(env, num_envs) if vector_env else None
        self.envs = [] if self.vector is not None else [make_env(env) for _ in range(num_envs)]
        self.num_envs = num_envs
        self.fragment = rollout_fragment_length
        self.worker_index = worker_index
        base = worker_seed(seed, worker_index)
        if self.vector is not None:
            self.observation_space = self.vector.single_observation_space
            action_space = self.vector.single_action_space
        else:
            self.observation_space, action_space = self.envs[0].observation_space, self.envs[0].action_space
        self.normalizer: WorkerNormalizer | None = None
        if normalize_observations or normalize_rewards:
            shape = check_normalizable(self.observation_space) if normalize_observations else None
            state = NormalizerState.empty(shape, normalize_rewards, normalize_clip)
            self.normalizer = WorkerNormalizer(state, num_envs, gamma)
            if normalize_observations:
                self.envs = [NormalizeObservation(e, self.normalizer) for e in self.envs]
        factory = policy_factory or default_policy
        self.policy: Any = factory(self.observation_space, action_space, seed=base, worker_index=worker_index)
        self.checker = EnvChecker(env, self.observation_space, worker_index) if check_env_output else None
        self.env_steps = np.zeros(num_envs, np.int64)  # each sub-env's steps so far (named in env errors)
        self.obs = tree_zeros(self.observation_space, (num_envs,))
        self.resetting = np.zeros(num_envs, bool)  # vector env: lanes whose next step is the autoreset
        if self.vector is not None:
            self.obs = self.vector.reset(seed=base)[0]
            if self.checker is not None:
                self._check_vector_obs(self.checker, self.obs, 0)
        for i, e in enumerate(self.envs):
            tree_assign(self.obs, i, self._reset(e, i, 0, seed=base + i))
        self.episodes = EpisodeBook(worker_index, num_envs)
        self.scores_games = any(take_games(e) is not None for e in self.envs)

    def sample(self) -> SampleBatch:
        """Collect ``rollout_fragment_length`` steps from each sub-environment."""
        # A value too large for float32 (a reward of 1e39) becomes inf in the buffers, which
        # the checks then name; numpy's overflow warning on the way is not the error to give.
        with np.errstate(over="ignore", invalid="ignore"):
            return self._sample_vector(self.vector) if self.vector is not None else self._sample_envs()

    def _sample_envs(self) -> SampleBatch:
        """``sample()`` for sub-environments stepped one by one."""
        n, steps = len(self.envs), self.fragment
        book, policy, check = self.episodes, self.policy, self.checker
        stateful = policy if isinstance(policy, StatefulPolicy) else None
        expected = check.expected if check is not None else None
        shape, dtype = expected if expected is not None else ((), None)
        first = self.env_steps
        keeps_next = self.postprocessing.keeps_next_obs
        obs_buf, next_buf, rewards, dones, terminateds, logps, values, eps = self._buffers(steps, n)
        actions: list[np.ndarray] = []
        truncations: list[tuple[int, int, Any]] = []
        tree_assign(obs_buf, 0, self.obs)
        skipped: np.ndarray | None = None  # steps of envs that failed (restart_failed_envs): dropped
        for t in range(steps):
            eps[t] = book.ids
            action, logps[t], values[t] = policy.compute_actions(_row(obs_buf, t))
            actions.append(action)
            env_action = policy.env_actions(action)
            into = _row(obs_buf, t + 1) if t + 1 < steps else self.obs  # each observation is copied once
            ended: list[int] = []
            failed: list[int] = []
            for i, env in enumerate(self.envs):
                try:
                    out = env.step(env_action[i])
                except Exception as exc:
                    if not self.restart_failed_envs:
                        raise
                    failed.append(i)
                    tree_assign(into, i, self._replace(i, exc, int(first[i]) + t + 1))
                    continue
                try:
                    next_obs, reward, terminated, truncated, info = out
                except (TypeError, ValueError):
                    if check is None:
                        raise
                    check.step_output(out, i, int(first[i]) + t + 1)  # names the old gym API
                    raise
                if check is not None:  # inline: the usual step costs no call
                    if type(next_obs) is not np.ndarray or next_obs.shape != shape or next_obs.dtype != dtype:
                        check.observation(next_obs, i, int(first[i]) + t + 1)
                    if type(reward) not in REWARD_TYPES:
                        reward = check.reward(reward, i, int(first[i]) + t + 1)
                    if (
                        type(terminated) not in FLAG_TYPES
                        or type(truncated) not in FLAG_TYPES
                        or type(info) is not dict
                    ):
                        check.flags(terminated, truncated, info, i, int(first[i]) + t + 1)
                rewards[t, i] = reward
                if keeps_next:
                    tree_assign(next_buf, (t, i), next_obs)
                terminateds[t, i] = terminated
                if terminated or truncated:
                    dones[t, i] = True
                    ended.append(i)
                    if truncated and not terminated:
                        truncations.append((t, i, tree_map(np.array, next_obs)))
                    try:
                        next_obs = self._reset(env, i, int(first[i]) + t + 1)
                    except EnvOutputError:
                        raise
                    except Exception as exc:
                        if not self.restart_failed_envs:
                            raise
                        next_obs = self._replace(i, exc, int(first[i]) + t + 1)
                tree_assign(into, i, next_obs)
            book.add(rewards[t])
            for i in ended:
                book.end(i)
            if failed:
                skipped = np.zeros((steps, n), bool) if skipped is None else skipped
                self._abandon(failed, t, skipped, dones, truncations, obs_buf)
            if (ended or failed) and stateful is not None:
                stateful.episodes_ended(ended + failed)  # a recurrent policy forgets those envs' state
        if self.normalizer is not None:  # the episode book above counted the raw rewards
            rewards = self.normalizer.rewards(rewards, dones)
        segment = Segment(obs_buf, np.stack(actions), rewards, dones, terminateds, logps, values, eps,
                          last_obs=self.obs, next_obs=next_buf, truncations=truncations)  # fmt: skip
        return self._batch(segment, skipped)

    def _reset(self, env: gym.Env[Any, Any], i: int, step: int, seed: int | None = None) -> Any:
        """``env.reset``'s observation, checked (``reset`` returns ``(observation, info)``)."""
        out = env.reset(seed=seed)
        if self.checker is None:
            return out[0]
        obs = self.checker.reset_output(out, i, step)
        self.checker.observation(obs, i, step)
        return obs

    def _replace(self, i: int, exc: Exception, step: int) -> Any:
        """Env ``i`` raised at its step ``step`` (``restart_failed_envs``): close it, build a new
        one and reset it; its first observation. An env that keeps failing (``MAX_ENV_FAILURES``
        times in a row, its replacements included) fails the run with its own exception."""
        while True:
            in_a_row = self.failed_at[i] >= step - 1  # no step was done since the last failure
            self.failures[i] = self.failures[i] + 1 if in_a_row else 1
            self.failed_at[i] = step
            self.env_errors += 1
            if self.failures[i] >= MAX_ENV_FAILURES:
                exc.add_note(f"env {env_name(self.spec)!r} (worker {self.worker_index}, sub-env {i}) failed "
                             f"{MAX_ENV_FAILURES} times in a row, its replacements included")  # fmt: skip
                raise exc
            with contextlib.suppress(Exception):
                self.envs[i].close()
            try:
                env = make_env(self.spec)
                if self.normalizer is not None and isinstance(self.envs[i], NormalizeObservation):
                    env = NormalizeObservation(env, self.normalizer)
                self.envs[i] = env
                seed = new_episode_seed(self.worker_index, self.episodes.issued) + i
                return self._reset(env, i, step, seed=seed)
            except EnvOutputError:
                raise
            except Exception as again:  # noqa: BLE001 - counted, tried again
                exc = again

    def _abandon(
        self,
        lanes: list[int],
        t: int,
        skipped: np.ndarray,
        dones: np.ndarray,
        truncations: list[tuple[int, int, Any]],
        obs_buf: Any,
    ) -> None:
        """The episodes of ``lanes``, whose env failed at step ``t``, end before it: step ``t``
        leaves the batch, the step before it bootstraps from the observation it led to (as a
        time limit does), and the episode is dropped from the statistics."""
        for i in lanes:
            skipped[t, i] = dones[t, i] = True
            if t > 0 and not dones[t - 1, i]:
                dones[t - 1, i] = True
                truncations.append((t - 1, i, _copy_at(obs_buf, t, i)))
            self.episodes.drop(i)

    def _buffers(self, steps: int, n: int) -> tuple[Any, ...]:
        """One sample's arrays, ``(steps, n, ...)``: observations, next observations (or None),
        rewards, dones, terminateds, log-probs, values, episode ids. The observations lie
        lane-major in memory (``_lane_major_zeros``)."""
        space = self.observation_space
        next_buf = _lane_major_zeros(space, steps, n) if self.postprocessing.keeps_next_obs else None
        kinds = (np.float32, bool, bool, np.float32, np.float32, np.int64)
        return (_lane_major_zeros(space, steps, n), next_buf, *(np.zeros((steps, n), k) for k in kinds))

    def _sample_vector(self, vector: gym.vector.VectorEnv[Any, Any, Any]) -> SampleBatch:
        """``sample()`` for a vector env: one ``step`` per time step, every lane at once."""
        n, steps = self.num_envs, self.fragment
        book, policy, check = self.episodes, self.policy, self.checker
        first = self.env_steps
        keeps_next = self.postprocessing.keeps_next_obs
        obs_buf, next_buf, rewards, dones, terminateds, logps, values, eps = self._buffers(steps, n)
        skipped = np.zeros((steps, n), bool)  # autoreset steps: no episode's, dropped below
        actions: list[np.ndarray] = []
        truncations: list[tuple[int, int, Any]] = []
        for t in range(steps):
            obs_buf[t] = self.obs
            eps[t] = book.ids
            action, logps[t], values[t] = policy.compute_actions(self.obs)
            actions.append(action)
            next_obs, reward, terminated, truncated, _ = vector.step(policy.env_actions(action))
            if check is not None:
                self._check_vector_obs(check, next_obs, first + t + 1)
            resetting = self.resetting
            skipped[t] = resetting
            rewards[t] = reward
            terminateds[t] = terminated
            if keeps_next:
                next_buf[t] = next_obs  # type: ignore[index]
            ended = np.logical_or(terminated, truncated)
            dones[t] = ended | resetting
            if ended.any():
                for i in np.flatnonzero(truncated & ~terminated):
                    truncations.append((t, int(i), next_obs[i].copy()))
            values[t, resetting] = 0.0
            book.add(rewards[t], stepped=~resetting)
            for i in np.flatnonzero(ended):
                book.end(int(i))
            self.obs = next_obs
            self.resetting = ended
        segment = Segment(obs_buf, np.stack(actions), rewards, dones, terminateds, logps, values, eps,
                          last_obs=self.obs, next_obs=next_buf, truncations=truncations)  # fmt: skip
        return self._batch(segment, skipped)

    def _batch(self, segment: Segment, skipped: np.ndarray | None = None) -> SampleBatch:
        """The sample's batch: checked for NaN and inf, postprocessed, without the ``skipped``
        steps (``(T, k)``: the vector env's autoresets, failed envs), with its episodes."""
        if self.checker is not None:
            check_segment_finite(self.checker, segment, self.env_steps)
        self.env_steps = self.env_steps + self.fragment
        columns = self.postprocessing(segment, self.policy.values)
        if isinstance(self.policy, StatefulPolicy):  # a recurrent policy's states, (T, k, ...) like the segment
            columns.update(lane_major(self.policy.take_columns()))
        if skipped is not None and skipped.any():
            columns = drop_rows(columns, np.swapaxes(skipped, 0, 1).reshape(-1))
        returns, lengths = self.episodes.take()
        metrics: BatchMetrics = {"num_env_errors": self.env_errors}  # envs replaced (restart_failed_envs)
        self.env_errors = 0
        if self.scores_games:  # Atari: whole games' real scores; the lives the learner saw aside
            games = [game for env in self.envs for game in take_games(env) or ()]
            metrics["training_return"] = returns
            returns, lengths = [score for score, _ in games], [n for _, n in games]
        return SampleBatch(columns, episode_returns=returns, episode_lengths=lengths, metrics=metrics)

    def _check_vector_obs(self, check: EnvChecker, obs: Any, steps: np.ndarray | int) -> None:
        """The inline check of ``sample()`` for all lanes at once; a misfit names its lane."""
        shape, dtype = check.expected or ((), None)
        if type(obs) is np.ndarray and obs.shape == (self.num_envs, *shape) and obs.dtype == dtype:
            return
        lane_steps = np.broadcast_to(steps, (self.num_envs,))
        if type(obs) is np.ndarray and obs.shape[:1] == (self.num_envs,):
            for i in range(self.num_envs):
                check.observation(obs[i], i, int(lane_steps[i]))
        check.observation(obs, 0, int(lane_steps[0]))  # not one row per lane: lane 0's error names it

    def sample_with_gradients(self) -> tuple[list[np.ndarray], dict[str, float], SampleBatch]:
        """Sample, then compute gradients on that sample (A3C's worker step).

        The returned batch keeps only its episode records and size, so the
        driver can report metrics without receiving the data again.
        """
        batch = self.sample()
        grads, stats = self.compute_gradients(batch)
        summary = SampleBatch(
            {DONES: batch[DONES]},
            episode_returns=batch.episode_returns,
            episode_lengths=batch.episode_lengths,
            metrics=batch.metrics,
        )
        return grads, stats, summary

    def sync_normalizer(self, state: NormalizerState) -> NormalizerState | None:
        """Normalize with the global ``state`` from now on; return what was counted since the
        last sync (the driver merges it), or None when this worker does not normalize."""
        return None if self.normalizer is None else self.normalizer.sync(state)

    def get_state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the policy's training state (random generators, schedules),
        the episode and step counters, the normalizer's counts; and everything, environments
        mid-episode included, pickled (``exact``), which a restore uses only when trusted."""
        return {"policy": get_state(self.policy), "episodes_issued": self.episodes.issued,
                "env_steps": self.env_steps.copy(), "normalizer": self.normalizer,
                "exact": pickled_attributes(self, "the environments mid-episode")}  # fmt: skip

    def set_state(self, state: dict[str, Any] | bytes) -> None:
        """Put back what ``get_state`` returned: all of it where ``exact`` is there (a trusted
        checkpoint), else the policy and the counters, the environments starting new episodes."""
        if restore_exactly(self, state):
            return
        assert isinstance(state, dict)
        set_state(self.policy, state["policy"])
        self.episodes.issued = max(self.episodes.issued, int(state["episodes_issued"]))
        self.env_steps = np.array(state["env_steps"], np.int64).reshape(self.num_envs)
        if self.normalizer is not None and state["normalizer"] is not None:
            self.normalizer.restore(state["normalizer"])
        self.new_episodes()

    def new_episodes(self) -> None:
        """Abandon every episode in progress and reset every env, with seeds of their own
        (the same for the same counters: a run resumed twice goes on the same way twice)."""
        seed = new_episode_seed(self.worker_index, self.episodes.issued)
        if self.vector is not None:
            self.obs = self.vector.reset(seed=seed)[0]
            self.resetting[:] = False
        for i, env in enumerate(self.envs):
            tree_assign(self.obs, i, self._reset(env, i, int(self.env_steps[i]), seed=seed + i))
        for i in range(self.num_envs):
            self.episodes.drop(i)
        if isinstance(self.policy, StatefulPolicy):
            self.policy.episodes_ended(list(range(self.num_envs)))

    def close_envs(self) -> None:
        """Close the environments."""
        for env in self.envs:
            env.close()
        if self.vector is not None:
            self.vector.close()

    async def aclose(self) -> None:
        """Close the environments (the actor layer awaits this when the worker stops)."""
        self.close_envs()
