"""RL building blocks, usable without any dataflow."""

from .env import EnvSpec, make_env, probe_spaces
from .multi_agent import MultiAgentCartPole, MultiAgentEnv, PettingZooEnv, make_multi_agent_env
from .multi_agent_worker import MultiAgentRolloutWorker, PolicySpec
from .policy import ActorCritic, FlatWeights, TorchPolicy
from .postprocessing import compute_gae, compute_nstep, discount_cumsum
from .replay_actor import ReplayActor
from .replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
from .rollout_worker import PolicyConfig, RolloutWorker
from .sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from .vtrace import vtrace

__all__ = [
    "ActorCritic",
    "EnvSpec",
    "FlatWeights",
    "MultiAgentBatch",
    "MultiAgentCartPole",
    "MultiAgentEnv",
    "MultiAgentRolloutWorker",
    "PettingZooEnv",
    "PolicyConfig",
    "PolicySpec",
    "PrioritizedReplayBuffer",
    "ReplayActor",
    "ReplayBuffer",
    "RolloutWorker",
    "SampleBatch",
    "TorchPolicy",
    "compute_gae",
    "compute_nstep",
    "concat_samples",
    "discount_cumsum",
    "make_env",
    "make_multi_agent_env",
    "probe_spaces",
    "vtrace",
]
