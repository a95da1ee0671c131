"""RL building blocks, usable without any dataflow, one subpackage per idea:

- ``envs``: building and checking environments (gymnasium, async, Atari, multi-agent);
- ``sampling``: rollout workers and the trajectory pipeline they share;
- ``data``: sample batches, replay buffers, state for checkpoints;
- ``policies`` and ``models``: what workers act with, and the torch models behind them;
- ``learners``: the optimizer, devices, precision, V-trace, the continuous learners' base;
- ``policy.py``: the contracts between workers, learners and plans.

The names below load on first use (PEP 562): a rollout worker imports
``asyncflow.rl.sampling.rollout_worker`` without torch, which only the modules that
hold a torch model import (``policies/numpy_policy.py`` says why that matters).
``DQNLearner``, ``SACLearner`` and ``TD3Learner`` live with their algorithms
(``asyncflow.algorithms``) and are named here too.
"""

from typing import TYPE_CHECKING, Any

from .. import _preload
from .._lazy import lazy_loader

_preload.register()  # the fork server preloads what RL actors import, for runtimes opened by hand too

if TYPE_CHECKING:
    from ..algorithms.dqn import DQNLearner
    from ..algorithms.sac import SACLearner
    from ..algorithms.td3 import TD3Learner
    from .data.replay_actor import ReplayActor
    from .data.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
    from .data.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
    from .envs.async_env import AsyncEnv, AsyncEnvAdapter, is_async_env
    from .envs.make import EnvProbe, EnvSpec, make_async_env, make_env, probe_env, probe_spaces
    from .envs.multi_agent import (
        MultiAgentCartPole,
        MultiAgentEnv,
        PettingZooAECEnv,
        PettingZooEnv,
        make_multi_agent_env,
    )
    from .learners.device import resolve_device
    from .learners.vtrace import vtrace
    from .models import ActorCriticModel, ContinuousModel, ModelConfig, ModelSpec, QModel
    from .multi_agent import League, MultiAgent, PolicySpec
    from .policies.actor_critic import ActorCritic, ActorCriticPolicy, LossFn
    from .policies.continuous import DeterministicPolicy, SquashedGaussianPolicy
    from .policies.epsilon_greedy import EpsilonGreedyPolicy
    from .policies.random_policy import RandomPolicy
    from .policy import FlatWeights, Learner, PolicyFactory, ReplayUpdate, TargetLearner, WorkerPolicy
    from .sampling.async_worker import AsyncRolloutWorker
    from .sampling.multi_agent_worker import MappedPolicy, MultiAgentRolloutWorker
    from .sampling.postprocessing import compute_gae, compute_nstep
    from .sampling.rollout_worker import RolloutWorker
    from .sampling.trajectory import EpisodeBook, Postprocessing, Segment
    from .sampling.worker_set import WorkerSet

_MODULES = {
    "ActorCritic": "policies.actor_critic",
    "ActorCriticModel": "models",
    "ActorCriticPolicy": "policies.actor_critic",
    "AsyncEnv": "envs.async_env",
    "AsyncEnvAdapter": "envs.async_env",
    "AsyncRolloutWorker": "sampling.async_worker",
    "ContinuousModel": "models",
    "DQNLearner": "asyncflow.algorithms.dqn",
    "DeterministicPolicy": "policies.continuous",
    "EnvProbe": "envs.make",
    "EnvSpec": "envs.make",
    "EpisodeBook": "sampling.trajectory",
    "EpsilonGreedyPolicy": "policies.epsilon_greedy",
    "FlatWeights": "policy",
    "League": "multi_agent",
    "Learner": "policy",
    "LossFn": "policies.actor_critic",
    "MappedPolicy": "sampling.multi_agent_worker",
    "ModelConfig": "models",
    "ModelSpec": "models",
    "MultiAgent": "multi_agent",
    "MultiAgentBatch": "data.sample_batch",
    "MultiAgentCartPole": "envs.multi_agent",
    "MultiAgentEnv": "envs.multi_agent",
    "MultiAgentRolloutWorker": "sampling.multi_agent_worker",
    "PettingZooAECEnv": "envs.multi_agent",
    "PettingZooEnv": "envs.multi_agent",
    "PolicyFactory": "policy",
    "PolicySpec": "multi_agent",
    "Postprocessing": "sampling.trajectory",
    "PrioritizedReplayBuffer": "data.replay_buffer",
    "QModel": "models",
    "RandomPolicy": "policies.random_policy",
    "ReplayActor": "data.replay_actor",
    "ReplayBuffer": "data.replay_buffer",
    "ReplayUpdate": "policy",
    "RolloutWorker": "sampling.rollout_worker",
    "SACLearner": "asyncflow.algorithms.sac",
    "SampleBatch": "data.sample_batch",
    "Segment": "sampling.trajectory",
    "SquashedGaussianPolicy": "policies.continuous",
    "TD3Learner": "asyncflow.algorithms.td3",
    "TargetLearner": "policy",
    "WorkerPolicy": "policy",
    "compute_gae": "sampling.postprocessing",
    "compute_nstep": "sampling.postprocessing",
    "concat_samples": "data.sample_batch",
    "is_async_env": "envs.async_env",
    "make_async_env": "envs.make",
    "make_env": "envs.make",
    "make_multi_agent_env": "envs.multi_agent",
    "probe_env": "envs.make",
    "probe_spaces": "envs.make",
    "resolve_device": "learners.device",
    "vtrace": "learners.vtrace",
    "WorkerSet": "sampling.worker_set",
}


_load = lazy_loader(__name__, _MODULES, globals())  # the learners: absolute paths, with their algorithms


def __getattr__(name: str) -> Any:
    return _load(name)


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
    "League",
    "Learner",
    "LossFn",
    "MappedPolicy",
    "ModelConfig",
    "ModelSpec",
    "MultiAgent",
    "MultiAgentBatch",
    "MultiAgentCartPole",
    "MultiAgentEnv",
    "MultiAgentRolloutWorker",
    "PettingZooAECEnv",
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
