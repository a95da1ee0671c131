"""Replay that stores each frame once: the stacks it samples are the stacks that went in."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from asyncflow.rl.data.frame_store import FrameStore, is_frame_stack
from asyncflow.rl.data.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
from asyncflow.rl.data.sample_batch import DONES, OBS, SampleBatch
from asyncflow.rl.sampling.rollout_worker import RolloutWorker

from ..toy_envs import stacked_noise


def _stream(n_step: int, batches: int) -> list[SampleBatch]:
    """Real transition batches of 3 interleaved envs with frame stacks, episode ends and truncations."""
    worker = RolloutWorker(stacked_noise, num_envs=3, rollout_fragment_length=40, postprocess="transitions",
                           n_step=n_step, seed=1)  # fmt: skip
    return [worker.sample() for _ in range(batches)]


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("n_step", [1, 3])
def test_sampled_stacks_equal_the_naive_buffer_across_episode_ends(prioritized: bool, n_step: int) -> None:
    stream = _stream(n_step, 12)
    assert sum(int(b[DONES].sum()) for b in stream) > 20  # many episode ends inside the stream
    make = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    dedup, naive = make(200, seed=5), make(200, seed=5, frame_dedup=False)
    for batch in stream:  # 1,440 rows through a ring of 200: it wraps and frees frames many times
        dedup.add(batch)
        naive.add(batch)
        a, b = dedup.sample(64), naive.sample(64)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        if prioritized:
            errors = np.random.default_rng(len(dedup)).random(64)
            dedup.update_priorities(a["batch_indexes"], errors)
            naive.update_priorities(b["batch_indexes"], errors)
    held = dedup.state()["frames"]
    # One new frame per row, and the stack of each row's (n-step) next_obs that no later row repeats.
    assert isinstance(held, int) and held <= 200 + 4 * (3 + 200 // 3 + n_step)
    assert dedup.nbytes * 3 < naive.nbytes


def test_stacks_of_different_frames_never_share_a_slot() -> None:
    store = FrameStore((2, 3), capacity=2)  # grows past its first capacity
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 3, (40, 2, 3), dtype=np.uint8)  # few values: many equal frames
    stacks = frames[rng.integers(0, 40, (50, 4))]
    slots = store.add(stacks)
    np.testing.assert_array_equal(store.get(slots), stacks)
    assert len(store) == len({frame.tobytes() for frame in stacks.reshape(-1, 2, 3)})  # each distinct frame once
    store.release(slots[:25])
    np.testing.assert_array_equal(store.get(slots[25:]), stacks[25:])
    store.release(slots[25:])
    assert len(store) == 0 and store.slots_by_hash == {}


def test_a_hash_collision_keeps_both_frames() -> None:
    store = FrameStore((8,), capacity=4)
    store._hash = lambda flat: np.zeros(len(flat), np.uint64)  # type: ignore[method-assign] # every frame collides
    stacks = np.array([[[1] * 8, [2] * 8], [[2] * 8, [3] * 8]], np.uint8)
    slots = store.add(stacks)
    np.testing.assert_array_equal(store.get(slots), stacks)
    assert len(store) == 3


def test_the_buffer_survives_pickling_with_its_frames() -> None:
    buffer = ReplayBuffer(100, seed=2)
    for batch in _stream(1, 4):
        buffer.add(batch)
    copy = pickle.loads(pickle.dumps(buffer))
    a, b = buffer.sample(32), copy.sample(32)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    copy.add(_stream(1, 1)[0])  # and goes on storing
    assert len(copy) == 100


def test_only_stacks_of_frames_are_deduplicated() -> None:
    assert is_frame_stack(np.zeros((5, 4, 84, 84), np.uint8))
    assert not is_frame_stack(np.zeros((5, 84, 84, 3), np.uint8))  # an RGB image, channels last
    assert not is_frame_stack(np.zeros((5, 4, 84, 84), np.float32))
    assert not is_frame_stack(np.zeros((5, 84, 84), np.uint8))
    stream = _stream(1, 1)
    buffer = ReplayBuffer(50)
    buffer.add(SampleBatch({OBS: stream[0][OBS][:10], "plain": np.zeros((10, 84, 84, 3), np.uint8)}))
    assert list(buffer._stacked) == [OBS]
