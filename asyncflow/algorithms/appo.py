"""APPO: IMPALA's asynchronous plan with PPO's clipped surrogate.

The learner keeps a target copy of the policy. V-trace corrects from the
workers' (behaviour) policy to the target policy, and the surrogate ratio is
taken against the target policy, times the clipped importance ratio of
target over behaviour (as RLlib's APPO). The target is refreshed every
``target_update_frequency`` rows trained; the KL from the target to the
current policy is reported (and penalized with ``kl_coeff > 0``).

Plan::

    parallel_rollouts(async) -> train_async -> sync_weights(to_source)
        -> update_target_network -> once_per_steps -> report_metrics

Where each part lives: IMPALA's plan and V-trace (``impala.py``, ``rl/learners/vtrace.py``);
the surrogate against the target policy is ``appo_loss`` below; the target copy lives in
``TargetSequencePolicy`` below and moves in ``update_target_network`` (``flow/learner.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch

from ..flow import once_per_steps, parallel_rollouts, report_metrics
from ..flow.learner import sync_weights, train_async, update_target_network
from ..rl.data.sample_batch import ACTIONS, OBS, SampleBatch
from ..rl.learners.device import to_numpy
from ..rl.policies.actor_critic import ActorCritic
from ..session import Algorithm
from ._actor_critic import ActorCriticLearner, ActorCriticWorkers
from ._config import algorithm_config, field
from ._recipe import Plan, Recipe, Run, single_model
from .impala import VTRACE_CAPABILITIES, IMPALAConfig, SequencePolicy, vtrace_targets

__all__ = ["APPO", "APPOConfig", "appo_loss"]

TARGET_LOGP = "target_logp"


@algorithm_config
class APPOConfig(IMPALAConfig):
    clip_param: float = field(default=0.3, min=0, exclusive_min=True)
    """Surrogate clip range."""
    num_epochs: int = field(default=2, min=1)
    """Passes over each batch (in row order)."""
    target_update_frequency: int = field(default=2_048, min=1)
    """Rows trained between refreshes of the target policy."""
    kl_coeff: float = field(default=0.0, min=0)
    """Weight of the KL(target || current) penalty."""


def appo_loss(ac: ActorCritic, batch: Mapping[str, Any], config: APPOConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate on V-trace advantages against the target policy, value loss, entropy."""
    dist, values = ac(batch[OBS])
    logp = dist.log_prob(batch[ACTIONS])
    target_logp = batch[TARGET_LOGP]
    vs, adv = vtrace_targets(ac, batch, values, target_logp, config)
    is_ratio = torch.exp(target_logp - batch["action_logp"]).clamp(0.0, 2.0)
    ratio = is_ratio * torch.exp(logp - target_logp)
    surrogate = torch.min(adv * ratio, adv * ratio.clamp(1 - config.clip_param, 1 + config.clip_param))
    vf_loss = 0.5 * ((vs - values) ** 2).mean()
    entropy = dist.entropy().mean()
    kl = (target_logp - logp).mean()  # sample estimate of KL(target || current) on target-ish actions
    loss = -surrogate.mean() + config.vf_loss_coeff * vf_loss - config.entropy_coeff * entropy
    if config.kl_coeff > 0:
        loss = loss + config.kl_coeff * kl
    return loss, {
        "total_loss": float(loss.detach()),
        "policy_loss": float(-surrogate.mean().detach()),
        "vf_loss": float(vf_loss.detach()),
        "entropy": float(entropy.detach()),
        "kl": float(kl.detach()),
    }


class TargetSequencePolicy(SequencePolicy):
    """A sequence policy with a target copy of its model (APPO's learner)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.num_epochs = self.loss_config.num_epochs
        self.target_model = copy.deepcopy(self.model).requires_grad_(False)
        self.target = self.actor_critic(self.target_model)

    def learn_on_batch(self, batch: SampleBatch, *_: Any, **__: Any) -> dict[str, float]:
        """Adds the target policy's log-probabilities, then trains like IMPALA's learner."""
        with torch.no_grad():
            dist, _values = self.target(self.tensors(batch[OBS]))
            batch[TARGET_LOGP] = to_numpy(dist.log_prob(self.tensors(batch[ACTIONS])))
        return super().learn_on_batch(batch)

    def update_target(self) -> None:
        """Copy the current policy into the target."""
        self.target_model.load_state_dict(self.model.state_dict())


def appo_plan(run: Run[APPOConfig, TargetSequencePolicy, None]) -> Plan:
    """IMPALA's plan, with the target policy refreshed every ``target_update_frequency`` rows."""
    rollouts = parallel_rollouts(run.workers, mode="async", num_async=run.config.num_async)
    trained = train_async(rollouts, run.learner, queue_size=run.config.learner_queue_size)
    trained = sync_weights(trained, run.learner, run.workers, to_source=True)
    trained = update_target_network(trained, run.learner, run.config.target_update_frequency)
    return report_metrics(once_per_steps(trained, run.config.timesteps_per_iteration))


RECIPE: Recipe[APPOConfig, TargetSequencePolicy, None] = Recipe(
    name="appo", config=APPOConfig, family="actor_critic", plan=appo_plan, models=single_model("actor_critic"),
    workers=ActorCriticWorkers(appo_loss, postprocess="transitions"),
    learner=ActorCriticLearner(appo_loss, TargetSequencePolicy), capabilities=VTRACE_CAPABILITIES,
)  # fmt: skip


class APPO(Algorithm):
    """APPO (the module docstring says where each part lives)."""

    recipe = RECIPE
