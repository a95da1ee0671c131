"""Any space, the user's own model, any device, through real algorithms and processes.

The learning tests for these spaces are in test_learning_spaces.py; this file
checks the plumbing: dtypes at every stage, bytes through the rings, user
models on every backend and in checkpoints, errors at the right place.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import asyncflow
from asyncflow import ConfigError
from asyncflow.algorithms import (
    A2C,
    DQN,
    IMPALA,
    PPO,
    SAC,
    TD3,
    A2CConfig,
    Algorithm,
    DQNConfig,
    IMPALAConfig,
    PPOConfig,
    SACConfig,
    TD3Config,
)
from asyncflow.algorithms.ppo import ppo_loss
from asyncflow.evaluate import evaluate
from asyncflow.rl import ActorCriticPolicy, ReplayBuffer, RolloutWorker
from asyncflow.rl.models import ActorCriticNet

from ..conftest import actor_children, our_segments
from ..toy_envs import Frames, float_frames

ROOT = Path(__file__).resolve().parents[2]


class MyNet(nn.Module):
    """A user's actor-critic for CartPole: one shared tanh layer."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(observation_space.shape[0], 32), nn.Tanh())  # type: ignore[index]
        self.logits = nn.Linear(32, int(action_space.n))  # type: ignore[attr-defined]
        self.value = nn.Linear(32, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(obs)
        return self.logits(h), self.value(h).squeeze(-1)


def q_net(observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> nn.Module:
    """A user's Q network factory."""
    return nn.Sequential(nn.Linear(observation_space.shape[0], 32), nn.ReLU(), nn.Linear(32, action_space.n))  # type: ignore[index,attr-defined]


class TwinCritic(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.q = nn.ModuleList(
            nn.Sequential(nn.Linear(obs_dim + act_dim, 32), nn.ReLU(), nn.Linear(32, 1)) for _ in "ab"
        )

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, actions], -1)
        return torch.cat([q(x) for q in self.q], -1)


class MySAC(nn.Module):
    """A user's continuous-control model: an actor and a twin critic."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()
        o, d = observation_space.shape[0], action_space.shape[0]  # type: ignore[index]
        self.actor = nn.Sequential(nn.Linear(o, 32), nn.ReLU(), nn.Linear(32, 2 * d))
        self.critic = TwinCritic(o, d)


class BreaksLater(MyNet):
    """Honours the protocol, then raises on its fifth forward pass (in a worker)."""

    calls = 0

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        if self.calls == 5:
            raise ValueError("BreaksLater broke on purpose")
        return super().forward(obs)


class DtypeSpy(nn.Module):
    """The built-in model, recording the dtype of every observation it is given."""

    seen: ClassVar[list[torch.dtype]] = []

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()
        self.net = ActorCriticNet(observation_space, action_space)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        DtypeSpy.seen.append(obs.dtype)
        return self.net(obs)  # type: ignore[no-any-return]


async def _bytes_per_step(rt: asyncflow.Runtime, env: Any) -> float:
    worker = await rt.spawn(RolloutWorker, env, num_envs=2, rollout_fragment_length=32)
    await worker.sample()  # warm-up: the first call also carries the actor's start-up messages
    before = rt.statistics().bytes_moved
    batch = await worker.sample()
    return (rt.statistics().bytes_moved - before) / len(batch)


async def test_uint8_frames_stay_uint8_from_env_to_learner_and_move_4x_fewer_bytes() -> None:
    # Worker (in this process): the batch holds the env's own dtype.
    batch = RolloutWorker(Frames, num_envs=2, rollout_fragment_length=16).sample()
    assert batch["obs"].dtype == np.uint8 and batch["obs"].shape == (32, 84, 84, 4)
    # Through the rings: still uint8, and a quarter of float32's bytes per env step.
    async with asyncflow.open_runtime() as rt:
        remote = await (await rt.spawn(RolloutWorker, Frames, num_envs=2, rollout_fragment_length=16)).sample()
        assert remote["obs"].dtype == np.uint8
        uint8_bytes = await _bytes_per_step(rt, Frames)
        float_bytes = await _bytes_per_step(rt, float_frames)
    frame = 84 * 84 * 4
    assert frame <= uint8_bytes < frame * 1.05, uint8_bytes  # the frame plus a few small columns
    assert float_bytes / uint8_bytes > 3.8, (float_bytes, uint8_bytes)
    # Replay buffer and its checkpoint: uint8 storage, uint8 samples.
    buffer = ReplayBuffer(100)
    buffer.add(batch)
    assert buffer.sample(8)["obs"].dtype == np.uint8
    restored = pickle.loads(pickle.dumps(buffer))
    assert restored.sample(8)["obs"].dtype == np.uint8
    # The learner: the model is handed uint8 tensors and casts them itself.
    spaces = (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), gym.spaces.Discrete(4))
    learner = ActorCriticPolicy(*spaces, model=DtypeSpy, loss=ppo_loss, loss_config=PPOConfig())
    DtypeSpy.seen.clear()
    learner.learn_on_batch(batch, minibatch_size=16)
    assert DtypeSpy.seen and set(DtypeSpy.seen) == {torch.uint8}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
async def test_a_user_model_class_trains_on_every_backend(num_workers: int) -> None:
    config = PPOConfig(env="CartPole-v1", model=MyNet, num_workers=num_workers, num_envs_per_worker=4,
                       rollout_fragment_length=32, train_batch_size=256, minibatch_size=64)  # fmt: skip
    async with PPO(config) as algo:
        assert isinstance(algo.learner.model, MyNet)
        before = algo.learner.get_weights()
        results = await _results(algo, 2)
        worker = await algo.workers.workers[0].get_weights()
    assert results[-1]["num_env_steps_trained"] >= 512
    after = algo.learner.get_weights()
    assert after.version == before.version + 2 * 5 * 4  # 2 iterations x 5 epochs x 4 minibatches
    np.testing.assert_array_equal(worker.vector, after.vector)


async def _results(algo: Algorithm, n: int) -> list[dict[str, Any]]:
    """The first ``n`` results of ``algo.train()``."""
    out = []
    async for result in algo.train():
        out.append(result)
        if len(out) == n:
            return out
    raise AssertionError("the plan ended")


@pytest.mark.timeout(120)
async def test_user_models_for_dqn_and_sac_and_per_policy_in_two_trainer() -> None:
    dqn = DQN(DQNConfig(model=q_net, num_workers=2, learning_starts=64, timesteps_per_iteration=256))
    async with dqn:
        result = (await _results(dqn, 1))[0]
        assert isinstance(dqn.learner.model, nn.Sequential) and result["num_env_steps_trained"] > 0
    sac = SAC(SACConfig(model=MySAC, num_workers=1, learning_starts=64, timesteps_per_iteration=128))
    async with sac:
        result = (await _results(sac, 1))[0]
        assert isinstance(sac.learner.model, MySAC) and result["num_env_steps_trained"] > 0
    from asyncflow.algorithms import TwoTrainer, TwoTrainerConfig
    from asyncflow.algorithms.two_trainer import DQN_POLICY, PPO_POLICY

    config = TwoTrainerConfig(ppo_model=MyNet, dqn_model=q_net, num_workers=1, rollout_fragment_length=128,
                              ppo_train_batch_size=256, timesteps_per_iteration=256,
                              dqn_learning_starts=64)  # fmt: skip
    async with TwoTrainer(config) as two:
        await _results(two, 2)
        assert isinstance(two.learner.by_id[PPO_POLICY].model, MyNet)
        assert isinstance(two.learner.by_id[DQN_POLICY].model, nn.Sequential)
    with pytest.raises(ConfigError, match=r"set ppo\.model and dqn\.model"):
        TwoTrainerConfig(model=MyNet)


@pytest.mark.timeout(120)
async def test_a_user_model_survives_checkpoint_resume_and_evaluate(tmp_path: Path) -> None:
    config = PPOConfig(model=MyNet, num_workers=2, num_envs_per_worker=4, rollout_fragment_length=32,
                       train_batch_size=256, minibatch_size=64)  # fmt: skip
    async with PPO(config) as algo:
        await _results(algo, 2)
        path = await algo.save(tmp_path / "ppo.ckpt")
        saved = algo.learner.get_weights()
    async with PPO.restore(path) as again:
        np.testing.assert_array_equal(again.learner.get_weights().vector, saved.vector)
        result = (await _results(again, 1))[0]
        assert result["training_iteration"] == 3
    evaluation = evaluate(path, episodes=2)
    assert len(evaluation.returns) == 2 and evaluation.mean > 0
    out = subprocess.run([sys.executable, "-m", "asyncflow.cli", "evaluate", str(path), "--episodes", "2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "return" in out.stdout


@pytest.mark.timeout(60)
async def test_a_user_model_that_raises_in_a_worker_gives_its_traceback_at_the_caller() -> None:
    algo = PPO(PPOConfig(model=BreaksLater, num_workers=2, num_envs_per_worker=2, train_batch_size=128))
    with pytest.raises(ValueError, match="BreaksLater broke on purpose") as caught:
        async with algo:
            await _results(algo, 1)
    remote = str(caught.value.__cause__)
    assert "in forward" in remote and "test_models_and_spaces.py" in remote
    assert actor_children() == [] and our_segments(os.getpid()) == []


class BoxGrid(gym.Wrapper):  # type: ignore[type-arg]
    """Pendulum with its one action given as a 1x1 Box (any shape must work)."""

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.action_space = gym.spaces.Box(-2.0, 2.0, (1, 1), np.float32)

    def step(self, action: np.ndarray) -> Any:
        assert action.shape == (1, 1), action.shape
        return self.env.step(action.reshape(1))


class MultiDiscreteCartPole(gym.Wrapper):  # type: ignore[type-arg]
    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.action_space = gym.spaces.MultiDiscrete([2, 3])

    def step(self, action: np.ndarray) -> Any:
        assert action.shape == (2,), action
        return self.env.step(int(action[0]))


@pytest.mark.parametrize(
    ("algo", "config", "env", "message"),
    [
        (DQN, DQNConfig, MultiDiscreteCartPole, "DQN takes Discrete actions, not MultiDiscrete"),
        (SAC, SACConfig, MultiDiscreteCartPole, "SAC takes Box actions, not MultiDiscrete"),
        (TD3, TD3Config, "CartPole-v1", "TD3 takes Box actions, not Discrete"),
    ],
)
def test_an_action_space_an_algorithm_cannot_take_names_both(algo: Any, config: Any, env: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        algo(config(env=env))
    assert actor_children() == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("algo", "config", "env"),
    [
        (PPO, PPOConfig, MultiDiscreteCartPole),
        (A2C, A2CConfig, BoxGrid),
        (IMPALA, IMPALAConfig, MultiDiscreteCartPole),
        (SAC, SACConfig, BoxGrid),
        (TD3, TD3Config, BoxGrid),
    ],
)
async def test_multi_discrete_and_shaped_box_actions_train(algo: Any, config: Any, env: Any) -> None:
    fields: dict[str, Any] = {"env": env, "num_workers": 2}
    if algo in (SAC, TD3):
        fields |= {"learning_starts": 64, "timesteps_per_iteration": 64}
    elif algo is IMPALA:
        fields |= {"timesteps_per_iteration": 512}
    else:
        fields |= {"num_envs_per_worker": 2, "rollout_fragment_length": 64, "train_batch_size": 256}
    async with algo(config(**fields)) as run:
        results = await _results(run, 2)
    assert results[-1]["num_env_steps_trained"] > 0


def test_a_bad_user_model_fails_before_any_process_starts() -> None:
    from ..rl.test_models import WrongWidth

    with pytest.raises(ConfigError, match=r"WrongWidth.forward returned distribution inputs of shape \(2, 3\)"):
        PPO(PPOConfig(model=WrongWidth))
    with pytest.raises(ConfigError, match="learner_device"):
        PPOConfig(learner_device="tpu")
    assert actor_children() == []


@pytest.mark.timeout(180)
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)")
@pytest.mark.parametrize("name", ["ppo", "dqn", "sac", "appo"])
async def test_the_learner_trains_on_cuda(name: str) -> None:  # pragma: no cover - needs a GPU
    from asyncflow.algorithms import ALGORITHMS

    cls = ALGORITHMS[name]
    fields: dict[str, Any] = {"learner_device": "cuda", "num_workers": 2}
    if name in ("dqn", "sac"):
        fields |= {"learning_starts": 64, "timesteps_per_iteration": 256}
    async with cls(cls.config_class(**fields)) as algo:
        assert all(p.device.type == "cuda" for p in algo.learner.model.parameters())
        results = await _results(algo, 2)
        weights = await algo.workers.workers[0].get_weights()
    assert results[-1]["num_env_steps_trained"] > 0
    assert weights.vector.dtype == np.float32 and isinstance(weights.vector, np.ndarray)


class BagOfCharacters(nn.Module):
    """A user's model for ``Text`` observations: a histogram of character codes, then an MLP."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, int(action_space.n) + 1))  # type: ignore[attr-defined]

    def forward(self, obs: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        assert isinstance(obs, np.ndarray) and obs.dtype == object
        counts = torch.zeros(len(obs), 64)
        for i, text in enumerate(obs):
            for ch in str(text):
                counts[i, ord(ch) % 64] += 1
        out = self.net(counts)
        return out[:, :-1], out[:, -1]


@pytest.mark.timeout(120)
async def test_text_observations_train_with_a_user_model_on_worker_processes() -> None:
    from .test_config_and_cli import TextCartPole

    config = PPOConfig(env=TextCartPole, model=BagOfCharacters, num_workers=2, num_envs_per_worker=2,
                       rollout_fragment_length=32, train_batch_size=128, minibatch_size=32)  # fmt: skip
    async with PPO(config) as algo:
        results = await _results(algo, 2)
    assert results[-1]["num_env_steps_trained"] >= 256
