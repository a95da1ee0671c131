"""SAC (Haarnoja et al. 2018): soft actor-critic with twin Q networks,
soft target updates and automatic entropy tuning, on ``Box`` actions.

Plan: the replay plan of ``_off_policy.py``; the learner updates its target
critics softly (``tau``) after every step, so there is no separate target
update operator.

Where each part lives: acting with a squashed Gaussian (``SquashedGaussianPolicy``,
``rl/policies/continuous.py``); the twin-critic, actor and temperature steps and the soft target update
(``SACLearner.learn_on_batch`` below, on ``rl/learners/continuous.py``); replay and the plan (``_off_policy.py``);
gSDE's actor (``SDEActor``, ``rl/models/builtin.py``) and its noise (``sde_noise_matrices``, ``sde_sample``,
``rl/policies/continuous.py``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import torch

from ..rl.data.replay_buffer import ReplayBuffer
from ..rl.data.sample_batch import SampleBatch
from ..rl.data.tree import tree_map
from ..rl.learners.continuous import ContinuousLearner, batch_tensors, guarded_step
from ..rl.learners.device import to_numpy
from ..rl.learners.optim import Adam
from ..rl.models import ModelSpec
from ..rl.models.nets import polyak_update
from ..rl.policies.continuous import SquashedGaussianPolicy, sde_noise_matrices, sde_sample, squashed_gaussian
from ..rl.policy import ReplayUpdate
from ..session import Algorithm
from ._config import algorithm_config, field
from ._off_policy import REPLAY_BUFFER, ReplayConfig, replay_plan
from ._recipe import Recipe, Spaces, Workers, single_model

__all__ = ["SAC", "SACConfig", "SACLearner"]


class SACLearner(ContinuousLearner):
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
        cql_weight: float = 0.0,
        cql_samples: int = 10,
        learn_alpha: bool = True,
        sde: bool = False,
        log_std_init: float = -3.0,
    ) -> None:
        super().__init__(observation_space, action_space, model=model, hidden=hidden, gaussian=True, num_q=2,
                         actor_lr=actor_lr, critic_lr=critic_lr, tau=tau, seed=seed, device=device,
                         max_nonfinite_updates=max_nonfinite_updates, max_grad_norm=max_grad_norm, sde=sde,
                         log_std_init=log_std_init)  # fmt: skip
        self.learn_alpha = learn_alpha
        """False: the temperature stays at ``initial_alpha`` (Stable-Baselines3's fixed ``ent_coef``)."""
        self.sde = sde
        """gSDE (``SDEActor``): each step draws one noise matrix for its batch, as SB3's SAC does."""
        self.log_alpha = torch.tensor(math.log(initial_alpha), device=self.device, requires_grad=True)
        self._actor_loss = self._entropy = 0.0
        self.target_entropy = -float(self.act_dim) if target_entropy is None else target_entropy
        self.alpha_opt = Adam([self.log_alpha], lr=alpha_lr)  # type: ignore[list-item]
        self.cql_weight, self.cql_samples = cql_weight, cql_samples
        """Conservative Q-learning (Kumar et al. 2020, CQL(H)), 0: plain SAC. Each critic's loss
        adds ``cql_weight * (logsumexp_i Q(s, a_i) - Q(s, a_data))`` over ``cql_samples``
        actions each drawn uniformly, from the policy at ``s`` and from the policy at ``s'``,
        each term less its log-density (importance sampling of the log-sum-exp)."""
        self._cql_gap = 0.0

    def learn_on_batch(self, batch: SampleBatch) -> ReplayUpdate | dict[str, float]:
        """One critic, actor and temperature step: its stats and TD errors (only the stats when skipped)."""
        obs, actions, rewards, next_obs, discounts, w = batch_tensors(batch, self.device)
        alpha = self.log_alpha.detach().exp()
        sample = self._sampler()
        with torch.no_grad():
            next_actions, next_logp = sample(next_obs)
            t = self.target(next_obs, next_actions)
            targets = rewards + discounts * (torch.min(t[:, 0], t[:, 1]) - alpha * next_logp)
        conservative = None
        if self.cql_weight:
            conservative = functools.partial(self._conservative, obs, next_obs)
        q1 = self._critic_step(obs, actions, targets, w, conservative)
        if q1 is None:  # skipped: nothing moves, no priorities from NaN
            return {"skipped_updates": float(self.guard.skipped)}
        logp = torch.zeros(())

        def actor_loss() -> torch.Tensor:
            nonlocal logp
            new_actions, logp = sample(obs)
            q_pi: torch.Tensor = self.critic(obs, new_actions)
            return (alpha * logp - torch.min(q_pi[:, 0], q_pi[:, 1])).mean()

        loss = self._actor_step(actor_loss)
        if loss is not None:
            self._actor_loss, self._entropy = float(loss.detach()), float(-logp.detach().mean())
        if loss is not None and self.learn_alpha:
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            guarded_step(self.guard, self.alpha_opt, alpha_loss, [self.log_alpha], self.max_grad_norm)  # type: ignore[list-item]
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
        if self.cql_weight:
            stats["cql_gap"] = self._cql_gap
        return ReplayUpdate(stats, to_numpy((q1 - targets).abs()))

    def _sampler(self) -> Callable[[Any], tuple[torch.Tensor, torch.Tensor]]:
        """``obs -> (squashed actions, log-probs)`` for this step: independent Gaussian noise, or
        gSDE's with one matrix drawn for the step (its draw trains ``log_std``)."""
        if not self.sde:
            return lambda obs: squashed_gaussian(self.actor(obs), generator=self.generator)
        matrices = sde_noise_matrices(self.actor, 1, self.generator)
        return lambda obs: sde_sample(self.actor, obs, matrices)

    def _conservative(self, obs: Any, next_obs: Any, q: torch.Tensor) -> torch.Tensor:
        """CQL(H)'s term for every critic (the docstring of ``cql_weight``), summed."""
        n, k = self.cql_samples, len(q)

        def repeat(tree: Any) -> Any:
            return tree_map(lambda a: a.repeat_interleave(n, 0), tree)

        here, there = repeat(obs), repeat(next_obs)
        uniform = torch.rand(k * n, self.act_dim, device=self.device, generator=self.generator) * 2 - 1
        with torch.no_grad():
            mine, my_logp = squashed_gaussian(self.actor(here), generator=self.generator)
            later, later_logp = squashed_gaussian(self.actor(there), generator=self.generator)
        log_uniform = -self.act_dim * math.log(2.0)
        values = [self.critic(here, a).view(k, n, self.num_q) - logp.view(k, n, 1)
                  for a, logp in ((uniform, torch.full((k * n,), log_uniform, device=self.device)),
                                  (mine, my_logp), (later, later_logp))]  # fmt: skip
        gap = torch.logsumexp(torch.cat(values, dim=1), dim=1) - q  # (k, num_q)
        self._cql_gap = float(gap.detach().mean())
        return self.cql_weight * gap.mean(0).sum()


@algorithm_config(defaults={"env": "Pendulum-v1", "num_envs_per_worker": 1, "rollout_fragment_length": 8, "lr": 1e-3,
                            "max_grad_norm": None, "train_batch_size": 128, "training_intensity": 128.0})  # fmt: skip
class SACConfig(ReplayConfig):
    """``lr`` is the rate of the actor, the critics and the temperature; ``max_grad_norm`` (None:
    no clipping) clips each of their steps; ``training_intensity`` 128: one learner step per env
    step; the first ``learning_starts`` transitions come from uniform random actions."""

    vector_hidden = (128, 128)

    tau: float = field(default=0.005, min=0, max=1)
    """Soft target update rate."""
    initial_alpha: float = field(default=1.0, min=0, exclusive_min=True)
    """Starting entropy temperature."""
    target_entropy: float | None = None
    """Entropy the temperature aims for (None: minus the action dimension)."""
    learn_alpha: bool = True
    """Tune the temperature toward ``target_entropy``; False: it stays at ``initial_alpha``
    (Stable-Baselines3's ``ent_coef`` as a number)."""
    use_sde: bool = False
    """Generalized state-dependent exploration (gSDE; Raffin et al. 2022): the noise is the last
    hidden layer's features times a matrix each env keeps for ``sde_sample_freq`` steps, so it is
    smooth in time and state (the built-in model only; ``SDEActor``)."""
    sde_sample_freq: int = field(default=16, min=1)
    """With ``use_sde``: env steps each env keeps its noise matrix."""
    log_std_init: float = field(default=-3.0, min=-20.0, max=2.0)
    """With ``use_sde``: the initial log-std of the noise matrix's entries."""


def sac_workers(config: SACConfig, spaces: Spaces) -> Workers:
    """Squashed-Gaussian workers (uniform random actions for their share of ``learning_starts``)."""
    c = config
    random_steps = c.learning_starts // max(c.rollouts.num_workers, 1)
    policy = functools.partial(SquashedGaussianPolicy, model=c.model, hidden=c.vector_hidden, random_steps=random_steps,
                               device=c.rollouts.device, sde_sample_freq=c.sde_sample_freq if c.use_sde else None,
                               log_std_init=c.log_std_init)  # fmt: skip
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


def sac_learner(config: SACConfig, spaces: Spaces) -> SACLearner:
    """Twin critics, the actor and the temperature, with soft target updates."""
    c, part = config, config.learner
    return SACLearner(spaces.observation, spaces.action, model=c.model, device=part.device,
                      max_nonfinite_updates=part.max_nonfinite_updates, hidden=c.vector_hidden, actor_lr=part.lr,
                      critic_lr=part.lr, alpha_lr=part.lr, initial_alpha=c.initial_alpha,
                      target_entropy=c.target_entropy, tau=c.tau, seed=c.seed, learn_alpha=c.learn_alpha,
                      sde=c.use_sde, log_std_init=c.log_std_init, max_grad_norm=part.max_grad_norm)  # fmt: skip


RECIPE: Recipe[SACConfig, SACLearner, ReplayBuffer] = Recipe(
    name="sac", config=SACConfig, family="continuous", plan=replay_plan, workers=sac_workers, learner=sac_learner,
    models=single_model("continuous", gaussian=True, num_q=2, sde=lambda c: c.use_sde,
                        log_std_init=lambda c: c.log_std_init),
    resources=REPLAY_BUFFER,
)  # fmt: skip


class SAC(Algorithm):
    """SAC (the module docstring says where each part lives)."""

    recipe = RECIPE
