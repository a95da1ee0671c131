"""A2C: synchronous advantage actor-critic, with an optional microbatch plan.

Plan::

    parallel_rollouts -> concat_batches -> train_one_step -> report_metrics

With ``microbatch_size``, gradients are computed on microbatches and averaged
before one update (RLlib's A2C microbatching)::

    parallel_rollouts -> concat_batches(microbatch) -> compute_gradients
        -> batch(n) -> average_gradients -> apply_gradients -> report_metrics

Where each part lives: acting and GAE in the workers (``rl/sampling/rollout_worker.py``,
``rl/sampling/trajectory.py``, ``rl/sampling/postprocessing.py``); the loss is ``a2c_loss`` below; one update
per batch (``ActorCriticPolicy.learn_on_batch``, ``rl/policies/actor_critic.py``), or gradients per
microbatch averaged (``flow/train.py``); weights back to the workers in ``train_one_step`` or
``apply_gradients`` (``flow/train.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..errors import ConfigError
from ..flow import (
    apply_gradients,
    average_gradients,
    batch,
    compute_gradients,
    concat_batches,
    parallel_rollouts,
    report_metrics,
    train_one_step,
)
from ..rl.policies.actor_critic import ActorCritic, ActorCriticPolicy
from ..session import Algorithm
from ._actor_critic import ON_POLICY_MODELS, ActorCriticLearner, ActorCriticWorkers
from ._config import OnPolicyConfig, algorithm_config, field
from ._recipe import Capabilities, Plan, Recipe, Run

__all__ = ["A2C", "A2CConfig", "a2c_loss"]


@algorithm_config(defaults={"lr": 2e-3, "lam": 1.0, "train_batch_size": 1024})
class A2CConfig(OnPolicyConfig):
    microbatch_size: int | None = field(default=None, min=1)
    """If set, average the gradients of microbatches of this size into one update."""
    vf_loss_coeff: float = field(default=0.5, min=0)
    """Weight of the value loss."""
    entropy_coeff: float = field(default=0.0, min=0)
    """Weight of the entropy bonus."""
    standardize_advantages: bool = True
    """Scale the advantages to mean 0 and std 1 over each batch (each microbatch, with
    ``microbatch_size``) before the policy gradient; False: as computed (Stable-Baselines3's A2C,
    ``normalize_advantage=False``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.microbatch_size is not None and not 1 <= self.microbatch_size <= self.train_batch_size:
            raise ConfigError(f"microbatch_size: must be in [1, train_batch_size], got {self.microbatch_size}")


def a2c_loss(ac: ActorCritic, batch: Mapping[str, Any], config: A2CConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """Policy gradient on (standardized) advantages, value regression, entropy bonus."""
    dist, values = ac(batch["obs"])
    adv = batch["advantages"]
    if config.standardize_advantages and len(adv) > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    policy_loss = -(dist.log_prob(batch["actions"]) * adv).mean()
    vf_loss = ((values - batch["value_targets"]) ** 2).mean()
    entropy = dist.entropy().mean()
    loss = policy_loss + config.vf_loss_coeff * vf_loss - config.entropy_coeff * entropy
    return loss, {
        "policy_loss": float(policy_loss.detach()),
        "vf_loss": float(vf_loss.detach()),
        "entropy": float(entropy.detach()),
    }


def a2c_plan(run: Run[A2CConfig, ActorCriticPolicy, None]) -> Plan:
    """One update per batch; or the mean of microbatches' gradients (``microbatch_size``)."""
    config, workers, learner = run.config, run.workers, run.learner
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    if config.microbatch_size is None:
        batches = concat_batches(rollouts, min_batch_size=config.train_batch_size)
        return report_metrics(train_one_step(batches, learner, workers))
    micro = concat_batches(rollouts, min_batch_size=config.microbatch_size)
    grads = batch(compute_gradients(micro, learner), config.train_batch_size // config.microbatch_size)
    return report_metrics(apply_gradients(average_gradients(grads), learner, workers))


RECIPE: Recipe[A2CConfig, ActorCriticPolicy, None] = Recipe(
    name="a2c", config=A2CConfig, family="actor_critic", plan=a2c_plan, models=ON_POLICY_MODELS,
    workers=ActorCriticWorkers(a2c_loss), learner=ActorCriticLearner(a2c_loss, ActorCriticPolicy),
    capabilities=Capabilities(recurrent=True, numpy_inference=True, learner_precision=True, rmsprop=True),
    live_fields=("vf_loss_coeff", "entropy_coeff", "train_batch_size", "microbatch_size"),
)  # fmt: skip


class A2C(Algorithm):
    """A2C (the module docstring says where each part lives)."""

    recipe = RECIPE
