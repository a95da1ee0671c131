"""A new kind of env is one adapter: a ``Lanes`` class of the caller's own, sampled by the
unchanged ``RolloutWorker`` through its one stepping loop and one recorder."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from asyncflow.algorithms.a2c import A2CConfig, a2c_loss
from asyncflow.errors import EnvOutputError
from asyncflow.rl.data.sample_batch import ADVANTAGES, DONES, EPS_ID, OBS, REWARDS
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy
from asyncflow.rl.sampling.lanes import StepRow
from asyncflow.rl.sampling.rollout_worker import RolloutWorker

LENGTH = 10


class CountdownLanes:
    """``num_lanes`` countdowns in one numpy array: each step pays 1 for action 1 in even lanes
    and for action 0 in odd ones; an episode ends after ``LENGTH`` steps (a time limit in lane 0,
    a termination elsewhere) and the lane starts the next one on the spot."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env: Any, num_lanes: int, *, worker_index: int, check_env_output: bool) -> None:
        self.num_lanes = num_lanes
        self.left = np.full(num_lanes, LENGTH)
        self.parity = (np.arange(num_lanes) % 2).astype(np.float32)
        self.steps_since_report = 0
        self.closed = False

    def _obs(self) -> np.ndarray:
        return np.stack([self.left / LENGTH, self.parity], axis=1).astype(np.float32)

    def reset(self, into: Any, seed: int, steps: np.ndarray) -> None:
        self.left[:] = LENGTH
        into[...] = self._obs()

    def step(self, actions: Any, row: StepRow) -> None:
        self.steps_since_report += 1
        row.rewards[:] = (np.asarray(actions) == 1 - self.parity).astype(np.float32)
        self.left -= 1
        ended = self.left == 0
        if row.next_obs is not None:
            row.next_obs[...] = self._obs()
        final = self._obs()
        row.terminateds[:] = ended & (np.arange(self.num_lanes) > 0)
        row.dones[:] = ended
        row.ended.extend(np.flatnonzero(ended).tolist())
        if ended[0]:
            row.truncations.append((0, final[0].copy()))
        self.left[ended] = LENGTH
        row.into[...] = self._obs()

    def report(self, returns: list[float], lengths: list[int]) -> tuple[list[float], list[int], dict[str, Any]]:
        metrics: dict[str, Any] = {"num_countdown_steps": self.steps_since_report}
        self.steps_since_report = 0
        return returns, lengths, metrics

    def close(self) -> None:
        self.closed = True


def test_a_new_kind_of_env_is_one_adapter() -> None:
    worker = RolloutWorker("countdown", lanes=CountdownLanes, num_envs=3, rollout_fragment_length=25, seed=1)
    batch = worker.sample()
    assert len(batch) == 75  # 3 lanes x 25 steps, lane-major
    assert batch[OBS].shape == (75, 2) and batch[OBS].dtype == np.float32
    dones = batch[DONES].reshape(3, 25)
    assert [np.flatnonzero(d).tolist() for d in dones] == [[9, 19]] * 3  # each lane's episodes end at 10 and 20
    assert sorted(batch.episode_lengths) == [LENGTH] * 6
    rewards = batch[REWARDS].reshape(3, 25)
    lane_returns = [rewards[i, :10].sum() for i in range(3)]
    assert sorted(batch.episode_returns) == sorted(lane_returns + [rewards[i, 10:20].sum() for i in range(3)])
    assert batch.metrics == {"num_countdown_steps": 25}  # the adapter's own measure, passed through as is
    eps = batch[EPS_ID].reshape(3, 25)
    assert len({*eps[:, :10].ravel().tolist()}) == 3 and (eps[:, 10] != eps[:, 9]).all()  # a new id per episode
    assert np.isfinite(batch[ADVANTAGES]).all()
    second = worker.sample()  # the countdown goes on across samples: the next episodes end at 30 - 25 = 5
    assert [np.flatnonzero(d).tolist() for d in second[DONES].reshape(3, 25)] == [[4, 14, 24]] * 3
    worker.close_envs()
    assert worker.lanes.closed  # type: ignore[attr-defined]


def test_learning_through_an_adapter() -> None:
    """The worker's policy learns the lanes' rule from batches the one loop recorded: each lane
    pays for its own action, so a policy that reads the parity gets every reward."""

    def policy(observation_space: Any, action_space: Any, *, seed: int, worker_index: int) -> ActorCriticPolicy:
        return ActorCriticPolicy(observation_space, action_space, seed=seed, lr=3e-3, loss=a2c_loss,
                                 loss_config=A2CConfig())  # fmt: skip

    worker = RolloutWorker("countdown", lanes=CountdownLanes, policy_factory=policy, num_envs=4,
                           rollout_fragment_length=50, seed=0)  # fmt: skip
    first = float(np.mean(worker.sample().episode_returns))
    for _ in range(30):
        grads, _ = worker.compute_gradients(worker.sample())
        worker.policy.apply_gradients(grads)
    last = float(np.mean(worker.sample().episode_returns))
    assert first < 7 and last > 9, (first, last)


class NaNLanes(CountdownLanes):
    """A countdown whose lane 2 pays NaN at its 7th step."""

    def step(self, actions: Any, row: StepRow) -> None:
        super().step(actions, row)
        if row.t == 6:
            row.rewards[2] = np.nan


def test_an_adapters_nan_is_named() -> None:
    """The recorder checks every adapter's output: a NaN reward fails the sample, naming the
    lane and the step, however the lanes are stepped."""
    worker = RolloutWorker("countdown", lanes=NaNLanes, num_envs=3, rollout_fragment_length=10)
    with pytest.raises(EnvOutputError, match=r"sub-env 2.*step 7|step 7.*sub-env 2"):
        worker.sample()
