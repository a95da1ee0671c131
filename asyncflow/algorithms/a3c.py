"""A3C: workers compute gradients on their own samples, asynchronously.

Plan (RLlib Flow's 4-line A3C)::

    async_gradients -> apply_gradients(update_all=False) -> report_metrics

Each worker's gradients are applied as they arrive, and the new weights go
back to that worker only; the others keep sampling undisturbed.

Where each part lives: each worker samples, computes GAE and takes the gradient of
``a2c_loss`` on its own sample (``RolloutWorker.sample_with_gradients``, ``rl/rollout_worker.py``);
``async_gradients`` (``flow/rollouts.py``) gathers them as they land; ``apply_gradients``
(``flow/train.py``) steps Adam and sends the weights back to that worker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..flow import apply_gradients, async_gradients, report_metrics
from ..rl.actor_critic import ActorCriticPolicy
from ..rl.worker_set import WorkerSet
from ._base import Algorithm
from ._config import algorithm_config, field
from .a2c import A2CConfig, a2c_loss

__all__ = ["A3C", "A3CConfig"]


@algorithm_config
class A3CConfig(A2CConfig):
    lr: float = field(1e-3, min=0, exclusive_min=True)
    """Adam learning rate (of the learner that applies the gradients)."""
    rollout_fragment_length: int = field(32, min=1)
    """Steps per sub-environment before a worker computes gradients."""


class A3C(Algorithm):
    config_class = A3CConfig
    supports_learner_precision = False
    supports_lstm = True
    workers_learn = True
    name = "a3c"
    loss = staticmethod(a2c_loss)

    def execution_plan(
        self, workers: WorkerSet, learner: ActorCriticPolicy, config: Any
    ) -> AsyncIterator[dict[str, Any]]:
        grads = async_gradients(workers)
        return report_metrics(apply_gradients(grads, learner, workers, update_all=False))
