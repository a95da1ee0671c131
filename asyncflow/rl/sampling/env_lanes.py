"""``EnvLanes``: gymnasium envs stepped one by one, each reset on the spot (``lanes.Lanes``).

An env that ends is reset within the step, so no transition ever spans two
episodes. What each env returns is checked inline (type, shape and dtype of
the observation, the reward's and flags' types: the usual step costs no
call); a misfit is an ``EnvOutputError`` naming the env, lane and step. With
``restart_failed_envs`` an env whose ``step`` or ``reset`` raises is closed
and rebuilt; ``MAX_ENV_FAILURES`` failures in a row fail the run with the
env's own exception.
"""

from __future__ import annotations

import contextlib
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import EnvOutputError
from ..data.sample_batch import BatchMetrics
from ..data.tree import tree_assign, tree_map
from ..envs.atari import take_games
from ..envs.checks import FLAG_TYPES, REWARD_TYPES, EnvChecker, env_name
from ..envs.make import EnvSpec, make_env
from .lanes import StepRow
from .normalization import NormalizeObservation, WorkerNormalizer

__all__ = ["MAX_ENV_FAILURES", "EnvLanes"]

MAX_ENV_FAILURES = 3
"""``restart_failed_envs``: an env that fails this many times in a row, with no step done in
between (each replacement failing at once, at its reset or its first step), fails the run with
its own exception."""


class EnvLanes:
    """``num_lanes`` gymnasium envs made from ``spec``, stepped one by one."""

    def __init__(self, spec: EnvSpec, num_lanes: int, *, worker_index: int, check_env_output: bool,
                 restart_failed_envs: bool) -> None:  # fmt: skip
        self.spec = spec
        self.num_lanes = num_lanes
        self.worker_index = worker_index
        self.envs = [make_env(spec) for _ in range(num_lanes)]
        self.observation_space: gym.Space[Any] = self.envs[0].observation_space
        self.action_space: gym.Space[Any] = self.envs[0].action_space
        self.checker = EnvChecker(spec, self.observation_space, worker_index) if check_env_output else None
        self.restart_failed_envs = restart_failed_envs
        self.env_errors = 0  # envs replaced since the last report (restart_failed_envs)
        self.failures = np.zeros(num_lanes, np.int64)  # each env's failures with no step done in between
        self.failed_at = np.full(num_lanes, -2, np.int64)  # the env step of each env's latest failure
        self.replacements = 0
        self.normalizer: WorkerNormalizer | None = None
        self.scores_games = any(take_games(e) is not None for e in self.envs)

    def normalize_observations(self, normalizer: WorkerNormalizer) -> None:
        """Observations normalized by ``normalizer`` from now on (replacement envs too)."""
        self.normalizer = normalizer
        self.envs = [NormalizeObservation(e, normalizer) for e in self.envs]

    def reset(self, into: Any, seed: int, steps: np.ndarray) -> None:
        for i, env in enumerate(self.envs):
            tree_assign(into, i, self._reset(env, i, int(steps[i]), seed=seed + i))

    def step(self, actions: Any, row: StepRow) -> None:
        check, t, first = self.checker, row.t, row.first
        shape, dtype = check.expected if check is not None and check.expected is not None else ((), None)
        into, next_buf, rewards, terminateds, dones = row.into, row.next_obs, row.rewards, row.terminateds, row.dones
        for i, env in enumerate(self.envs):
            try:
                out = env.step(actions[i])
            except Exception as exc:
                if not self.restart_failed_envs:
                    raise
                row.failed.append(i)
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
                if type(terminated) not in FLAG_TYPES or type(truncated) not in FLAG_TYPES or type(info) is not dict:
                    check.flags(terminated, truncated, info, i, int(first[i]) + t + 1)
            rewards[i] = reward
            if next_buf is not None:
                tree_assign(next_buf, i, next_obs)
            terminateds[i] = terminated
            if terminated or truncated:
                dones[i] = True
                row.ended.append(i)
                if truncated and not terminated:
                    row.truncations.append((i, tree_map(np.array, next_obs)))
                try:
                    next_obs = self._reset(env, i, int(first[i]) + t + 1)
                except EnvOutputError:
                    raise
                except Exception as exc:
                    if not self.restart_failed_envs:
                        raise
                    next_obs = self._replace(i, exc, int(first[i]) + t + 1)
            tree_assign(into, i, next_obs)

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
                if self.normalizer is not None:
                    env = NormalizeObservation(env, self.normalizer)
                self.envs[i] = env
                self.replacements += 1
                seed = int(np.random.SeedSequence([self.worker_index, i, self.replacements]).generate_state(1)[0])
                return self._reset(env, i, step, seed=seed)
            except EnvOutputError:
                raise
            except Exception as again:  # noqa: BLE001 - counted, tried again
                exc = again

    def report(self, returns: list[float], lengths: list[int]) -> tuple[list[float], list[int], BatchMetrics]:
        metrics: BatchMetrics = {"num_env_errors": self.env_errors}  # envs replaced (restart_failed_envs)
        self.env_errors = 0
        if self.scores_games:  # Atari: whole games' real scores; the lives the learner saw aside
            games = [game for env in self.envs for game in take_games(env) or ()]
            metrics["training_return"] = returns
            returns, lengths = [score for score, _ in games], [n for _, n in games]
        return returns, lengths, metrics

    def close(self) -> None:
        for env in self.envs:
            env.close()
