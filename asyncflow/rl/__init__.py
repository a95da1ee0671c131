"""RL building blocks, usable without any dataflow."""

from .env import EnvSpec, make_env, probe_spaces
from .policy import ActorCritic, FlatWeights, TorchPolicy
from .postprocessing import compute_gae, discount_cumsum
from .rollout_worker import PolicyConfig, RolloutWorker
from .sample_batch import MultiAgentBatch, SampleBatch, concat_samples

__all__ = [
    "ActorCritic",
    "EnvSpec",
    "FlatWeights",
    "MultiAgentBatch",
    "PolicyConfig",
    "RolloutWorker",
    "SampleBatch",
    "TorchPolicy",
    "compute_gae",
    "concat_samples",
    "discount_cumsum",
    "make_env",
    "probe_spaces",
]
