"""RL building blocks, usable without any dataflow.

The names load on first use (PEP 562): a rollout worker imports
``asyncflow.rl.rollout_worker`` without torch, which only the modules that
hold a torch model import (``numpy_policy.py`` says why that matters).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .actor_critic import ActorCritic, ActorCriticPolicy, LossFn
    from .async_env import AsyncEnv, AsyncEnvAdapter, is_async_env
    from .async_worker import AsyncRolloutWorker
    from .continuous import DeterministicPolicy, SACLearner, SquashedGaussianPolicy, TD3Learner
    from .device import resolve_device
    from .env import EnvProbe, EnvSpec, make_async_env, make_env, probe_env, probe_spaces
    from .models import ActorCriticModel, ContinuousModel, ModelConfig, ModelSpec, QModel
    from .multi_agent import MultiAgentCartPole, MultiAgentEnv, PettingZooEnv, make_multi_agent_env
    from .multi_agent_worker import MultiAgentRolloutWorker, PolicySpec
    from .policy import FlatWeights, Learner, PolicyFactory, ReplayUpdate, TargetLearner, WorkerPolicy
    from .postprocessing import compute_gae, compute_nstep
    from .q_learning import DQNLearner, EpsilonGreedyPolicy
    from .random_policy import RandomPolicy
    from .replay_actor import ReplayActor
    from .replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
    from .rollout_worker import RolloutWorker
    from .sample_batch import MultiAgentBatch, SampleBatch, concat_samples
    from .trajectory import EpisodeBook, Postprocessing, Segment
    from .vtrace import vtrace
    from .worker_set import WorkerSet

_MODULES = {
    "ActorCritic": "actor_critic",
    "ActorCriticModel": "models",
    "ActorCriticPolicy": "actor_critic",
    "AsyncEnv": "async_env",
    "AsyncEnvAdapter": "async_env",
    "AsyncRolloutWorker": "async_worker",
    "ContinuousModel": "models",
    "DQNLearner": "q_learning",
    "DeterministicPolicy": "continuous",
    "EnvProbe": "env",
    "EnvSpec": "env",
    "EpisodeBook": "trajectory",
    "EpsilonGreedyPolicy": "q_learning",
    "FlatWeights": "policy",
    "Learner": "policy",
    "LossFn": "actor_critic",
    "ModelConfig": "models",
    "ModelSpec": "models",
    "MultiAgentBatch": "sample_batch",
    "MultiAgentCartPole": "multi_agent",
    "MultiAgentEnv": "multi_agent",
    "MultiAgentRolloutWorker": "multi_agent_worker",
    "PettingZooEnv": "multi_agent",
    "PolicyFactory": "policy",
    "PolicySpec": "multi_agent_worker",
    "Postprocessing": "trajectory",
    "PrioritizedReplayBuffer": "replay_buffer",
    "QModel": "models",
    "RandomPolicy": "random_policy",
    "ReplayActor": "replay_actor",
    "ReplayBuffer": "replay_buffer",
    "ReplayUpdate": "policy",
    "RolloutWorker": "rollout_worker",
    "SACLearner": "continuous",
    "SampleBatch": "sample_batch",
    "Segment": "trajectory",
    "SquashedGaussianPolicy": "continuous",
    "TD3Learner": "continuous",
    "TargetLearner": "policy",
    "WorkerPolicy": "policy",
    "compute_gae": "postprocessing",
    "compute_nstep": "postprocessing",
    "concat_samples": "sample_batch",
    "is_async_env": "async_env",
    "make_async_env": "env",
    "make_env": "env",
    "make_multi_agent_env": "multi_agent",
    "probe_env": "env",
    "probe_spaces": "env",
    "resolve_device": "device",
    "vtrace": "vtrace",
    "WorkerSet": "worker_set",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'asyncflow.rl' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ActorCritic",
    "ActorCriticModel",
    "ActorCriticPolicy",
    "AsyncEnv",
    "AsyncEnvAdapter",
    "AsyncRolloutWorker",
    "ContinuousModel",
    "DQNLearner",
    "DeterministicPolicy",
    "EnvProbe",
    "EnvSpec",
    "EpisodeBook",
    "EpsilonGreedyPolicy",
    "FlatWeights",
    "Learner",
    "LossFn",
    "ModelConfig",
    "ModelSpec",
    "MultiAgentBatch",
    "MultiAgentCartPole",
    "MultiAgentEnv",
    "MultiAgentRolloutWorker",
    "PettingZooEnv",
    "PolicyFactory",
    "PolicySpec",
    "Postprocessing",
    "PrioritizedReplayBuffer",
    "QModel",
    "RandomPolicy",
    "ReplayActor",
    "ReplayBuffer",
    "ReplayUpdate",
    "RolloutWorker",
    "SACLearner",
    "SampleBatch",
    "Segment",
    "SquashedGaussianPolicy",
    "TD3Learner",
    "TargetLearner",
    "WorkerPolicy",
    "WorkerSet",
    "compute_gae",
    "compute_nstep",
    "concat_samples",
    "is_async_env",
    "make_async_env",
    "make_env",
    "make_multi_agent_env",
    "probe_env",
    "probe_spaces",
    "resolve_device",
    "vtrace",
]
