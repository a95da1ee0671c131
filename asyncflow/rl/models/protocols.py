"""The model protocols: what each algorithm family asks of a torch module.

A model is built from ``(observation_space, action_space)``, by a module
class or by any factory with that signature, and receives observations as
torch tensors in their own dtype (``uint8`` frames stay ``uint8``; casting
and scaling are the model's job), nested as dicts and tuples for ``Dict``
and ``Tuple`` spaces, with the batch first. The built-in models
(``builtin.py``) honour the same protocols.

Each protocol is checked once in the driver, on a batch of two sampled
observations, before any process starts (``checks.py``): a missing method
or a wrong output shape is a ``ConfigError`` that names it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

__all__ = ["ActorCriticModel", "ContinuousModel", "QModel"]


@runtime_checkable
class ActorCriticModel(Protocol):
    """PG, A2C, A3C, PPO, IMPALA, APPO and the PPO side of two-trainer.

    ``forward(obs) -> (inputs, values)``: ``inputs`` of shape ``(B, k)``
    parameterize the action distribution (``k`` from the action space:
    ``n`` logits for ``Discrete(n)``, ``sum(nvec)`` for ``MultiDiscrete``,
    one logit per bit for ``MultiBinary``, and for a ``Box`` of ``d`` numbers
    ``d`` means followed by ``d`` log-stds); ``values`` of shape ``(B,)``.

    ::

        class MyNet(nn.Module):
            def __init__(self, observation_space, action_space):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(observation_space.shape[0], 64), nn.Tanh())
                self.logits = nn.Linear(64, action_space.n)
                self.value = nn.Linear(64, 1)

            def forward(self, obs):
                h = self.body(obs)
                return self.logits(h), self.value(h).squeeze(-1)

        PPOConfig(env="CartPole-v1", model=MyNet)

    Optional: ``training_layout(obs) -> obs``, the same values in the memory
    layout the model's training passes read fastest. The learner calls it
    once per batch, before drawing minibatches (the built-in CNN stores
    frames channels-last there).
    """

    def __call__(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]: ...


@runtime_checkable
class QModel(Protocol):
    """DQN, Ape-X and the DQN side of two-trainer (``Discrete`` actions).

    ``forward(obs) -> q_values`` of shape ``(B, n)``.

    ::

        def q_net(observation_space, action_space):
            return nn.Sequential(nn.Linear(observation_space.shape[0], 128), nn.ReLU(),
                                 nn.Linear(128, action_space.n))

        DQNConfig(env="CartPole-v1", model=q_net)
    """

    def __call__(self, obs: Any) -> torch.Tensor: ...


@runtime_checkable
class ContinuousModel(Protocol):
    """SAC, DDPG and TD3 (``Box`` actions): a module with two submodules.

    - ``actor(obs)``: ``(B, 2d)`` for SAC (means, then log-stds of a Gaussian
      that is squashed by tanh), ``(B, d)`` for DDPG and TD3 (an action
      before tanh);
    - ``critic(obs, actions) -> (B, q)``: one column per Q function, at least
      two for SAC and TD3, at least one for DDPG. ``actions`` are in the
      normalized ``[-1, 1]^d``, shaped ``(B, d)``.

    Only the actor's weights travel to the workers.

    ::

        class MySAC(nn.Module):
            def __init__(self, observation_space, action_space):
                super().__init__()
                o, d = observation_space.shape[0], action_space.shape[0]
                self.actor = nn.Sequential(nn.Linear(o, 256), nn.ReLU(), nn.Linear(256, 2 * d))
                self.critic = TwinCritic(o, d)  # forward(obs, actions) -> (B, 2)

        SACConfig(env="Pendulum-v1", model=MySAC)
    """

    actor: nn.Module
    critic: nn.Module
