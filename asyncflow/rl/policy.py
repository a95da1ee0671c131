"""The contracts between workers, learners and plans: ``WorkerPolicy``,
``PolicyFactory`` and ``Learner``, and the flat weights that travel between them.

A rollout worker holds a ``WorkerPolicy`` built by a ``PolicyFactory``; a
plan trains a ``Learner`` and broadcasts its ``FlatWeights`` to the workers.
This module imports no torch (a worker whose policy is numpy's never
loads it, ``policies/numpy_policy.py``). The actor-critic policy (``policies/actor_critic.py``)
is both; DQN, SAC and TD3 have a worker policy (``policies/``) and a learner of their own
(in ``algorithms/dqn.py``, ``sac.py``, ``td3.py``).
``check_learner`` checks a learner once, in the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from ..errors import ConfigError
from .data.sample_batch import SampleBatch
from .data.tree import Tree

if TYPE_CHECKING:
    from torch import nn

__all__ = [
    "FlatWeights",
    "Learner",
    "MinibatchLearner",
    "ModelWeights",
    "PolicyFactory",
    "ReplayUpdate",
    "StatefulPolicy",
    "TargetLearner",
    "WorkerPolicy",
    "check_learner",
    "flat_weights",
    "load_flat_weights",
]


@dataclass(frozen=True)
class FlatWeights:
    """All parameters in one CPU float32 vector: serialized once per broadcast,
    travelling out of band as a single buffer."""

    vector: np.ndarray
    version: int


def flat_weights(module: nn.Module, version: int) -> FlatWeights:
    """``module``'s parameters as one CPU vector (a copy, from any device)."""
    from torch import nn

    from .learners.device import to_numpy

    return FlatWeights(to_numpy(nn.utils.parameters_to_vector(module.parameters())), version)


class ModelWeights:
    """``get_weights`` and ``set_weights`` of ``self.model``, the weights that travel, with
    ``self.version`` (its update count): for a policy or a learner whose one model is all
    its workers need."""

    model: nn.Module
    version: int

    def get_weights(self) -> FlatWeights:
        """The model's parameters as one flat CPU vector, with the version."""
        return flat_weights(self.model, self.version)

    def set_weights(self, weights: FlatWeights) -> None:
        """Load a flat weight vector (and its version)."""
        load_flat_weights(self.model, weights.vector)
        self.version = weights.version


def load_flat_weights(module: nn.Module, vector: np.ndarray) -> None:
    """Copy a flat vector into ``module``'s parameters, on whatever device they live.

    In place, unlike ``vector_to_parameters`` (which points each parameter at a slice of
    the vector): the parameters keep their own memory, so they never alias a received
    array, and an optimizer that holds them in one buffer (``optim.Adam``) keeps them."""
    import torch

    params = list(module.parameters())
    source = torch.as_tensor(vector).to(params[0].device)
    if source.numel() != sum(p.numel() for p in params):
        raise ValueError(f"weights of {source.numel()} values for a network of {sum(p.numel() for p in params)}")
    with torch.no_grad():
        offset = 0
        for p in params:
            p.copy_(source[offset : offset + p.numel()].view_as(p))
            offset += p.numel()


@runtime_checkable
class WorkerPolicy(Protocol):
    """What a rollout worker asks of its policy. Observations are batched trees
    of numpy arrays (``tree.py``); every method is numpy in, numpy out.

    ::

        class RandomPolicy:
            def __init__(self, observation_space, action_space, *, seed=0, worker_index=0):
                self.space, self.rng = action_space, np.random.default_rng(seed)
            def compute_actions(self, obs):
                n = len(obs)
                actions = self.rng.integers(0, self.space.n, n)
                return actions, np.zeros(n, np.float32), np.zeros(n, np.float32)
            def greedy_actions(self, obs): return self.compute_actions(obs)[0]
            def values(self, obs): return np.zeros(len(obs), np.float32)
            def env_actions(self, actions): return actions
            def get_weights(self): return FlatWeights(np.zeros(0, np.float32), 0)
            def set_weights(self, weights): pass
    """

    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled actions for a batch, with their log-probabilities and state values."""
        ...

    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """The deterministic actions (evaluation)."""
        ...

    def values(self, obs: Tree) -> np.ndarray:
        """State values (zeros for a policy without a critic)."""
        ...

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Actions as ``env.step`` takes them."""
        ...

    def get_weights(self) -> FlatWeights:
        """The weights, as the learner sends them."""
        ...

    def set_weights(self, weights: FlatWeights) -> None:
        """Load weights from the learner."""
        ...


@runtime_checkable
class StatefulPolicy(Protocol):
    """A worker policy that carries a state per env from step to step (``use_lstm``'s).

    Its worker tells it which envs were reset, and adds the per-step columns it recorded
    to each sample; evaluation resets it at each episode::

        if isinstance(policy, StatefulPolicy):
            policy.episodes_ended([2])     # env 2 was reset: its next step starts afresh
            columns = policy.take_columns()  # {"state_h": (T, envs, H), ...}
    """

    def episodes_ended(self, lanes: Sequence[int]) -> None: ...

    def take_columns(self) -> dict[str, np.ndarray]: ...

    def reset_state(self) -> None: ...


class PolicyFactory(Protocol):
    """Builds a worker's policy: ``factory(observation_space, action_space, seed=, worker_index=)``."""

    def __call__(
        self, observation_space: gym.Space[Any], action_space: gym.Space[Any], *, seed: int, worker_index: int
    ) -> WorkerPolicy: ...


@dataclass(frozen=True)
class ReplayUpdate:
    """What a replay learner's step returns: its stats, and one absolute TD error per
    row of the batch, which ``update_priorities`` sends back as the rows' new priorities."""

    stats: dict[str, float]
    td_error: np.ndarray


@runtime_checkable
class Learner(Protocol):
    """What a plan's learner operators ask of a learner.

    ``learn_on_batch`` returns its stats (floats by name), or, to feed prioritized
    replay, a ``ReplayUpdate`` that carries the TD errors beside them. A learner
    with a target network also has ``update_target()``::

        class MyLearner:
            def learn_on_batch(self, batch):
                ...  # one update
                return ReplayUpdate({"loss": loss}, np.abs(td_error))
            def get_weights(self): return flat_weights(self.model)
    """

    def learn_on_batch(self, batch: SampleBatch) -> Mapping[str, float] | ReplayUpdate:
        """One update on ``batch``."""
        ...

    def get_weights(self) -> Any:
        """The weights the workers need (``FlatWeights``, or a dict of them by policy id)."""
        ...


@runtime_checkable
class MinibatchLearner(Protocol):
    """A learner that trains epochs of shuffled minibatches on a batch (``train_one_step``'s):
    the actor-critic policy."""

    def learn_on_batch(
        self, batch: SampleBatch, num_epochs: int = 1, minibatch_size: int | None = None, seed: int = 0
    ) -> Mapping[str, float]:
        """``num_epochs`` passes over ``batch`` in minibatches of ``minibatch_size`` rows."""
        ...

    def get_weights(self) -> Any:
        """The weights the workers need."""
        ...


@runtime_checkable
class TargetLearner(Learner, Protocol):
    """A learner with a target network (DQN's, SAC's, TD3's), which ``update_target_network`` moves."""

    def update_target(self) -> None:
        """Move the target network toward the online one."""
        ...


def check_learner(learner: Any, what: str = "make_learner()") -> None:
    """ConfigError if ``learner`` lacks what the learner operators call."""
    missing = [m for m in ("learn_on_batch", "get_weights") if not callable(getattr(learner, m, None))]
    if missing:
        raise ConfigError(f"{what} returned a {type(learner).__name__} without {', '.join(missing)}; "
                          "a learner needs learn_on_batch(batch) and get_weights()")  # fmt: skip
