"""Non-finite losses and gradients: the update is skipped (weights untouched),
counted, and the run stops with NonFiniteError after too many in a row."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from asyncflow import NonFiniteError
from asyncflow.algorithms import PPO, PPOConfig
from asyncflow.algorithms.ppo import ppo_loss
from asyncflow.rl import ActorCriticPolicy, DQNLearner, RolloutWorker, SACLearner, TD3Learner
from asyncflow.rl.data.replay_buffer import WEIGHTS
from asyncflow.rl.data.sample_batch import SampleBatch
from asyncflow.rl.policy import ReplayUpdate

CARTPOLE = (gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,), np.float32))


class SometimesNaN:
    """A PPO loss that is NaN whenever ``poison`` is set."""

    poison = False

    def __call__(self, ac: Any, batch: Any, config: Any) -> tuple[torch.Tensor, dict[str, float]]:
        loss, stats = ppo_loss(ac, batch, config)
        return (loss * float("nan"), stats) if self.poison else (loss, stats)


def _transitions(spaces: tuple[gym.Space[Any], gym.Space[Any]], n: int = 32, reward: float = 0.0) -> SampleBatch:
    rng = np.random.default_rng(0)
    obs_dim = spaces[0].shape[0]  # type: ignore[index]
    actions = (
        rng.integers(0, 2, n) if isinstance(spaces[1], gym.spaces.Discrete) else rng.uniform(-1, 1, (n, 1))
    ).astype(np.int64 if isinstance(spaces[1], gym.spaces.Discrete) else np.float32)
    return SampleBatch({"obs": rng.standard_normal((n, obs_dim)).astype(np.float32), "actions": actions,
                        "rewards": np.full(n, reward, np.float32),
                        "next_obs": rng.standard_normal((n, obs_dim)).astype(np.float32),
                        "discounts": np.full(n, 0.99, np.float32), WEIGHTS: np.ones(n, np.float32)})  # fmt: skip


def test_a_nan_minibatch_is_skipped_and_leaves_the_weights_alone() -> None:
    loss = SometimesNaN()
    policy = ActorCriticPolicy(*CARTPOLE, loss=loss, loss_config=PPOConfig(), max_nonfinite_updates=3)
    batch = RolloutWorker("CartPole-v1", num_envs=2, rollout_fragment_length=32).sample()
    before = policy.get_weights()
    loss.poison = True
    stats = policy.learn_on_batch(batch, num_epochs=1, minibatch_size=32)  # 2 minibatches, both NaN
    after = policy.get_weights()
    np.testing.assert_array_equal(after.vector, before.vector)
    assert after.version == before.version and stats == {"skipped_updates": 2}
    assert all(torch.all(m == 0) for m in policy.optimizer.exp_avg)  # the moments are untouched too
    loss.poison = False
    stats = policy.learn_on_batch(batch, num_epochs=1, minibatch_size=32)
    assert policy.get_weights().version == before.version + 2 and stats["skipped_updates"] == 2
    assert np.isfinite(stats["total_loss"])
    loss.poison = True
    with pytest.raises(NonFiniteError, match="3 updates in a row had a non-finite loss"):
        policy.learn_on_batch(batch, num_epochs=2, minibatch_size=32)


@pytest.mark.parametrize("learner", [DQNLearner, SACLearner, TD3Learner])
def test_replay_learners_skip_nan_batches_and_send_no_priorities(learner: Any) -> None:
    spaces = CARTPOLE if learner is DQNLearner else PENDULUM
    agent = learner(*spaces, hidden=(16,), max_nonfinite_updates=2)
    weights = agent.get_weights().vector.copy()
    stats = agent.learn_on_batch(_transitions(spaces, reward=float("nan")))
    assert stats == {"skipped_updates": 1}  # no TD errors: NaN priorities never reach the buffer
    np.testing.assert_array_equal(agent.get_weights().vector, weights)
    update = agent.learn_on_batch(_transitions(spaces))
    assert isinstance(update, ReplayUpdate) and update.td_error.shape == (32,) and np.isfinite(update.td_error).all()
    agent.learn_on_batch(_transitions(spaces, reward=float("inf")))
    with pytest.raises(NonFiniteError, match=f"{learner.__name__}: 2 updates in a row"):
        agent.learn_on_batch(_transitions(spaces, reward=float("nan")))


class NaNPPO(PPO):
    """PPO whose loss is always NaN: the run must stop, not train on NaN to the end."""

    loss = staticmethod(lambda ac, batch, config: (ppo_loss(ac, batch, config)[0] * float("nan"), {}))


@pytest.mark.timeout(60)
async def test_a_run_whose_updates_stay_nan_stops_with_a_clear_error() -> None:
    config = PPOConfig(num_workers=2, num_envs_per_worker=2, train_batch_size=256, max_nonfinite_updates=5)
    with pytest.raises(NonFiniteError, match=r"5 updates in a row .*\(max_nonfinite_updates"):
        async with NaNPPO(config) as algo:
            async for _ in algo.train():
                pass
