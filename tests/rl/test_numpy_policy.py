"""The numpy inference of the built-in actor-critic MLP: the torch policy's numbers,
its distribution, and None for every network it cannot run."""

from __future__ import annotations

import pickle
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from asyncflow.rl.models import ModelConfig
from asyncflow.rl.models.numpy_export import numpy_net
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy
from asyncflow.rl.policies.numpy_policy import NumpyActorCriticPolicy

VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)

CASES = {
    "discrete": (VECTOR, gym.spaces.Discrete(3), None),
    "discrete with start": (VECTOR, gym.spaces.Discrete(3, start=-1), None),
    "box of shape (2, 2)": (gym.spaces.Box(-1.0, 1.0, (3, 2), np.float64), gym.spaces.Box(-0.5, 0.5, (2, 2)), None),
    "shared relu torso": (VECTOR, gym.spaces.Discrete(2), ModelConfig(shared=True, activation="relu")),
    "one hidden layer": (VECTOR, gym.spaces.Box(-2.0, 2.0, (1,)), ModelConfig(hidden=(16,))),
}


def pair(obs_space: gym.Space, act_space: gym.Space, model: ModelConfig | None):
    """A torch policy and a numpy one with the same (perturbed, so not the initial) weights."""
    torch_policy = ActorCriticPolicy(obs_space, act_space, model=model, seed=3)
    net = numpy_net(torch_policy.model, obs_space, act_space)
    assert net is not None
    numpy_policy = NumpyActorCriticPolicy(obs_space, act_space, net=net, seed=3)
    weights = torch_policy.get_weights()
    weights.vector[:] += np.random.default_rng(0).normal(0, 0.3, weights.vector.shape).astype(np.float32)
    torch_policy.set_weights(weights)
    numpy_policy.set_weights(weights)
    return torch_policy, numpy_policy


@pytest.mark.parametrize("case", list(CASES))
def test_numpy_inference_gives_the_torch_policys_values_log_probs_and_greedy_actions(case: str) -> None:
    obs_space, act_space, model = CASES[case]
    torch_policy, numpy_policy = pair(obs_space, act_space, model)
    obs = np.random.default_rng(1).uniform(-1, 1, (32, *obs_space.shape)).astype(obs_space.dtype)
    actions, log_probs, values = numpy_policy.compute_actions(obs)
    with torch.no_grad():
        dist, torch_values = torch_policy.ac(torch_policy.tensors(obs))
        torch_log_probs = dist.log_prob(torch.as_tensor(actions)).numpy()
    assert actions.shape == torch_policy.compute_actions(obs)[0].shape
    assert log_probs.dtype == values.dtype == np.float32
    np.testing.assert_allclose(values, torch_values.numpy(), atol=1e-5)
    np.testing.assert_allclose(log_probs, torch_log_probs, atol=1e-5)
    np.testing.assert_allclose(numpy_policy.values(obs), torch_values.numpy(), atol=1e-5)
    np.testing.assert_allclose(numpy_policy.greedy_actions(obs), torch_policy.greedy_actions(obs), atol=1e-5)
    np.testing.assert_array_equal(numpy_policy.env_actions(actions), torch_policy.env_actions(actions))


def test_sampled_discrete_actions_follow_the_policys_probabilities() -> None:
    torch_policy, numpy_policy = pair(VECTOR, gym.spaces.Discrete(3), None)
    obs = np.tile(np.array([[0.3, -0.2, 0.5, 0.1]], np.float32), (20_000, 1))
    actions, _, _ = numpy_policy.compute_actions(obs)
    with torch.no_grad():
        probs = torch_policy.ac(torch_policy.tensors(obs[:1]))[0].probs.numpy()[0]
    frequencies = np.bincount(actions, minlength=3) / len(actions)
    assert probs.min() > 0.05  # the perturbed weights make every action likely enough to count
    np.testing.assert_allclose(frequencies, probs, atol=0.015)  # about 4 standard errors


def test_sampled_gaussian_actions_have_the_policys_mean_and_std() -> None:
    torch_policy, numpy_policy = pair(VECTOR, gym.spaces.Box(-2.0, 2.0, (2,)), None)
    obs = np.tile(np.array([[0.3, -0.2, 0.5, 0.1]], np.float32), (20_000, 1))
    actions, log_probs, _ = numpy_policy.compute_actions(obs)
    with torch.no_grad():
        dist = torch_policy.ac(torch_policy.tensors(obs[:1]))[0]
    np.testing.assert_allclose(actions.mean(0), dist.mean.numpy()[0], atol=0.05)
    np.testing.assert_allclose(actions.std(0), dist.log_std.exp().numpy()[0], rtol=0.03)
    assert np.isfinite(log_probs).all()


def test_the_same_seed_gives_the_same_actions_and_another_seed_others() -> None:
    _, a = pair(VECTOR, gym.spaces.Discrete(3), None)
    _, b = pair(VECTOR, gym.spaces.Discrete(3), None)
    c = NumpyActorCriticPolicy(VECTOR, gym.spaces.Discrete(3), net=a.net, seed=4)
    c.set_weights(a.get_weights())
    obs = np.random.default_rng(1).uniform(-1, 1, (64, 4)).astype(np.float32)
    first = a.compute_actions(obs)[0]
    np.testing.assert_array_equal(first, b.compute_actions(obs)[0])
    assert (first != c.compute_actions(obs)[0]).any()


def test_a_pickled_policy_keeps_its_weights_and_takes_new_ones() -> None:
    torch_policy, numpy_policy = pair(VECTOR, gym.spaces.Discrete(2), None)
    obs = np.random.default_rng(1).uniform(-1, 1, (8, 4)).astype(np.float32)
    copy = pickle.loads(pickle.dumps(numpy_policy))
    np.testing.assert_array_equal(copy.values(obs), numpy_policy.values(obs))
    weights = torch_policy.get_weights()
    weights.vector[:] *= 0.5
    copy.set_weights(weights)  # into the unpickled vector, which its layers must view
    torch_policy.set_weights(weights)
    np.testing.assert_allclose(copy.values(obs), torch_policy.values(obs), atol=1e-5)
    assert copy.get_weights().version == weights.version


def test_weights_of_another_size_are_refused() -> None:
    torch_policy, numpy_policy = pair(VECTOR, gym.spaces.Discrete(2), None)
    weights = torch_policy.get_weights()
    with pytest.raises(ValueError, match="weights of 9154 values for a network of 9155"):
        numpy_policy.set_weights(type(weights)(weights.vector[:-1], 1))


class OwnModel(nn.Module):
    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        self.pi, self.vf = nn.Linear(4, 2), nn.Linear(4, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.pi(obs), self.vf(obs).squeeze(-1)


def hooked(obs_space: gym.Space, act_space: gym.Space) -> nn.Module:
    policy = ActorCriticPolicy(obs_space, act_space)
    policy.model.pi[0].register_forward_hook(lambda *_: None)
    return policy.model


@pytest.mark.parametrize(
    ("obs_space", "act_space", "build"),
    [
        (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), gym.spaces.Discrete(4), None),  # the CNN
        (gym.spaces.Dict({"a": VECTOR, "b": gym.spaces.Discrete(3)}), gym.spaces.Discrete(2), None),
        (gym.spaces.Discrete(5), gym.spaces.Discrete(2), None),  # a one-hot encoder
        (VECTOR, gym.spaces.MultiDiscrete([2, 3]), None),
        (VECTOR, gym.spaces.MultiBinary(3), None),
        (VECTOR, gym.spaces.Discrete(2), OwnModel),
        (VECTOR, gym.spaces.Discrete(2), hooked),
    ],
    ids=["image", "dict", "discrete obs", "multi-discrete", "multi-binary", "own model", "forward hook"],
)
def test_networks_numpy_cannot_run_exactly_give_none(obs_space: gym.Space, act_space: gym.Space, build) -> None:
    model = build(obs_space, act_space) if build else ActorCriticPolicy(obs_space, act_space).model
    assert numpy_net(model, obs_space, act_space) is None


def test_a_worker_with_the_numpy_policy_imports_no_torch() -> None:
    """In a fresh interpreter: the worker's modules, a worker sampling, and its state round trip."""
    code = """
import sys, numpy as np, gymnasium as gym
from asyncflow.rl.policies.numpy_policy import Dense, NumpyActorCriticPolicy, NumpyNet
from asyncflow.rl.sampling.rollout_worker import RolloutWorker
from asyncflow.rl.sampling.evaluation_worker import EvaluationWorker
import asyncflow.actors._worker, asyncflow.rl
net = NumpyNet(size=15, obs_dim=4, torso=(), pi=(Dense(0, 8, 4, 2, None),), vf=(Dense(10, 14, 4, 1, None),))
def factory(o, a, *, seed, worker_index):
    return NumpyActorCriticPolicy(o, a, net=net, seed=seed)
worker = RolloutWorker("CartPole-v1", policy_factory=factory, num_envs=2, rollout_fragment_length=8)
batch = worker.sample()
worker.set_state(worker.get_state())
assert len(batch) == 16 and np.isfinite(batch["advantages"]).all(), batch
print("torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
