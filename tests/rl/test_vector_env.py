"""``vector_env=True``: a worker steps gymnasium's own vectorized CartPole, one call for
all lanes; its autoreset steps belong to no episode and never reach a batch."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from asyncflow import ConfigError
from asyncflow.algorithms import IMPALA, PPO, IMPALAConfig, PPOConfig, TwoTrainer, TwoTrainerConfig
from asyncflow.rl import RolloutWorker
from asyncflow.rl.data.sample_batch import ADVANTAGES, DONES, EPS_ID, NEXT_OBS, OBS, REWARDS, VALUE_TARGETS, VF_PREDS

from ..conftest import actor_children


def _episodes(batches: list[dict[str, np.ndarray]]) -> dict[int, int]:
    """Rows per episode id over consecutive samples."""
    rows: dict[int, int] = {}
    for b in batches:
        ids, counts = np.unique(b[EPS_ID], return_counts=True)
        for i, c in zip(ids.tolist(), counts.tolist(), strict=True):
            rows[i] = rows.get(i, 0) + c
    return rows


def test_every_row_is_a_real_step_and_episodes_add_up() -> None:
    worker = RolloutWorker("CartPole-v1", num_envs=16, rollout_fragment_length=50, vector_env=True, seed=3)
    batches, returns = [], []
    for _ in range(12):
        b = worker.sample()
        batches.append(b)
        returns += b.episode_returns
        assert [int(r) for r in b.episode_returns] == b.episode_lengths
        lanes = b[EPS_ID].reshape(-1)
        # Lane-major: an episode's rows are contiguous and never interleave with another's.
        changes = np.flatnonzero(np.diff(lanes)) + 1
        assert len(np.unique(lanes)) == len(changes) + 1
        assert (b[REWARDS] == 1.0).all()  # an autoreset step (reward 0) never gets in
        ends = np.flatnonzero(b[DONES])
        assert set(ends.tolist()) <= set((changes - 1).tolist()) | {len(lanes) - 1}
    assert len(returns) > 50
    rows = _episodes(batches)
    ended = [i for b in batches for i in b[EPS_ID][b[DONES]].tolist()]
    # Every finished episode's return is its number of rows (reward 1 per step): no row
    # was lost or added, across sample boundaries too.
    assert sorted(rows[i] for i in ended) == sorted(int(r) for r in returns)


def test_a_terminal_row_bootstraps_nothing() -> None:
    worker = RolloutWorker("CartPole-v1", num_envs=8, rollout_fragment_length=100, vector_env=True)
    b = worker.sample()
    terminal = b[DONES]
    assert terminal.any()
    np.testing.assert_allclose(b[VALUE_TARGETS][terminal], b[REWARDS][terminal], atol=1e-6)
    np.testing.assert_allclose(b[ADVANTAGES][terminal], (b[REWARDS] - b[VF_PREDS])[terminal], atol=1e-5)


def test_transitions_keep_the_real_final_observation() -> None:
    worker = RolloutWorker(
        "CartPole-v1", num_envs=8, rollout_fragment_length=100, vector_env=True, postprocess="transitions"
    )
    b = worker.sample()
    done = b[DONES]
    assert done.any()
    # CartPole ends when the pole leans past 12 degrees or the cart leaves [-2.4, 2.4]:
    # the next observation of an ending row is that final state, not a fresh reset.
    final = b[NEXT_OBS][done]
    assert ((np.abs(final[:, 2]) > 0.2094) | (np.abs(final[:, 0]) > 2.4)).all()
    # Within an episode a row's next observation is the following row's observation.
    same = b[EPS_ID][1:] == b[EPS_ID][:-1]
    np.testing.assert_array_equal(b[NEXT_OBS][:-1][same], b[OBS][1:][same])


def test_the_loop_and_the_vector_env_see_the_same_dynamics() -> None:
    """A random policy's mean episode length is the same within noise either way."""
    lengths = {}
    for vector in (False, True):
        worker = RolloutWorker("CartPole-v1", num_envs=16, rollout_fragment_length=200, vector_env=vector, seed=1)
        got: list[int] = []
        while len(got) < 400:
            got += worker.sample().episode_lengths
        lengths[vector] = np.mean(got)
    assert abs(lengths[True] - lengths[False]) < 0.15 * lengths[False], lengths


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PPO(PPOConfig(env="Acrobot-v1", vector_env=True)), "no vectorized implementation"),
        (lambda: PPO(PPOConfig(env=_cartpole, vector_env=True)), "not a callable"),
        (lambda: IMPALA(IMPALAConfig(vector_env=True)), "fixed-length sequences"),
        (lambda: TwoTrainer(TwoTrainerConfig(vector_env=True)), "multi-agent"),
    ],
)
def test_what_cannot_be_vectorized_is_a_config_error_before_any_process(make: object, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^vector_env: .*{message}"):
        make()  # type: ignore[operator]
    assert actor_children() == []


def _cartpole() -> object:
    import gymnasium as gym

    return gym.make("CartPole-v1")


@pytest.mark.slow
def test_ppo_with_vector_envs_solves_cartpole() -> None:
    async def run() -> float:
        config = PPOConfig(env="CartPole-v1", num_workers=2, seed=0, vector_env=True)
        async with PPO(config) as algo:
            async for result in algo.train():
                if result["episode_return_mean"] >= 475 or result["num_env_steps_sampled"] >= 200_000:
                    return float(result["episode_return_mean"])
        raise AssertionError("unreachable")

    assert asyncio.run(run()) >= 475
