"""RL building blocks, usable without any dataflow."""

from .actor_critic import ActorCritic, ActorCriticPolicy, LossFn
from .async_env import AsyncEnv, AsyncEnvAdapter, is_async_env
from .async_worker import AsyncRolloutWorker
from .continuous import DeterministicPolicy, SACLearner, SquashedGaussianPolicy, TD3Learner
from .device import resolve_device
from .env import EnvProbe, EnvSpec, make_async_env, make_env, probe_env, probe_spaces
from .models import ActorCriticModel, ContinuousModel, ModelConfig, ModelSpec, QModel
from .multi_agent import MultiAgentCartPole, MultiAgentEnv, PettingZooEnv, make_multi_agent_env
from .multi_agent_worker import MultiAgentRolloutWorker, PolicySpec
from .policy import FlatWeights, Learner, PolicyFactory, WorkerPolicy
from .postprocessing import compute_gae, compute_nstep, discount_cumsum
from .q_learning import DQNLearner, EpsilonGreedyPolicy
from .random_policy import RandomPolicy
from .replay_actor import ReplayActor
from .replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
from .rollout_worker import RolloutWorker
from .sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from .trajectory import EpisodeBook, Postprocessing, Segment
from .vtrace import vtrace

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
    "RolloutWorker",
    "SACLearner",
    "SampleBatch",
    "Segment",
    "SquashedGaussianPolicy",
    "TD3Learner",
    "WorkerPolicy",
    "compute_gae",
    "compute_nstep",
    "concat_samples",
    "discount_cumsum",
    "is_async_env",
    "make_async_env",
    "make_env",
    "make_multi_agent_env",
    "probe_env",
    "probe_spaces",
    "resolve_device",
    "vtrace",
]
