"""MARWIL (Wang et al. 2018, "Exponentially Weighted Imitation Learning for Batched
Historical Data") and behaviour cloning, its ``beta = 0`` case, learning from a dataset.

Plan: reader actors hold the dataset (``rl/offline/reader.py``) and answer like replay
shards -> ``replay`` -> one update per batch on the learner -> a result every
``updates_per_iteration`` updates. No rollout worker starts; with an env, evaluation
plays the learned policy in it.

Loss, on the actor-critic model: the value head regresses the discounted return to the
episode's end ``R``; the policy maximizes ``exp(beta * A / c) * log pi(a|s)`` with
``A = R - V(s)``. RLlib keeps ``c**2`` as a slow moving average of ``A**2``; here ``c`` is
the root mean square of ``A`` over the batch (no state in the loss), and the weight is
capped at 20, as advantage-weighted regression (Peng et al. 2019) caps it, so one lucky
row cannot take over a batch. With ``beta = 0`` the weight is 1 and the value head does
not train: behaviour cloning, the negative log-likelihood of the data's actions. Both take
every action space the actor-critic family takes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ..errors import ConfigError
from ..flow import batch, learn_on_batches, replay, report_metrics
from ..rl.data.sample_batch import ACTIONS, OBS
from ..rl.offline.dataset import RETURNS
from ..rl.policies.actor_critic import ActorCritic, ActorCriticPolicy
from ..rl.sampling.worker_set import WorkerSet
from ..session import Algorithm
from ._actor_critic import ActorCriticLearner, ActorCriticWorkers
from ._config import algorithm_config, field
from ._offline import READERS, OfflineConfig, dataset, with_estimates
from ._recipe import Plan, Recipe, Run, single_model

__all__ = ["BC", "MARWIL", "BCConfig", "MARWILConfig", "marwil_loss"]

MAX_WEIGHT = 20.0


@algorithm_config
class MARWILConfig(OfflineConfig):
    beta: float = field(default=1.0, min=0)
    """How strongly advantages weight the imitation (0: behaviour cloning)."""
    vf_coeff: float = field(default=1.0, min=0)
    """Weight of the value loss."""


@algorithm_config
class BCConfig(MARWILConfig):
    """MARWIL with ``beta = 0``: behaviour cloning."""

    beta: float = field(default=0.0, min=0)
    """0: behaviour cloning is MARWIL with ``beta = 0``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.beta != 0:
            raise ConfigError(f"beta: behaviour cloning is MARWIL with beta 0, got {self.beta} (use marwil)")


def marwil_loss(ac: ActorCritic, b: Mapping[str, Any], config: MARWILConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """The module docstring's loss."""
    dist, value = ac(b[OBS])
    logp = dist.log_prob(b[ACTIONS])
    if config.beta == 0:
        loss = -logp.mean()
        return loss, {"policy_loss": float(loss.detach())}
    advantages = b[RETURNS] - value
    vf_loss = 0.5 * advantages.pow(2).mean()
    adv = advantages.detach()
    weights = torch.exp(config.beta * adv / (adv.pow(2).mean().sqrt() + 1e-8)).clamp(max=MAX_WEIGHT)
    policy_loss = -(weights * logp).mean()
    loss = policy_loss + config.vf_coeff * vf_loss
    return loss, {"policy_loss": float(policy_loss.detach()), "vf_loss": float(vf_loss.detach()),
                  "mean_weight": float(weights.mean())}  # fmt: skip


def marwil_plan(run: Run[MARWILConfig, ActorCriticPolicy, WorkerSet]) -> Plan:
    """Rows from the readers -> one update each -> a result every ``updates_per_iteration``."""
    c = run.config
    trained = learn_on_batches(replay(run.resources, c.train_batch_size), run.learner)
    return with_estimates(report_metrics(batch(trained, c.updates_per_iteration)), run)


MARWIL_RECIPE: Recipe[MARWILConfig, ActorCriticPolicy, WorkerSet] = Recipe(
    name="marwil", config=MARWILConfig, family="actor_critic", plan=marwil_plan, models=single_model("actor_critic"),
    workers=ActorCriticWorkers(marwil_loss), learner=ActorCriticLearner(marwil_loss, ActorCriticPolicy),
    resources=READERS, samples=False, dataset=dataset,
)  # fmt: skip
BC_RECIPE: Recipe[Any, ActorCriticPolicy, WorkerSet] = dataclasses.replace(MARWIL_RECIPE, name="bc", config=BCConfig)


class MARWIL(Algorithm):
    """MARWIL (the module docstring)."""

    recipe = MARWIL_RECIPE


class BC(Algorithm):
    """Behaviour cloning: MARWIL with ``beta = 0``."""

    recipe = BC_RECIPE
