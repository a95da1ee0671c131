"""The model seam: one typed protocol per algorithm family, the built-in
models that honour them, and the encoders picked from the observation space.

``config.model`` takes a ``ModelConfig`` (the built-in model's knobs), a
torch module class, or a factory ``(observation_space, action_space) ->
nn.Module``. Policies and learners reach their networks only through the
protocols in ``protocols.py``; nothing above this package knows the shape of
an observation.
"""

from .builtin import ActorCriticNet, ContinuousNet, QNet
from .config import ModelConfig, ModelFactory, ModelSpec, custom_model, model_spec
from .distributions import ActionDistribution, ActionHead
from .encoders import CNNEncoder, Encoder, build_encoder
from .factory import build_model, check_model, model_name, sample_observations
from .mirror import MirrorNet
from .protocols import ActorCriticModel, ContinuousModel, QModel

__all__ = [
    "ActionDistribution",
    "ActionHead",
    "ActorCriticModel",
    "ActorCriticNet",
    "CNNEncoder",
    "ContinuousModel",
    "ContinuousNet",
    "Encoder",
    "MirrorNet",
    "ModelConfig",
    "ModelFactory",
    "ModelSpec",
    "QModel",
    "QNet",
    "build_encoder",
    "build_model",
    "check_model",
    "model_name",
    "custom_model",
    "model_spec",
    "sample_observations",
]
