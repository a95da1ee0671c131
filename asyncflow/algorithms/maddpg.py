"""MADDPG (Lowe et al. 2017): decentralized actors, centralized critics.

Each agent acts from its own observation only (its own actor); the critic that trains the
actors sees every agent's observation and action, so an agent's action is valued knowing what
the others did, where an independent learner's critic sees a world that moves on its own.
Each actor's step follows ``dQ(o_1..o_n, a_1..a_n)/da_i`` at ``a_i = mu_i(o_i)``, the other
agents' actions being their current actors' too (one step of every actor at once).

The env is a multi-agent env with ``Box`` actions; MADDPG plays it as one team
(``rl/envs/team.py``, ``BoxTeamEnv``: a ``Dict`` of the agents' observations, their actions
side by side). This is the cooperative setting of the paper (its cooperative communication and
navigation tasks): the team's reward (``team_reward``). There the paper's one critic per agent
would all learn the same function of the same reward, so one centralized critic stands for
them. Agents with rewards of their own (the paper's competitive tasks) are not built.

Everything else is DDPG's (``td3.py``): ``TD3Learner`` on the model below, the workers'
``DeterministicPolicy`` with Gaussian (or Ornstein-Uhlenbeck) noise, the replay plan of
``_off_policy.py``; TD3's three additions (``twin_q``, ``policy_delay``, ``target_noise``) are
off by default and may be switched on (MATD3).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from ..errors import ConfigError
from ..rl.data.replay_buffer import ReplayBuffer
from ..rl.envs.make import EnvSpec
from ..rl.envs.team import BoxTeamEnv, check_team, team_action_sizes
from ..rl.models import ModelConfig
from ..rl.models.builtin import MLPActor, MLPCritic
from ..rl.policies.continuous import DeterministicPolicy
from ..session import Algorithm
from ._config import algorithm_config
from ._off_policy import REPLAY_BUFFER, replay_plan
from ._recipe import Capabilities, PolicyModel, Recipe, Spaces, Workers
from .td3 import DDPGConfig, TD3Learner

__all__ = ["MADDPG", "DecentralizedActors", "MADDPGConfig", "MADDPGNet"]


class DecentralizedActors(nn.Module):
    """One actor per agent, each reading only its agent's entry of the team's ``Dict``
    observation; their (pre-tanh) actions side by side in the agents' order."""

    def __init__(self, observation_space: gym.spaces.Dict, action_sizes: Mapping[str, int], config: ModelConfig,
                 sizes: Sequence[int]) -> None:  # fmt: skip
        super().__init__()
        self.agents = list(action_sizes)
        self.actors = nn.ModuleList(MLPActor(observation_space[a], config, sizes, n) for a, n in action_sizes.items())

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([actor(obs[a]) for a, actor in zip(self.agents, self.actors, strict=True)], -1)


class MADDPGNet(nn.Module):
    """The continuous model's protocol (``actor``, ``critic``) for a team: decentralized actors
    and a critic of every agent's observation and action."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], *,
                 action_sizes: Mapping[str, int], config: ModelConfig | None = None, hidden: Sequence[int] = (64, 64),
                 num_q: int = 1) -> None:  # fmt: skip
        super().__init__()
        if not isinstance(observation_space, gym.spaces.Dict) or list(observation_space.spaces) != list(action_sizes):
            raise ConfigError(f"env: MADDPG's model takes a team's Dict of the agents' observations "
                              f"({list(action_sizes)}), not {observation_space}")  # fmt: skip
        config = config or ModelConfig()
        sizes = tuple(config.hidden or hidden)
        self.actor = DecentralizedActors(observation_space, action_sizes, config, sizes)
        self.critic = MLPCritic(observation_space, config, sizes, sum(action_sizes.values()), num_q)


@algorithm_config(defaults={"train_batch_size": 256, "buffer_size": 200_000, "learning_starts": 2_000,
                            "rollout_fragment_length": 25, "training_intensity": 64.0, "exploration_noise": 0.2,
                            "tau": 0.01})  # fmt: skip
class MADDPGConfig(DDPGConfig):
    """DDPG's fields (TD3's three additions off); the env is a multi-agent env whose agents
    act together with ``Box`` actions (``rl/envs/team.py``)."""

    vector_hidden = (64, 64)

    team_reward: str = "mean"
    """The team's reward: the ``"mean"`` of the agents' (each gets the team's) or their ``"sum"``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_team("MADDPG", self.env, self.team_reward)

    def worker_env(self, *, training: bool = True) -> EnvSpec:
        """The env's agents as one team of continuous actors."""
        return functools.partial(BoxTeamEnv, self.env, reward=self.team_reward)


def maddpg_model(config: MADDPGConfig) -> Any:
    """The model the workers and the learner build: the user's (``model.custom``), else
    ``MADDPGNet`` over the env's agents."""
    if config.model.custom is not None:
        return config.model
    return functools.partial(MADDPGNet, action_sizes=team_action_sizes(config.env), config=config.model,
                             hidden=type(config).vector_hidden, num_q=2 if config.twin_q else 1)  # fmt: skip


def maddpg_workers(config: MADDPGConfig, spaces: Spaces) -> Workers:
    """Each agent's actor with exploration noise (uniform random actions first)."""
    c = config
    policy = functools.partial(DeterministicPolicy, model=maddpg_model(c),
                               random_steps=c.learning_starts // max(c.rollouts.num_workers, 1),
                               exploration_noise=c.exploration_noise, noise_type=c.exploration_noise_type,
                               device=c.rollouts.device)  # fmt: skip
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


def maddpg_learner(config: MADDPGConfig, spaces: Spaces) -> TD3Learner:
    """DDPG's learner on the team's model: the actors' step goes through the centralized critic."""
    c, part = config, config.learner
    return TD3Learner(spaces.observation, spaces.action, model=maddpg_model(c), device=part.device,
                      max_nonfinite_updates=part.max_nonfinite_updates, actor_lr=part.lr, critic_lr=part.lr,
                      tau=c.tau, twin_q=c.twin_q, policy_delay=c.policy_delay, target_noise=c.target_noise,
                      target_noise_clip=c.target_noise_clip, seed=c.seed, max_grad_norm=part.max_grad_norm)  # fmt: skip


def maddpg_models(config: MADDPGConfig) -> dict[str, PolicyModel]:
    return {
        "default": PolicyModel(
            maddpg_model(config), "continuous", {"gaussian": False, "num_q": 2 if config.twin_q else 1}
        )
    }


RECIPE: Recipe[MADDPGConfig, TD3Learner, ReplayBuffer] = Recipe(
    name="maddpg", config=MADDPGConfig, family="continuous", plan=replay_plan, workers=maddpg_workers,
    learner=maddpg_learner, models=maddpg_models, resources=REPLAY_BUFFER,
    capabilities=Capabilities(team=True, policy_mapping=False, policy_mapping_reason="it learns one team: its env's "
                              "agents are the team (set env to the multi-agent env itself)", async_env=False),
)  # fmt: skip


class MADDPG(Algorithm):
    """MADDPG (the module docstring)."""

    recipe = RECIPE
