"""RL core: SampleBatch, GAE against a hand computation, the rollout worker."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asyncflow.rl import RolloutWorker, SampleBatch, compute_gae, concat_samples


def test_sample_batch_operations() -> None:
    b = SampleBatch({"x": np.arange(6), "eps_id": np.array([1, 1, 2, 2, 2, 3])}, episode_returns=[5.0])
    assert len(b) == 6 and len(b.slice(1, 3)) == 2
    both = concat_samples([b, b])
    assert len(both) == 12 and both.episode_returns == [5.0, 5.0]
    sizes = [len(m) for m in b.minibatches(4, np.random.default_rng(0))]
    assert sizes == [4, 2]
    rows = np.concatenate([m["x"] for m in b.minibatches(4, np.random.default_rng(0))])
    assert sorted(rows.tolist()) == list(range(6))
    assert [len(e) for e in b.split_by_episode()] == [2, 3, 1]
    with pytest.raises(ValueError, match="different lengths"):
        SampleBatch({"a": np.zeros(2), "b": np.zeros(3)})


def test_gae_matches_a_hand_computation() -> None:
    gamma, lam = 0.9, 0.8
    rewards = np.array([[1.0], [2.0], [3.0]], np.float32)
    values = np.array([[0.5], [1.0], [1.5]], np.float32)
    dones = np.array([[False], [True], [False]])
    last = np.array([2.0], np.float32)
    adv, targets = compute_gae(rewards, values, dones, last, gamma, lam)
    d2 = 3.0 + gamma * 2.0 - 1.5
    d1 = 2.0 - 1.0  # the episode ends after step 1: no bootstrap
    d0 = 1.0 + gamma * 1.0 - 0.5
    want = [d0 + gamma * lam * d1, d1, d2]
    np.testing.assert_allclose(adv[:, 0], want, rtol=1e-6)
    np.testing.assert_allclose(targets[:, 0], np.array(want) + values[:, 0], rtol=1e-6)


def test_worker_never_mixes_episodes_and_is_reproducible() -> None:
    batches = [RolloutWorker("CartPole-v1", num_envs=3, rollout_fragment_length=100, seed=1).sample() for _ in range(2)]
    b = batches[0]
    assert len(b) == 300
    np.testing.assert_array_equal(b["obs"], batches[1]["obs"])
    np.testing.assert_array_equal(b["actions"], batches[1]["actions"])
    for piece in b.split_by_episode():
        # Only the last step of an episode piece may be done; CartPole's start
        # states are near zero, and done steps end the piece.
        assert not piece["dones"][:-1].any()
    # Completed episodes are reported with their returns.
    assert len(b.episode_returns) == int(b["dones"].sum())
    assert sum(b.episode_lengths) <= 300 + 3 * 500


def test_truncation_bootstraps_from_the_final_value() -> None:
    import gymnasium as gym

    def short() -> gym.Env:  # type: ignore[type-arg]
        return gym.make("CartPole-v1", max_episode_steps=5)

    worker = RolloutWorker(short, num_envs=1, rollout_fragment_length=20, gamma=0.9, lam=1.0)
    b = worker.sample()
    truncated = np.flatnonzero(b["dones"])
    assert len(truncated) >= 1
    # A truncated step's reward carries gamma * V(final obs) on top of CartPole's 1.0.
    assert not np.allclose(b["rewards"][truncated], 1.0)
    assert np.allclose(np.delete(b["rewards"], truncated), 1.0)


def test_box_actions_are_clipped_for_the_env() -> None:
    worker = RolloutWorker("Pendulum-v1", num_envs=2, rollout_fragment_length=10)
    b = worker.sample()
    assert b["actions"].shape == (20, 1)
    assert np.all(np.abs(worker.policy.env_actions(b["actions"] * 100)) <= 2.0)


def test_multi_binary_actions_and_tuple_observations_sample() -> None:
    import gymnasium as gym

    class MultiBinaryCartPole(gym.Wrapper):  # type: ignore[type-arg]
        def __init__(self) -> None:
            super().__init__(gym.make("CartPole-v1"))
            self.action_space = gym.spaces.MultiBinary(2)

        def step(self, action: np.ndarray) -> Any:
            assert action.shape == (2,) and set(action.tolist()) <= {0, 1}
            return self.env.step(int(action[0]))

    b = RolloutWorker(MultiBinaryCartPole, num_envs=2, rollout_fragment_length=8).sample()
    assert b["actions"].shape == (16, 2) and b["actions"].dtype == np.int8
    b = RolloutWorker(lambda: gym.make("Blackjack-v1"), num_envs=2, rollout_fragment_length=8).sample()
    assert isinstance(b["obs"], tuple) and [o.dtype for o in b["obs"]] == [np.int64] * 3
    assert [o.shape for o in b["obs"]] == [(16,)] * 3
