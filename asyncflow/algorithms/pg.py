"""Vanilla policy gradient (REINFORCE with discounted returns, no critic).

Plan::

    parallel_rollouts -> concat_batches -> standardize_fields -> train_one_step -> report_metrics

Where each part lives: the workers compute discounted returns, with no critic
(``Postprocessing(use_critic=False)`` in ``rl/sampling/trajectory.py``); the plan standardizes them
(``standardize_fields``, ``flow/train.py``); the loss is ``pg_loss`` below, one update per batch
(``ActorCriticPolicy.learn_on_batch``, ``rl/policies/actor_critic.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..errors import ConfigError
from ..flow import concat_batches, parallel_rollouts, report_metrics, standardize_fields, train_one_step
from ..rl.policies.actor_critic import ActorCritic, ActorCriticPolicy
from ..session import Algorithm
from ._actor_critic import ON_POLICY_MODELS, ActorCriticLearner, ActorCriticWorkers
from ._config import OnPolicyConfig, algorithm_config
from ._recipe import Capabilities, Plan, Recipe, Run

__all__ = ["PG", "PGConfig", "pg_loss"]


@algorithm_config(defaults={"lr": 4e-3, "lam": 1.0})
class PGConfig(OnPolicyConfig):
    """Plain discounted returns (``lam`` 1.0; there is no critic), standardized per batch."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.train_batch_size < 2:  # one row standardizes to 0: the policy would never move
            raise ConfigError(f"train_batch_size: must be >= 2 (the returns are standardized), "
                              f"got {self.train_batch_size}")  # fmt: skip


def pg_loss(ac: ActorCritic, batch: Mapping[str, Any], config: PGConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """REINFORCE: minus log-probability times the (standardized) return."""
    dist, _ = ac(batch["obs"])
    loss = -(dist.log_prob(batch["actions"]) * batch["advantages"]).mean()
    return loss, {"policy_loss": float(loss.detach()), "entropy": float(dist.entropy().mean().detach())}


def pg_plan(run: Run[PGConfig, ActorCriticPolicy, None]) -> Plan:
    """Whole rollouts, their returns standardized, one update per batch."""
    rollouts = parallel_rollouts(run.workers, mode="bulk_sync")
    batches = concat_batches(rollouts, min_batch_size=run.config.train_batch_size)
    batches = standardize_fields(batches, ["advantages"])
    return report_metrics(train_one_step(batches, run.learner, run.workers))


RECIPE: Recipe[PGConfig, ActorCriticPolicy, None] = Recipe(
    name="pg", config=PGConfig, family="actor_critic", plan=pg_plan, models=ON_POLICY_MODELS,
    workers=ActorCriticWorkers(pg_loss, use_critic=False), learner=ActorCriticLearner(pg_loss, ActorCriticPolicy),
    capabilities=Capabilities(recurrent=True, numpy_inference=True, learner_precision=True, rmsprop=True),
    live_fields=("train_batch_size",),
)  # fmt: skip


class PG(Algorithm):
    """Vanilla policy gradient (the module docstring says where each part lives)."""

    recipe = RECIPE
