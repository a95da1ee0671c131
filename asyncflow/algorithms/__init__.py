"""Algorithms: one module each, with its config, its loss, its plan and its recipe (what the
session, ``asyncflow/session.py``, needs to run it: ``_recipe.py``).

Importing this package first starts the fork server in the background (see
``asyncflow.actors.start_fork_server_early``): its imports of torch and
gymnasium then overlap with this process's own, below. Each algorithm's
module loads when its name is first used (``__getattr__`` below).
"""

import importlib
from typing import TYPE_CHECKING, Any

from .. import _preload
from ..actors import start_fork_server_early

_preload.register()  # what the fork server should import (the actor layer names no module itself)
start_fork_server_early()

from ..session import Algorithm, ResumeWarning  # noqa: E402
from ._config import AlgorithmConfig  # noqa: E402
from ._recipe import Recipe  # noqa: E402

if TYPE_CHECKING:
    from .a2c import A2C, A2CConfig
    from .a3c import A3C, A3CConfig
    from .apex import ApexDQN, ApexDQNConfig
    from .appo import APPO, APPOConfig
    from .cql import CQL, CQLConfig
    from .dqn import DQN, DQNConfig
    from .impala import IMPALA, IMPALAConfig
    from .maddpg import MADDPG, MADDPGConfig
    from .marwil import BC, MARWIL, BCConfig, MARWILConfig
    from .pg import PG, PGConfig
    from .ppo import PPO, PPOConfig
    from .qmix import QMIX, QMIXConfig
    from .sac import SAC, SACConfig
    from .td3 import DDPG, TD3, DDPGConfig, TD3Config
    from .two_trainer import TwoTrainer, TwoTrainerConfig

    ALGORITHMS: dict[str, type[Algorithm]]
    """Every algorithm by its name on the command line (``"ppo"``: ``PPO``); loads every module."""

_NAMES = {  # the name on the command line: (module, algorithm class)
    "pg": ("pg", "PG"),
    "a2c": ("a2c", "A2C"),
    "a3c": ("a3c", "A3C"),
    "ppo": ("ppo", "PPO"),
    "impala": ("impala", "IMPALA"),
    "appo": ("appo", "APPO"),
    "dqn": ("dqn", "DQN"),
    "apex": ("apex", "ApexDQN"),
    "sac": ("sac", "SAC"),
    "ddpg": ("td3", "DDPG"),
    "td3": ("td3", "TD3"),
    "two_trainer": ("two_trainer", "TwoTrainer"),
    "qmix": ("qmix", "QMIX"),
    "maddpg": ("maddpg", "MADDPG"),
    "bc": ("marwil", "BC"),
    "marwil": ("marwil", "MARWIL"),
    "cql": ("cql", "CQL"),
}
_MODULES = {name: module for module, cls in _NAMES.values() for name in (cls, cls + "Config")}


def recipes() -> list[Recipe[Any, Any, Any]]:
    """Every algorithm's recipe, in the order of the command line's list."""
    return [getattr(importlib.import_module(f".{module}", __name__), cls).recipe for module, cls in _NAMES.values()]


def __getattr__(name: str) -> Any:
    """Each algorithm's module loads on first use (PEP 562): a script that runs PPO
    does not import the other eleven. ``ALGORITHMS`` (name -> class) loads them all."""
    if name == "ALGORITHMS":
        value: Any = {key: getattr(importlib.import_module(f".{module}", __name__), cls)
                      for key, (module, cls) in _NAMES.items()}  # fmt: skip
    elif name in _MODULES:
        value = getattr(importlib.import_module(f".{_MODULES[name]}", __name__), name)
    else:
        raise AttributeError(f"module 'asyncflow.algorithms' has no attribute {name!r}")
    globals()[name] = value
    return value


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
    "Recipe",
    "ResumeWarning",
    "SACConfig",
    "TD3Config",
    "TwoTrainer",
    "TwoTrainerConfig",
    "DDPGConfig",
    "BC",
    "BCConfig",
    "MARWIL",
    "MARWILConfig",
    "CQL",
    "CQLConfig",
    "QMIX",
    "QMIXConfig",
    "MADDPG",
    "MADDPGConfig",
    "recipes",
]
