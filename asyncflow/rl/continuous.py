"""Continuous control parts for SAC, DDPG and TD3 on ``Box`` actions.

Every network works in a normalized action space ``[-1, 1]^d`` (``d`` the
size of the flattened ``Box``); the workers' policies map actions to the
environment's bounds and shape in ``env_actions``, and the replay buffer
stores the normalized actions, so the critics never see the scale of a
particular environment.

The model is any module honouring ``ContinuousModel`` (the built-in
``ContinuousNet`` by default): an ``actor`` and a ``critic`` with one column
per Q function.

- ``squashed_gaussian``: a tanh-squashed Gaussian sample (SAC), with the
  change-of-variables correction in its log-probability.
- ``SquashedGaussianPolicy``, ``DeterministicPolicy``: what workers run
  (DDPG and TD3: ``tanh(actor(obs))`` plus Gaussian noise).
- ``SACLearner``: twin Q with target networks, automatic entropy tuning.
- ``TD3Learner``: twin Q, target policy smoothing and delayed actor updates;
  with ``twin_q=False, policy_delay=1, target_noise=0`` it is DDPG.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ..errors import ConfigError
from .device import resolve_device, to_numpy, to_tensors
from .models import ModelSpec, build_model
from .nets import polyak_update, seeded
from .optim import Adam, UpdateGuard
from .policy import FlatWeights, ReplayUpdate, flat_weights, load_flat_weights
from .replay_buffer import WEIGHTS
from .sample_batch import ACTIONS, DISCOUNTS, NEXT_OBS, OBS, REWARDS, SampleBatch
from .tree import Tree, tree_len

__all__ = [
    "DeterministicPolicy",
    "SACLearner",
    "SquashedGaussianPolicy",
    "TD3Learner",
    "squashed_gaussian",
]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def _box(action_space: gym.Space[Any]) -> gym.spaces.Box:
    if not isinstance(action_space, gym.spaces.Box):
        raise ConfigError(f"continuous control needs a Box action space, not {action_space}")
    if not np.all(np.isfinite(action_space.low)) or not np.all(np.isfinite(action_space.high)):
        raise ConfigError(f"continuous control needs finite action bounds, not {action_space}")
    return action_space


def squashed_gaussian(
    params: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Actions in [-1, 1] from ``(B, 2d)`` means and log-stds (reparameterized, so gradients
    flow) and their log-probabilities; the noise is drawn from ``generator``."""
    mean, log_std = params.chunk(2, dim=-1)
    log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
    std = log_std.exp()
    u = mean if deterministic else mean + std * torch.randn(mean.shape, generator=generator, device=mean.device)
    gaussian_logp = (-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    # log |d tanh(u)/du| = log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|.
    correction = (2 * (math.log(2) - u - nn.functional.softplus(-2 * u))).sum(-1)
    return torch.tanh(u), gaussian_logp - correction


def _build(
    spec: ModelSpec,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    hidden: Sequence[int],
    gaussian: bool,
    num_q: int,
) -> nn.Module:
    return build_model(spec, observation_space, action_space, "continuous", hidden=hidden, gaussian=gaussian,
                       num_q=num_q)  # fmt: skip


class _BoxPolicy:
    """Worker side: the model's actor, uniform random actions for the first
    ``random_steps`` steps of this worker, and scaling to the env's bounds."""

    gaussian: bool

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        seed: int = 0,
        worker_index: int = 0,
        model: ModelSpec = None,
        hidden: Sequence[int] = (256, 256),
        random_steps: int = 0,
        num_q: int = 2,
        device: str | torch.device = "cpu",
    ) -> None:
        box = _box(action_space)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.shape = tuple(box.shape)
        self.low = np.asarray(box.low, np.float32).reshape(-1)
        self.high = np.asarray(box.high, np.float32).reshape(-1)
        self.dtype = box.dtype
        self.random_steps = random_steps
        self.steps = 0
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.version = 0
        with seeded(seed):
            self.model = _build(model, observation_space, action_space, hidden, self.gaussian, num_q).to(self.device)

    @property
    def actor(self) -> nn.Module:
        """The model's actor (its weights are the ones that travel)."""
        return cast(nn.Module, self.model.actor)

    def _act(self, obs: Tree) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover

    @torch.no_grad()
    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exploring actions in [-1, 1] (log-probs and values are zeros)."""
        n = tree_len(obs)
        if self.steps < self.random_steps:
            actions = self.rng.uniform(-1, 1, (n, len(self.low))).astype(np.float32)
        else:
            actions = self._act(to_tensors(obs, self.device)).cpu().numpy()
        self.steps += n
        zeros = np.zeros(n, np.float32)
        return actions, zeros, zeros

    def values(self, obs: Tree) -> np.ndarray:
        """Zeros: these workers need no state values."""
        return np.zeros(tree_len(obs), np.float32)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Normalized actions scaled to the env's bounds and shaped like its space."""
        scaled = self.low + (np.clip(actions, -1, 1) + 1) * 0.5 * (self.high - self.low)
        return scaled.reshape(-1, *self.shape).astype(self.dtype, copy=False)  # type: ignore[no-any-return]

    def get_weights(self) -> FlatWeights:
        """The actor's weights."""
        return flat_weights(self.actor, self.version)

    def set_weights(self, weights: FlatWeights) -> None:
        """Load the learner's actor weights."""
        load_flat_weights(self.actor, weights.vector)
        self.version = weights.version


class SquashedGaussianPolicy(_BoxPolicy):
    """SAC's worker policy: samples from the squashed Gaussian."""

    gaussian = True

    def _act(self, obs: Tree) -> torch.Tensor:
        return squashed_gaussian(self.actor(obs), generator=self.generator)[0]

    @torch.no_grad()
    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """tanh of the Gaussian's mean."""
        return squashed_gaussian(self.actor(to_tensors(obs, self.device)), True)[0].cpu().numpy()  # type: ignore[no-any-return]


class DeterministicPolicy(_BoxPolicy):
    """DDPG's and TD3's worker policy: the actor's action plus Gaussian noise."""

    gaussian = False

    def __init__(self, *args: Any, exploration_noise: float = 0.1, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.noise = exploration_noise

    def _act(self, obs: Tree) -> torch.Tensor:
        a = torch.tanh(self.actor(obs))
        noise = torch.randn(a.shape, generator=self.generator, device=self.device)
        return (a + self.noise * noise).clamp(-1, 1)

    @torch.no_grad()
    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """The actor's action, without noise."""
        return torch.tanh(self.actor(to_tensors(obs, self.device))).cpu().numpy()  # type: ignore[no-any-return]


def _tensors(batch: SampleBatch, device: torch.device) -> tuple[Any, ...]:
    weights = batch[WEIGHTS] if WEIGHTS in batch else np.ones(len(batch), np.float32)
    actions = np.asarray(batch[ACTIONS], np.float32).reshape(len(batch), -1)
    return tuple(to_tensors((batch[OBS], actions, batch[REWARDS], batch[NEXT_OBS], batch[DISCOUNTS], weights), device))


def _set_requires_grad(params: list[nn.Parameter], flag: bool) -> None:
    # A plain loop over a cached list: Module.requires_grad_ walks the module
    # tree each call, which showed up in the profile of a 4 ms learner step.
    for p in params:
        p.requires_grad_(flag)


def _guarded_step(
    guard: UpdateGuard, optimizer: Adam, loss: torch.Tensor, params: list[nn.Parameter], max_norm: float | None
) -> bool:
    """Backward, clip the gradients to ``max_norm`` (None: no clipping), then step unless the
    loss or gradient is not finite; whether it stepped."""
    optimizer.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]
    return guard.step(optimizer, loss, params, max_norm) is not None


class _ContinuousLearner:
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
    ) -> None:
        box = _box(action_space)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.act_dim = int(np.prod(box.shape))
        self.num_q = num_q
        with seeded(seed):
            self.model = _build(model, observation_space, action_space, hidden, gaussian, num_q).to(self.device)
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
        self, obs: Any, actions: torch.Tensor, targets: torch.Tensor, w: torch.Tensor
    ) -> torch.Tensor | None:
        """One step of the ``num_q`` critics toward ``targets``: their first Q, or None if skipped."""
        q: torch.Tensor = self.critic(obs, actions)
        loss = sum((w * (q[:, i] - targets) ** 2).mean() for i in range(self.num_q))
        self._critic_loss = float(loss.detach())  # type: ignore[union-attr]
        if not _guarded_step(self.guard, self.critic_opt, loss, self._critic_params, self.max_grad_norm):  # type: ignore[arg-type]
            return None
        return q[:, 0].detach()

    def _actor_step(self, actor_loss: Callable[[], torch.Tensor]) -> torch.Tensor | None:
        """One actor step on the loss ``actor_loss()`` builds with the critic frozen (so the
        actor's loss neither moves the critic nor spends a backward pass on it); the loss,
        or None if the step was skipped."""
        _set_requires_grad(self._critic_params, False)
        try:
            loss = actor_loss()
            stepped = _guarded_step(self.guard, self.actor_opt, loss, self._actor_params, self.max_grad_norm)
            return loss if stepped else None
        finally:
            _set_requires_grad(self._critic_params, True)

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


class SACLearner(_ContinuousLearner):
    """Soft actor-critic (Haarnoja et al. 2018, with automatic temperature)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        model: ModelSpec = None,
        hidden: Sequence[int] = (256, 256),
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 3e-4,
        initial_alpha: float = 1.0,
        target_entropy: float | None = None,
        tau: float = 0.005,
        seed: int = 0,
        device: str | torch.device = "cpu",
        max_nonfinite_updates: int = 10,
        max_grad_norm: float | None = None,
    ) -> None:
        super().__init__(observation_space, action_space, model=model, hidden=hidden, gaussian=True, num_q=2,
                         actor_lr=actor_lr, critic_lr=critic_lr, tau=tau, seed=seed, device=device,
                         max_nonfinite_updates=max_nonfinite_updates, max_grad_norm=max_grad_norm)  # fmt: skip
        self.log_alpha = torch.tensor(math.log(initial_alpha), device=self.device, requires_grad=True)
        self._actor_loss = self._entropy = 0.0
        self.target_entropy = -float(self.act_dim) if target_entropy is None else target_entropy
        self.alpha_opt = Adam([self.log_alpha], lr=alpha_lr)  # type: ignore[list-item]

    def learn_on_batch(self, batch: SampleBatch) -> ReplayUpdate | dict[str, float]:
        """One critic, actor and temperature step: its stats and TD errors (only the stats when skipped)."""
        obs, actions, rewards, next_obs, discounts, w = _tensors(batch, self.device)
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_actions, next_logp = squashed_gaussian(self.actor(next_obs), generator=self.generator)
            t = self.target(next_obs, next_actions)
            targets = rewards + discounts * (torch.min(t[:, 0], t[:, 1]) - alpha * next_logp)
        q1 = self._critic_step(obs, actions, targets, w)
        if q1 is None:  # skipped: nothing moves, no priorities from NaN
            return {"skipped_updates": float(self.guard.skipped)}
        logp = torch.zeros(())

        def actor_loss() -> torch.Tensor:
            nonlocal logp
            new_actions, logp = squashed_gaussian(self.actor(obs), generator=self.generator)
            q_pi: torch.Tensor = self.critic(obs, new_actions)
            return (alpha * logp - torch.min(q_pi[:, 0], q_pi[:, 1])).mean()

        loss = self._actor_step(actor_loss)
        if loss is not None:
            self._actor_loss, self._entropy = float(loss.detach()), float(-logp.detach().mean())
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            _guarded_step(self.guard, self.alpha_opt, alpha_loss, [self.log_alpha], self.max_grad_norm)  # type: ignore[list-item]
        polyak_update(self.target, self.critic, self.tau)
        self.version += 1
        stats = {
            "critic_loss": self._critic_loss,
            "actor_loss": self._actor_loss,
            "alpha": float(alpha),
            "entropy": self._entropy,
            "mean_q": float(q1.mean()),
            "skipped_updates": float(self.guard.skipped),
        }
        return ReplayUpdate(stats, to_numpy((q1 - targets).abs()))


class TD3Learner(_ContinuousLearner):
    """TD3 (Fujimoto et al. 2018): clipped double Q, target policy smoothing,
    delayed actor and target updates. DDPG (Lillicrap et al. 2016) is the
    special case ``twin_q=False, policy_delay=1, target_noise=0``."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        model: ModelSpec = None,
        hidden: Sequence[int] = (256, 256),
        actor_lr: float = 1e-3,
        critic_lr: float = 1e-3,
        tau: float = 0.005,
        twin_q: bool = True,
        policy_delay: int = 2,
        target_noise: float = 0.2,
        target_noise_clip: float = 0.5,
        seed: int = 0,
        device: str | torch.device = "cpu",
        max_nonfinite_updates: int = 10,
        max_grad_norm: float | None = None,
    ) -> None:
        super().__init__(observation_space, action_space, model=model, hidden=hidden, gaussian=False,
                         num_q=2 if twin_q else 1, actor_lr=actor_lr, critic_lr=critic_lr, tau=tau, seed=seed,
                         device=device, max_nonfinite_updates=max_nonfinite_updates,
                         max_grad_norm=max_grad_norm)  # fmt: skip
        self.target_actor = copy.deepcopy(self.actor).requires_grad_(False)
        self.policy_delay = policy_delay
        self.target_noise, self.target_noise_clip = target_noise, target_noise_clip
        self.steps = 0
        self._actor_loss = 0.0

    def learn_on_batch(self, batch: SampleBatch) -> ReplayUpdate | dict[str, float]:
        """One critic step, and every ``policy_delay`` steps an actor and target step."""
        obs, actions, rewards, next_obs, discounts, w = _tensors(batch, self.device)
        with torch.no_grad():
            next_actions = torch.tanh(self.target_actor(next_obs))
            if self.target_noise > 0:
                noise = torch.randn(next_actions.shape, generator=self.generator, device=self.device)
                noise = (noise * self.target_noise).clamp(-self.target_noise_clip, self.target_noise_clip)
                next_actions = (next_actions + noise).clamp(-1, 1)
            t = self.target(next_obs, next_actions)
            next_q = torch.min(t[:, 0], t[:, 1]) if self.num_q == 2 else t[:, 0]
            targets = rewards + discounts * next_q
        q1 = self._critic_step(obs, actions, targets, w)
        if q1 is None:  # skipped: nothing moves, no priorities from NaN
            return {"skipped_updates": float(self.guard.skipped)}
        self.steps += 1
        if self.steps % self.policy_delay == 0:
            loss = self._actor_step(lambda: -self.critic(obs, torch.tanh(self.actor(obs)))[:, 0].mean())
            if loss is not None:
                self._actor_loss = float(loss.detach())
                polyak_update(self.target_actor, self.actor, self.tau)
                polyak_update(self.target, self.critic, self.tau)
                self.version += 1
        stats = {"critic_loss": self._critic_loss, "actor_loss": self._actor_loss, "mean_q": float(q1.mean()),
                 "skipped_updates": float(self.guard.skipped)}  # fmt: skip
        return ReplayUpdate(stats, to_numpy((q1 - targets).abs()))
