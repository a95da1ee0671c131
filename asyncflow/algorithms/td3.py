"""TD3 (Fujimoto et al. 2018) and DDPG (Lillicrap et al. 2016) on ``Box`` actions.

TD3 adds three things to DDPG: twin critics (the smaller target wins),
smoothing noise on the target action, and actor updates only every
``policy_delay`` critic updates. ``DDPGConfig`` is ``TD3Config`` with the
three switched off. Plan: the replay plan of ``_off_policy.py``; targets are
updated softly inside the learner.

Where each part lives: acting with Gaussian exploration noise (``DeterministicPolicy``,
``rl/policies/continuous.py``); the clipped double-Q critic step, the delayed actor step, target
smoothing and the soft target updates (``TD3Learner.learn_on_batch`` below, on ``rl/learners/continuous.py``);
replay and the plan (``_off_policy.py``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch

from ..errors import ConfigError
from ..rl.data.replay_buffer import ReplayBuffer
from ..rl.data.sample_batch import SampleBatch
from ..rl.learners.continuous import ContinuousLearner, batch_tensors
from ..rl.learners.device import to_numpy
from ..rl.models import ModelSpec
from ..rl.models.nets import polyak_update
from ..rl.policies.continuous import DeterministicPolicy
from ..rl.policy import ReplayUpdate
from ..session import Algorithm
from ._config import algorithm_config, field
from ._off_policy import REPLAY_BUFFER, ReplayConfig, replay_plan
from ._recipe import Recipe, Spaces, Workers, single_model

__all__ = ["DDPG", "TD3", "DDPGConfig", "TD3Config", "TD3Learner"]


class TD3Learner(ContinuousLearner):
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
        obs, actions, rewards, next_obs, discounts, w = batch_tensors(batch, self.device)
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


@algorithm_config(defaults={"env": "Pendulum-v1", "num_envs_per_worker": 1, "rollout_fragment_length": 8, "lr": 1e-3,
                            "max_grad_norm": None, "train_batch_size": 128, "training_intensity": 128.0})  # fmt: skip
class TD3Config(ReplayConfig):
    """``lr`` is the rate of the actor and the critics; ``max_grad_norm`` (None: no clipping)
    clips each of their steps; ``training_intensity`` 128: one learner step per env step; the
    first ``learning_starts`` transitions come from uniform random actions."""

    vector_hidden = (128, 128)

    tau: float = field(default=0.005, min=0, max=1)
    """Soft target update rate."""
    twin_q: bool = True
    """Two critics; targets use the smaller."""
    policy_delay: int = field(default=2, min=1)
    """Critic updates per actor (and target) update."""
    target_noise: float = field(default=0.2, min=0)
    """Std of the smoothing noise on target actions (normalized units)."""
    target_noise_clip: float = field(default=0.5, min=0)
    """Bound of that noise."""
    exploration_noise: float = field(default=0.1, min=0)
    """Std of the noise the workers add (normalized units): the Gaussian's, or the
    Ornstein-Uhlenbeck process's sigma."""
    exploration_noise_type: str = "gaussian"
    """``"gaussian"`` (independent at each step) or ``"ou"`` (Ornstein-Uhlenbeck: correlated in
    time, theta 0.15, dt 0.01, from 0 at each episode; ``DeterministicPolicy``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.exploration_noise_type not in ("gaussian", "ou"):
            raise ConfigError(
                f"exploration_noise_type: expected 'gaussian' or 'ou', got {self.exploration_noise_type!r}"
            )


@algorithm_config(defaults={"twin_q": False, "policy_delay": 1, "target_noise": 0.0})
class DDPGConfig(TD3Config):
    """TD3's fields with its three additions switched off (one critic, no delay, no smoothing)."""


def td3_workers(config: TD3Config, spaces: Spaces) -> Workers:
    """Deterministic workers with Gaussian exploration noise (uniform random actions first)."""
    c = config
    policy = functools.partial(DeterministicPolicy, model=c.model, hidden=c.vector_hidden,
                               random_steps=c.learning_starts // max(c.rollouts.num_workers, 1),
                               exploration_noise=c.exploration_noise, noise_type=c.exploration_noise_type,
                               num_q=2 if c.twin_q else 1,
                               device=c.rollouts.device)  # fmt: skip
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


def td3_learner(config: TD3Config, spaces: Spaces) -> TD3Learner:
    """The (twin) critics, the delayed actor, target smoothing, soft target updates."""
    c, part = config, config.learner
    return TD3Learner(spaces.observation, spaces.action, model=c.model, device=part.device,
                      max_nonfinite_updates=part.max_nonfinite_updates, hidden=c.vector_hidden, actor_lr=part.lr,
                      critic_lr=part.lr, tau=c.tau, twin_q=c.twin_q, policy_delay=c.policy_delay,
                      target_noise=c.target_noise, target_noise_clip=c.target_noise_clip, seed=c.seed,
                      max_grad_norm=part.max_grad_norm)  # fmt: skip


TD3_MODELS = single_model("continuous", gaussian=False, num_q=lambda c: 2 if c.twin_q else 1)

RECIPE: Recipe[TD3Config, TD3Learner, ReplayBuffer] = Recipe(
    name="td3", config=TD3Config, family="continuous", plan=replay_plan, workers=td3_workers, learner=td3_learner,
    models=TD3_MODELS, resources=REPLAY_BUFFER,
)  # fmt: skip

DDPG_RECIPE: Recipe[DDPGConfig, TD3Learner, ReplayBuffer] = Recipe(
    name="ddpg", config=DDPGConfig, family="continuous", plan=replay_plan, workers=td3_workers, learner=td3_learner,
    models=TD3_MODELS, resources=REPLAY_BUFFER,
)  # fmt: skip


class TD3(Algorithm):
    """TD3 (the module docstring says where each part lives)."""

    recipe = RECIPE


class DDPG(Algorithm):
    """DDPG: TD3 with its three additions switched off."""

    recipe = DDPG_RECIPE
