"""Algorithms: one module each, with its config, its loss and its plan."""

from ._base import Algorithm
from ._config import AlgorithmConfig
from .a2c import A2C, A2CConfig
from .a3c import A3C, A3CConfig
from .pg import PG, PGConfig
from .ppo import PPO, PPOConfig

ALGORITHMS: dict[str, type[Algorithm]] = {"pg": PG, "a2c": A2C, "a3c": A3C, "ppo": PPO}

__all__ = [
    "A2C",
    "A3C",
    "ALGORITHMS",
    "PG",
    "PPO",
    "A2CConfig",
    "A3CConfig",
    "Algorithm",
    "AlgorithmConfig",
    "PGConfig",
    "PPOConfig",
]
