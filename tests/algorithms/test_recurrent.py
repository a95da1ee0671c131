"""Recurrent policies (``use_lstm``): workers carry each env's state and reset it at episode
starts, batches carry whole sequences, the learner replays them from the stored state, and
an LSTM learns a memory task that no memoryless policy can."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from asyncflow import ConfigError
from asyncflow.algorithms import A2C, ALGORITHMS, DQN, PPO, A2CConfig, DQNConfig, PPOConfig
from asyncflow.evaluate import evaluate, load_policy, saved_normalizer
from asyncflow.export import export_policy
from asyncflow.rl.data.sample_batch import ACTIONS, DONES, LOGP, OBS, VF_PREDS
from asyncflow.rl.policies.recurrent import SEQ_START, STATE_C, STATE_H, RecurrentPolicy
from asyncflow.rl.sampling.rollout_worker import RolloutWorker

from ..toy_envs import CueRecall

LENGTH = 8


def _worker() -> RolloutWorker:
    factory: Any = lambda obs_space, act_space, **kw: RecurrentPolicy(  # noqa: E731
        obs_space, act_space, lstm_size=16, max_seq_len=LENGTH, hidden=(16,), **kw
    )
    return RolloutWorker(CueRecall, policy_factory=factory, num_envs=3, rollout_fragment_length=4 * LENGTH, seed=1)


def test_rows_record_the_state_they_acted_from_and_episode_starts() -> None:
    worker = _worker()
    first, second = worker.sample(), worker.sample()
    for batch, fresh in ((first, True), (second, False)):
        starts, dones = batch[SEQ_START].reshape(3, -1), batch[DONES].reshape(3, -1)
        # Lane-major: each env's steps contiguous. A step starts an episode right after a done.
        np.testing.assert_array_equal(starts[:, 1:], dones[:, :-1])
        assert starts[:, 0].all() == fresh  # only the very first step of a worker starts fresh
        h = batch[STATE_H].reshape(3, -1, 16)
        assert not h[starts].any()  # an episode starts from zeros
        assert np.abs(h[~starts]).sum() > 0


def test_the_learner_replays_each_sequence_from_its_stored_state() -> None:
    worker = _worker()
    batch = worker.sample()
    policy: RecurrentPolicy = worker.policy
    tensors = policy.tensors(dict(batch))
    starts = tensors[SEQ_START].reshape(-1, LENGTH)
    state = (tensors[STATE_H][::LENGTH], tensors[STATE_C][::LENGTH])
    with torch.no_grad():
        policy.rac.sequence = (starts, state)
        dist, values = policy.rac(tensors[OBS])
        policy.rac.sequence = None
    # The same numbers the worker computed step by step while it acted.
    np.testing.assert_allclose(values.numpy(), batch[VF_PREDS], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dist.log_prob(tensors[ACTIONS]).numpy(), batch[LOGP], rtol=1e-5, atol=1e-6)


def test_minibatches_are_whole_sequences() -> None:
    policy = RecurrentPolicy(CueRecall.observation_space, CueRecall.action_space, max_seq_len=LENGTH)
    order = policy.order(np.random.default_rng(0), 12 * LENGTH, shuffle=True)
    blocks = order.reshape(-1, LENGTH)
    assert sorted(blocks[:, 0] // LENGTH) == list(range(12)) and blocks[:, 0].tolist() != sorted(blocks[:, 0])
    np.testing.assert_array_equal(blocks - blocks[:, :1], np.tile(np.arange(LENGTH), (12, 1)))


def test_recurrent_settings_that_cannot_work_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="not available for DQN"):
        DQN(DQNConfig(env=CueRecall, use_lstm=True, rollout_fragment_length=16))
    with pytest.raises(ConfigError, match="max_seq_len"):
        PPOConfig(use_lstm=True, rollout_fragment_length=100, max_seq_len=16)
    with pytest.raises(ConfigError, match="vector_env"):
        PPO(PPOConfig(use_lstm=True, vector_env=True))
    with pytest.raises(ConfigError, match="model of your own"):
        PPO(PPOConfig(use_lstm=True, model=lambda obs, act: torch.nn.Linear(4, 2)))


async def test_a_recurrent_run_checkpoints_and_goes_on(tmp_path: Path) -> None:
    config = A2CConfig(env=CueRecall, num_workers=2, use_lstm=True, num_envs_per_worker=2, rollout_fragment_length=32)
    async with A2C(config) as algo:
        async for _ in algo.train():
            break
        path = await algo.save(tmp_path / "lstm.ckpt")
        weights = algo.learner.get_weights().vector
    async with A2C.restore(path) as restored:
        np.testing.assert_array_equal(restored.learner.get_weights().vector, weights)
        async for result in restored.train():
            assert result["training_iteration"] == 2
            break
    played = evaluate(path, episodes=4)  # asyncflow evaluate: the state carried through each episode
    assert played.lengths == [5, 5, 5, 5] and set(played.returns) <= {-1.0, 1.0}


BUDGET = 60_000


async def _train(use_lstm: bool) -> tuple[dict[str, Any], float | None]:
    config = PPOConfig(env=CueRecall, num_workers=2, num_envs_per_worker=8, rollout_fragment_length=64,
                       train_batch_size=1024, minibatch_size=256, num_epochs=4, lr=1e-3, seed=0,
                       use_lstm=use_lstm, evaluation_interval=1000, evaluation_episodes=50)  # fmt: skip
    async with PPO(config) as algo:
        async for result in algo.train():
            if result["episode_return_mean"] >= 0.9 or result["num_env_steps_sampled"] >= BUDGET:
                break
        greedy = (await algo.evaluate())["episode_return_mean"]
    print(f"CueRecall use_lstm={use_lstm}: {result['episode_return_mean']:.2f} after "
          f"{result['num_env_steps_sampled']} steps, greedy {greedy:.2f}")  # fmt: skip
    return result, greedy


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_an_lstm_learns_to_remember_and_an_mlp_cannot() -> None:
    lstm, lstm_greedy = await _train(use_lstm=True)
    assert lstm["episode_return_mean"] >= 0.9 and lstm["num_env_steps_sampled"] <= BUDGET
    assert lstm_greedy is not None and lstm_greedy >= 0.9  # evaluation carries the state through episodes
    mlp, _ = await _train(use_lstm=False)
    assert mlp["num_env_steps_sampled"] >= BUDGET and mlp["episode_return_mean"] < 0.5  # chance is 0


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["impala", "appo"])
async def test_the_asynchronous_plans_learn_to_remember_too(name: str) -> None:
    cls = ALGORITHMS[name]
    config = cls.config_class(env=CueRecall, num_workers=2, rollout_fragment_length=64, seed=0, use_lstm=True)
    async with cls(config) as algo:
        async for result in algo.train():
            if result["episode_return_mean"] >= 0.9 or result["num_env_steps_sampled"] >= 100_000:
                break
    print(
        f"CueRecall {name} use_lstm: {result['episode_return_mean']:.2f} after {result['num_env_steps_sampled']} steps"
    )
    assert result["episode_return_mean"] >= 0.9


LOAD = """
import sys
import numpy as np
import torch
policy = torch.jit.load(sys.argv[1])
obs = torch.as_tensor(np.load(sys.argv[2]))  # (steps, batch, 3)
h = c = torch.zeros(obs.shape[1], int(sys.argv[4]))
actions = []
for t in range(len(obs)):
    a, h, c = policy(obs[t], h, c)
    actions.append(a.numpy())
np.save(sys.argv[3], np.stack(actions))
assert not any(name.startswith("asyncflow") for name in sys.modules)
"""


async def test_an_exported_recurrent_policy_carries_its_state_like_the_framework(tmp_path: Path) -> None:
    config = PPOConfig(env=CueRecall, num_workers=2, use_lstm=True, lstm_size=16, num_envs_per_worker=8,
                       rollout_fragment_length=64, train_batch_size=1024, minibatch_size=256, num_epochs=4, lr=1e-3,
                       normalize_observations=True)  # fmt: skip
    async with PPO(config) as algo:
        async for result in algo.train():  # until its actions depend on what it remembers
            if result["episode_return_mean"] >= 0.5 or result["num_env_steps_sampled"] >= 50_000:
                break
        ckpt = await algo.save(tmp_path / "lstm.ckpt")
    export_policy(ckpt, tmp_path / "lstm.pt")
    cues = np.zeros((6, 200, 3), np.float32)  # 200 CueRecall episodes: the cue, 4 blanks, the question
    cues[0, np.arange(200), np.arange(200) % 2] = 1.0
    cues[4, :, 2] = 1.0
    noise = np.random.default_rng(0).normal(0.5, 1.0, (6, 200, 3)).astype(np.float32)
    obs = np.concatenate([cues, noise], axis=1)
    np.save(tmp_path / "obs.npy", obs)
    _, policy = load_policy(ckpt)
    normalizer = saved_normalizer(load_policy(ckpt)[0])
    assert isinstance(policy, RecurrentPolicy) and normalizer is not None
    policy.reset_state()
    want = np.stack([policy.env_actions(policy.greedy_actions(normalizer.normalize(o))) for o in obs])
    run = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path / "lstm.pt"), str(tmp_path / "obs.npy"),
                          str(tmp_path / "out.npy"), "16"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 1  # not constant: the comparison means something
    with pytest.raises(ConfigError, match="onnx"):
        export_policy(ckpt, tmp_path / "lstm.onnx", fmt="onnx")
