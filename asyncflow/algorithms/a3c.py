"""A3C: workers compute gradients on their own samples, asynchronously.

Plan (RLlib Flow's 4-line A3C)::

    async_gradients -> apply_gradients(update_all=False) -> report_metrics

Each worker's gradients are applied as they arrive, and the new weights go
back to that worker only; the others keep sampling undisturbed.

Where each part lives: each worker samples, computes GAE and takes the gradient of
``a2c_loss`` on its own sample (``RolloutWorker.sample_with_gradients``, ``rl/sampling/rollout_worker.py``);
``async_gradients`` (``flow/rollouts.py``) gathers them as they land; ``apply_gradients``
(``flow/train.py``) steps Adam and sends the weights back to that worker.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..flow import apply_gradients, async_gradients, report_metrics
from ..rl.policies.actor_critic import ActorCriticPolicy
from ..session import Algorithm
from ._actor_critic import ON_POLICY_MODELS, ActorCriticLearner, ActorCriticWorkers
from ._config import algorithm_config
from ._recipe import Capabilities, Plan, Recipe, Run
from .a2c import A2CConfig, a2c_loss

__all__ = ["A3C", "A3CConfig"]


@algorithm_config(defaults={"lr": 1e-3, "rollout_fragment_length": 32})
class A3CConfig(A2CConfig):
    """A2C's fields; ``lr`` is the rate of the learner that applies the workers' gradients, and
    each worker computes gradients on its own sample of ``rollouts.num_envs_per_worker`` x
    ``rollouts.fragment_length`` steps: there is no training batch to size."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("train_batch_size", "microbatch_size"):  # A2C's, which A3C would ignore
            if getattr(self, name) != getattr(A2CConfig(), name):
                raise ConfigError(f"{name}: A3C's workers compute gradients on their own samples "
                                  "(num_envs_per_worker x rollout_fragment_length): no training batch")  # fmt: skip


def a3c_plan(run: Run[A3CConfig, ActorCriticPolicy, None]) -> Plan:
    """Each worker's gradients applied as they arrive, the weights back to that worker only."""
    grads = async_gradients(run.workers)
    return report_metrics(apply_gradients(grads, run.learner, run.workers, update_all=False))


RECIPE: Recipe[A3CConfig, ActorCriticPolicy, None] = Recipe(
    name="a3c", config=A3CConfig, family="actor_critic", plan=a3c_plan, models=ON_POLICY_MODELS,
    workers=ActorCriticWorkers(a2c_loss), learner=ActorCriticLearner(a2c_loss, ActorCriticPolicy),
    capabilities=Capabilities(recurrent=True, numpy_inference_reason="workers, which compute gradients", rmsprop=True,
                              policy_mapping=False, policy_mapping_reason="its workers compute gradients of one "
                              "policy; a multi-agent worker samples for several"),
)  # fmt: skip


class A3C(Algorithm):
    """A3C (the module docstring says where each part lives)."""

    recipe = RECIPE
