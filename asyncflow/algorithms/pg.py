"""Vanilla policy gradient (REINFORCE with discounted returns, no critic).

Plan::

    parallel_rollouts -> concat_batches -> standardize_fields -> train_one_step -> report_metrics

Where each part lives: the workers compute discounted returns, with no critic
(``Postprocessing(use_critic=False)`` in ``rl/trajectory.py``); the plan standardizes them
(``standardize_fields``, ``flow/train.py``); the loss is ``pg_loss`` below, one update per batch
(``ActorCriticPolicy.learn_on_batch``, ``rl/actor_critic.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import torch

from ..flow import concat_batches, parallel_rollouts, report_metrics, standardize_fields, train_one_step
from ..rl.actor_critic import ActorCritic, ActorCriticPolicy
from ..rl.worker_set import WorkerSet
from ._base import Algorithm
from ._config import AlgorithmConfig, algorithm_config, field

__all__ = ["PG", "PGConfig", "pg_loss"]


@algorithm_config
class PGConfig(AlgorithmConfig):
    lr: float = field(4e-3, min=0, exclusive_min=True)
    """Adam learning rate."""
    lam: float = field(1.0, min=0, max=1)
    """1.0: advantages are plain discounted returns (there is no critic)."""
    train_batch_size: int = field(2048, min=2)
    """Environment steps per gradient step (at least 2: the returns are standardized per batch)."""


def pg_loss(ac: ActorCritic, batch: Mapping[str, Any], config: PGConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """REINFORCE: minus log-probability times the (standardized) return."""
    dist, _ = ac(batch["obs"])
    loss = -(dist.log_prob(batch["actions"]) * batch["advantages"]).mean()
    return loss, {"policy_loss": float(loss.detach()), "entropy": float(dist.entropy().mean().detach())}


class PG(Algorithm):
    config_class = PGConfig
    supports_lstm = True
    name = "pg"
    use_critic = False
    loss = staticmethod(pg_loss)

    def execution_plan(
        self, workers: WorkerSet, learner: ActorCriticPolicy, config: Any
    ) -> AsyncIterator[dict[str, Any]]:
        rollouts = parallel_rollouts(workers, mode="bulk_sync")
        batches = concat_batches(rollouts, min_batch_size=config.train_batch_size)
        batches = standardize_fields(batches, ["advantages"])
        return report_metrics(train_one_step(batches, learner, workers))
