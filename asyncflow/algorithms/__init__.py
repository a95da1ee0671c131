"""Algorithms: one module each, with its config, its loss and its plan.

Importing this package first starts the fork server in the background (see
``asyncflow.actors.start_fork_server_early``): its imports of torch and
gymnasium then overlap with this process's own, below.
"""

from ..actors import start_fork_server_early

start_fork_server_early()

from ._base import Algorithm, ResumeWarning  # noqa: E402
from ._config import AlgorithmConfig  # noqa: E402
from .a2c import A2C, A2CConfig  # noqa: E402
from .a3c import A3C, A3CConfig  # noqa: E402
from .apex import ApexDQN, ApexDQNConfig  # noqa: E402
from .appo import APPO, APPOConfig  # noqa: E402
from .dqn import DQN, DQNConfig  # noqa: E402
from .impala import IMPALA, IMPALAConfig  # noqa: E402
from .pg import PG, PGConfig  # noqa: E402
from .ppo import PPO, PPOConfig  # noqa: E402
from .sac import SAC, SACConfig  # noqa: E402
from .td3 import DDPG, TD3, DDPGConfig, TD3Config  # noqa: E402
from .two_trainer import TwoTrainer, TwoTrainerConfig  # noqa: E402

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
    "ResumeWarning",
    "SACConfig",
    "TD3Config",
    "TwoTrainer",
    "TwoTrainerConfig",
    "DDPGConfig",
]
