"""What the learners of SAC and TD3 (and DDPG) share: the model on the learner's device, a
target critic, one optimizer each for the actor and the critics, and guarded steps that
clip gradients and skip non-finite updates (``UpdateGuard``).

The learners themselves, each with its loss, live with their algorithms
(``algorithms/sac.py``, ``algorithms/td3.py``)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ..data.replay_buffer import WEIGHTS
from ..data.sample_batch import ACTIONS, DISCOUNTS, NEXT_OBS, OBS, REWARDS, SampleBatch
from ..models import ModelSpec
from ..models.nets import seeded
from ..policies.continuous import box_space, build_continuous_model
from ..policy import FlatWeights, flat_weights
from .device import resolve_device, to_tensors
from .optim import Adam, FlatOptimizer, UpdateGuard

__all__ = ["ContinuousLearner", "batch_tensors", "guarded_step", "set_requires_grad"]


def batch_tensors(batch: SampleBatch, device: torch.device) -> tuple[Any, ...]:
    weights = batch[WEIGHTS] if WEIGHTS in batch else np.ones(len(batch), np.float32)
    actions = np.asarray(batch[ACTIONS], np.float32).reshape(len(batch), -1)
    return tuple(to_tensors((batch[OBS], actions, batch[REWARDS], batch[NEXT_OBS], batch[DISCOUNTS], weights), device))


def set_requires_grad(params: list[nn.Parameter], flag: bool) -> None:
    # A plain loop over a cached list: Module.requires_grad_ walks the module
    # tree each call, which showed up in the profile of a 4 ms learner step.
    for p in params:
        p.requires_grad_(flag)


def guarded_step(
    guard: UpdateGuard, optimizer: FlatOptimizer, loss: torch.Tensor, params: list[nn.Parameter], max_norm: float | None
) -> bool:
    """Backward, clip the gradients to ``max_norm`` (None: no clipping), then step unless the
    loss or gradient is not finite; whether it stepped."""
    optimizer.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]
    return guard.step(optimizer, loss, params, max_norm) is not None


class ContinuousLearner:
    """The parts SAC and TD3 share: the model on the learner's device, a target
    critic, one optimizer each for actor and critic."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        model: ModelSpec,
        hidden: Sequence[int],
        gaussian: bool,
        num_q: int,
        actor_lr: float,
        critic_lr: float,
        tau: float,
        seed: int,
        device: str | torch.device,
        max_nonfinite_updates: int,
        max_grad_norm: float | None,
        sde: bool = False,
        log_std_init: float = -3.0,
    ) -> None:
        box = box_space(action_space)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.act_dim = int(np.prod(box.shape))
        self.num_q = num_q
        with seeded(seed):
            self.model = build_continuous_model(
                model, observation_space, action_space, hidden, gaussian, num_q, sde=sde, log_std_init=log_std_init
            ).to(self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = Adam(self.actor.parameters(), lr=actor_lr)
        self.critic_opt = Adam(self.critic.parameters(), lr=critic_lr)
        self.tau = tau
        self.version = 0
        self._critic_params = list(self.critic.parameters())
        self._actor_params = list(self.actor.parameters())
        self.guard = UpdateGuard(max_nonfinite_updates, type(self).__name__)
        self.max_grad_norm = max_grad_norm
        """Each of the critic, actor and temperature steps clips its gradient norm to this (None: no clipping)."""

    def _critic_step(
        self,
        obs: Any,
        actions: torch.Tensor,
        targets: torch.Tensor,
        w: torch.Tensor,
        regularizer: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor | None:
        """One step of the ``num_q`` critics toward ``targets`` (plus ``regularizer(q)`` of
        their ``(B, num_q)`` values on the batch's actions): their first Q, or None if skipped."""
        q: torch.Tensor = self.critic(obs, actions)
        loss = sum((w * (q[:, i] - targets) ** 2).mean() for i in range(self.num_q))
        if regularizer is not None:
            loss = loss + regularizer(q)
        self._critic_loss = float(loss.detach())  # type: ignore[union-attr]
        if not guarded_step(self.guard, self.critic_opt, loss, self._critic_params, self.max_grad_norm):  # type: ignore[arg-type]
            return None
        return q[:, 0].detach()

    def _actor_step(self, actor_loss: Callable[[], torch.Tensor]) -> torch.Tensor | None:
        """One actor step on the loss ``actor_loss()`` builds with the critic frozen (so the
        actor's loss neither moves the critic nor spends a backward pass on it); the loss,
        or None if the step was skipped."""
        set_requires_grad(self._critic_params, False)
        try:
            loss = actor_loss()
            stepped = guarded_step(self.guard, self.actor_opt, loss, self._actor_params, self.max_grad_norm)
            return loss if stepped else None
        finally:
            set_requires_grad(self._critic_params, True)

    @property
    def actor(self) -> nn.Module:
        """The model's actor."""
        return cast(nn.Module, self.model.actor)

    @property
    def critic(self) -> nn.Module:
        """The model's critic (``num_q`` Q functions)."""
        return cast(nn.Module, self.model.critic)

    def get_weights(self) -> FlatWeights:
        """The actor's weights (all the workers need)."""
        return flat_weights(self.actor, self.version)
