"""Algorithms: one module each, with its config, its loss and its plan."""

from ._base import Algorithm
from ._config import AlgorithmConfig
from .a2c import A2C, A2CConfig
from .a3c import A3C, A3CConfig
from .apex import ApexDQN, ApexDQNConfig
from .appo import APPO, APPOConfig
from .dqn import DQN, DQNConfig
from .impala import IMPALA, IMPALAConfig
from .pg import PG, PGConfig
from .ppo import PPO, PPOConfig
from .sac import SAC, SACConfig
from .td3 import DDPG, TD3, DDPGConfig, TD3Config
from .two_trainer import TwoTrainer, TwoTrainerConfig

ALGORITHMS: dict[str, type[Algorithm]] = {
    "pg": PG,
    "a2c": A2C,
    "a3c": A3C,
    "ppo": PPO,
    "impala": IMPALA,
    "appo": APPO,
    "dqn": DQN,
    "apex": ApexDQN,
    "sac": SAC,
    "ddpg": DDPG,
    "td3": TD3,
    "two_trainer": TwoTrainer,
}

__all__ = [
    "A2C",
    "A3C",
    "ALGORITHMS",
    "APPO",
    "ApexDQN",
    "IMPALA",
    "DQN",
    "PG",
    "PPO",
    "SAC",
    "TD3",
    "DDPG",
    "A2CConfig",
    "A3CConfig",
    "Algorithm",
    "APPOConfig",
    "ApexDQNConfig",
    "AlgorithmConfig",
    "IMPALAConfig",
    "DQNConfig",
    "PGConfig",
    "PPOConfig",
    "SACConfig",
    "TD3Config",
    "TwoTrainer",
    "TwoTrainerConfig",
    "DDPGConfig",
]
