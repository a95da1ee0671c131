"""Replay buffers, sum trees, n-step returns, V-trace, and transition sampling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asyncflow.rl.data.replay_buffer import BATCH_INDEXES, WEIGHTS, PrioritizedReplayBuffer, ReplayBuffer
from asyncflow.rl.data.sample_batch import DISCOUNTS, DONES, EPS_ID, NEXT_OBS, OBS, REWARDS, TERMINATEDS, SampleBatch
from asyncflow.rl.data.sum_tree import MinTree, SumTree
from asyncflow.rl.learners.vtrace import vtrace
from asyncflow.rl.sampling.postprocessing import compute_nstep
from asyncflow.rl.sampling.rollout_worker import RolloutWorker


def _rows(start: int, n: int) -> SampleBatch:
    return SampleBatch({"x": np.arange(start, start + n, dtype=np.float32), "y": np.ones((n, 2), np.int64)})


def test_sum_tree_prefix_search_matches_a_cumulative_sum() -> None:
    rng = np.random.default_rng(0)
    tree, mins = SumTree(37), MinTree(37)
    values = rng.random(37) * 10
    tree[np.arange(37)] = values
    mins[np.arange(37)] = values
    assert tree.total() == pytest.approx(values.sum())
    assert mins.min() == pytest.approx(values.min())
    prefix = rng.random(1000) * values.sum()
    expected = np.searchsorted(np.cumsum(values), prefix, side="right")
    np.testing.assert_array_equal(tree.find_prefix(prefix), expected)
    tree[np.array([3, 3, 5])] = np.array([0.0, 1.0, 2.0])  # repeated index: the last value wins
    values[3], values[5] = 1.0, 2.0
    assert tree.total() == pytest.approx(values.sum())


def test_uniform_buffer_is_a_ring_that_keeps_the_newest_rows() -> None:
    buffer = ReplayBuffer(10, seed=0)
    buffer.add(_rows(0, 6))
    buffer.add(_rows(6, 7))  # wraps around: rows 3..12 remain
    assert len(buffer) == 10
    sample = buffer.sample(500)
    assert set(sample["x"].astype(int)) == set(range(3, 13))
    assert (sample[WEIGHTS] == 1).all() and sample[BATCH_INDEXES].max() < 10
    buffer.add(_rows(100, 25))  # larger than the capacity: only the newest 10 fit
    assert set(buffer.sample(500)["x"].astype(int)) == set(range(115, 125))
    with pytest.raises(ValueError, match="columns"):
        buffer.add(SampleBatch({"x": np.zeros(2, np.float32)}))
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(4).sample(1)


def test_prioritized_sampling_frequencies_match_priorities() -> None:
    alpha, beta = 0.6, 0.4
    buffer = PrioritizedReplayBuffer(8, alpha=alpha, beta=beta, eps=0.0, seed=0)
    buffer.add(_rows(0, 8))
    td = np.array([0.1, 0.5, 1.0, 2.0, 4.0, 0.2, 3.0, 8.0])
    buffer.update_priorities(np.arange(8), td)
    expected = td**alpha / (td**alpha).sum()
    draws = np.concatenate([buffer.sample(1000)[BATCH_INDEXES] for _ in range(200)])
    freq = np.bincount(draws, minlength=8) / len(draws)
    # 200k draws: the standard error of each frequency is below 0.001.
    np.testing.assert_allclose(freq, expected, atol=0.004)
    chi2 = (((freq - expected) ** 2) / expected).sum() * len(draws)
    assert chi2 < 24.3  # the 0.999 quantile of chi-square with 7 degrees of freedom
    sample = buffer.sample(64)
    probs = expected[sample[BATCH_INDEXES]]
    weights = (8 * probs) ** -beta / (8 * expected.min()) ** -beta
    np.testing.assert_allclose(sample[WEIGHTS], weights, rtol=1e-5)
    assert sample[WEIGHTS].max() <= 1.0


def test_new_rows_get_the_largest_priority_seen() -> None:
    buffer = PrioritizedReplayBuffer(8, alpha=1.0, eps=0.0, seed=0)
    buffer.add(_rows(0, 2))
    buffer.update_priorities(np.array([0, 1]), np.array([5.0, 0.5]))
    slots = buffer.add(_rows(2, 1))
    assert buffer.priorities(slots)[0] == pytest.approx(5.0)


def test_priorities_for_rows_past_those_held_are_left_out() -> None:
    """Indexes sampled from a shard that was since restarted empty: the rows they name are not
    held, and a priority there would make the empty slots drawable."""
    buffer = PrioritizedReplayBuffer(8, alpha=1.0, eps=0.0, seed=0)
    buffer.add(_rows(0, 2))
    buffer.update_priorities(np.array([1, 5, 7]), np.array([3.0, 9.0, 9.0]))
    np.testing.assert_allclose(buffer.priorities(np.arange(8)), [1.0, 3.0, 0, 0, 0, 0, 0, 0])
    assert buffer.sample(200)[BATCH_INDEXES].max() == 1
    assert buffer.priorities(buffer.add(_rows(2, 1)))[0] == pytest.approx(3.0)  # 9 was never seen


def test_nstep_returns_against_a_hand_computed_case() -> None:
    # One env, 5 steps, gamma 0.5, n = 3; the episode terminates after step 2.
    rewards = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]], np.float32)
    next_obs = np.arange(5, dtype=np.float32).reshape(5, 1, 1) + 10
    terminateds = np.array([[0], [0], [1], [0], [0]], bool)
    returns, nxt, discounts = compute_nstep(rewards, next_obs, terminateds, terminateds, 0.5, 3)
    # t=0: 1 + .5*2 + .25*4 = 3, ends at the termination (t=2): no bootstrap.
    # t=1: 2 + .5*4 = 4, also ends at t=2. t=2: 4.
    # t=3: 8 + .5*16 = 16, the fragment ends at t=4: bootstrap from next_obs[4] with .5**2.
    # t=4: 16, bootstrap with .5.
    np.testing.assert_allclose(returns[:, 0], [3, 4, 4, 16, 16])
    np.testing.assert_allclose(discounts[:, 0], [0, 0, 0, 0.25, 0.5])
    np.testing.assert_allclose(nxt[:, 0, 0], [12, 12, 12, 14, 14])
    # A time-limit truncation stops the sum but keeps the bootstrap.
    dones = np.array([[0], [1], [0], [0], [0]], bool)
    returns, nxt, discounts = compute_nstep(rewards, next_obs, np.zeros_like(dones), dones, 0.5, 3)
    np.testing.assert_allclose(returns[:2, 0], [2, 2])
    np.testing.assert_allclose(discounts[:2, 0], [0.25, 0.5])
    np.testing.assert_allclose(nxt[:2, 0, 0], [11, 11])


def _vtrace_reference(log_rhos, discounts, rewards, values, next_values, continues, clip_rho, clip_pg_rho, clip_c):  # type: ignore[no-untyped-def]
    """The definition, term by term: v_s = V(x_s) + sum_t (prod_{i<t} discount_i c_i) delta_t,
    summing while the episode continues."""
    steps, batch = values.shape
    rhos = np.exp(log_rhos)
    vs = np.zeros_like(values)
    for b in range(batch):
        for s in range(steps):
            total, weight = 0.0, 1.0
            for t in range(s, steps):
                delta = min(clip_rho, rhos[t, b]) * (rewards[t, b] + discounts[t, b] * next_values[t, b] - values[t, b])
                total += weight * delta
                if not continues[t, b]:
                    break
                weight *= discounts[t, b] * min(clip_c, rhos[t, b])
            vs[s, b] = values[s, b] + total
    adv = np.zeros_like(values)
    for b in range(batch):
        for s in range(steps):
            nxt = vs[s + 1, b] if continues[s, b] else next_values[s, b]
            adv[s, b] = min(clip_pg_rho, rhos[s, b]) * (rewards[s, b] + discounts[s, b] * nxt - values[s, b])
    return vs, adv


@pytest.mark.parametrize("clips", [(1.0, 1.0, 1.0), (0.8, 2.0, 0.5)])
def test_vtrace_matches_the_loop_reference(clips: tuple[float, float, float]) -> None:
    rng = np.random.default_rng(1)
    steps, batch = 12, 4
    log_rhos = rng.normal(0, 0.7, (steps, batch))
    terminated = rng.random((steps, batch)) < 0.1
    discounts = 0.9 * (1 - terminated)
    rewards = rng.normal(size=(steps, batch))
    values = rng.normal(size=(steps, batch))
    next_values = np.concatenate([values[1:], rng.normal(size=(1, batch))])
    continues = ~(terminated | (rng.random((steps, batch)) < 0.05))
    continues[-1] = False
    # Where an episode ends, the next observation's value is not the next row's.
    next_values = np.where(continues, next_values, rng.normal(size=(steps, batch)))
    clip_rho, clip_pg_rho, clip_c = clips
    expected = _vtrace_reference(log_rhos, discounts, rewards, values, next_values, continues, *clips)
    t = [torch.as_tensor(x) for x in (log_rhos, discounts, rewards, values, next_values, continues)]
    vs, adv = vtrace(*t, clip_rho=clip_rho, clip_pg_rho=clip_pg_rho, clip_c=clip_c)
    np.testing.assert_allclose(vs.numpy(), expected[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(adv.numpy(), expected[1], rtol=1e-6, atol=1e-9)


def test_on_policy_vtrace_is_the_n_step_return() -> None:
    # With pi == mu (log rho = 0) and no clipping in play, v_s is the discounted
    # return to the sequence end, bootstrapped from the last next value.
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [0.1], [-0.2]])
    next_values = torch.tensor([[0.1], [-0.2], [4.0]])
    discounts = torch.full((3, 1), 0.5)
    continues = torch.tensor([[True], [True], [False]])
    vs, _ = vtrace(torch.zeros(3, 1), discounts, rewards, values, next_values, continues)
    assert vs[0, 0].item() == pytest.approx(1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 4)


def test_transition_samples_keep_the_real_final_observation() -> None:
    worker = RolloutWorker("CartPole-v1", num_envs=3, rollout_fragment_length=200, postprocess="transitions", seed=3)
    batch = worker.sample()
    assert len(batch) == 600 and batch.episode_returns
    same_episode = batch[EPS_ID][1:] == batch[EPS_ID][:-1]
    # Inside an episode, each row's next_obs is the next row's obs.
    np.testing.assert_array_equal(batch[NEXT_OBS][:-1][same_episode], batch[OBS][1:][same_episode])
    ends = np.flatnonzero(batch[DONES][:-1] & ~same_episode)
    assert len(ends) > 0
    # At an episode end, next_obs is the final observation (out of bounds for a
    # terminated CartPole), not the reset observation that follows.
    final = batch[NEXT_OBS][ends]
    assert (np.abs(final[:, 0]) > 2.4).any() or (np.abs(final[:, 2]) > 0.2095).any()
    assert not np.allclose(final, batch[OBS][ends + 1])
    np.testing.assert_allclose(batch[DISCOUNTS], 0.99 * (1 - batch[TERMINATEDS]))
    assert batch[REWARDS].dtype == np.float32
