"""IMPALA (Espeholt et al. 2018): asynchronous sampling, a V-trace learner
that trains while sampling continues, and new weights back to the worker
whose batch was trained.

Plan (RLlib Flow, Fig. 6)::

    parallel_rollouts(async) -> train_async (learner thread, bounded queue)
        -> sync_weights(to_source) -> once_per_steps -> report_metrics

Each worker's sample (``num_envs_per_worker`` sequences of
``rollout_fragment_length`` steps) is one learner batch; V-trace corrects for
the policy lag between the worker's weights and the learner's.

Where each part lives: the workers sample sequences with their (lagging) weights
(``rl/sampling/rollout_worker.py``); ``train_async`` (``flow/learner.py``) queues them for the learner
thread; ``SequencePolicy.learn_on_batch`` below trains on each in order (no shuffling);
``vtrace_targets`` below reshapes the rows into time-major sequences and calls ``vtrace``
(``rl/learners/vtrace.py``) for the corrected value targets and policy-gradient advantages;
``impala_loss`` below is the loss; ``sync_weights(to_source=True)`` (``flow/learner.py``)
sends the new weights back to the worker that sampled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..errors import ConfigError
from ..flow import once_per_steps, parallel_rollouts, report_metrics
from ..flow.learner import sync_weights, train_async
from ..rl.data.sample_batch import ACTIONS, DISCOUNTS, DONES, LOGP, NEXT_OBS, OBS, REWARDS, SampleBatch
from ..rl.learners.vtrace import vtrace
from ..rl.policies.actor_critic import ActorCritic, ActorCriticPolicy
from ..rl.policies.recurrent import RecurrentActorCritic
from ..session import Algorithm
from ._actor_critic import ActorCriticLearner, ActorCriticWorkers
from ._config import AlgorithmConfig, algorithm_config, field
from ._recipe import Capabilities, Plan, Recipe, Run, single_model

__all__ = ["IMPALA", "VTRACE_CAPABILITIES", "IMPALAConfig", "SequencePolicy", "impala_loss", "vtrace_targets"]


@algorithm_config(defaults={"lr": 1e-3, "rollout_fragment_length": 32, "max_grad_norm": 40.0})
class IMPALAConfig(AlgorithmConfig):
    """Each worker sample is ``num_envs_per_worker`` sequences of ``rollouts.fragment_length``
    steps (at least 2: V-trace runs over each sequence), and one learner batch."""

    num_async: int = field(default=2, min=1)
    """Sample requests in flight per worker."""
    learner_queue_size: int = field(default=4, min=1)
    """Batches waiting for the learner before sampling is made to wait."""
    vtrace_clip_rho: float = field(default=1.0, min=0)
    """rho-bar: truncation of the importance weights in the value targets."""
    vtrace_clip_pg_rho: float = field(default=1.0, min=0)
    """Truncation of the importance weights in the policy gradient."""
    vf_loss_coeff: float = field(default=0.5, min=0)
    """Weight of the value loss."""
    entropy_coeff: float = field(default=0.01, min=0)
    """Weight of the entropy bonus."""
    timesteps_per_iteration: int = field(default=2_000, min=1)
    """Env steps sampled between two results."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rollouts.fragment_length < 2:
            raise ConfigError(f"rollouts.fragment_length: V-trace needs sequences of at least 2 steps, "
                              f"got {self.rollouts.fragment_length}")  # fmt: skip


def vtrace_targets(
    ac: ActorCritic, batch: Mapping[str, Any], values: torch.Tensor, target_logp: torch.Tensor, config: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace over the batch's sequences: ``(vs, pg_advantages)``, flat, from the current
    ``values`` of the rows and the log-probabilities of the policy being corrected to.

    Rows are ``rollout_fragment_length``-step sequences, one after another.
    """
    steps = config.rollouts.fragment_length

    def seq(x: torch.Tensor) -> torch.Tensor:  # flat rows -> (T, B)
        return x.reshape(-1, steps).T

    with torch.no_grad():
        # A recurrent model takes V(next obs) from the state each row ended in.
        next_values = (
            ac.next_values(batch[NEXT_OBS]) if isinstance(ac, RecurrentActorCritic) else ac(batch[NEXT_OBS])[1]
        )
        continues = ~seq(batch[DONES])
        continues[-1] = False  # the next row starts another sequence
        vs, pg_adv = vtrace(
            seq(target_logp - batch[LOGP]),
            seq(batch[DISCOUNTS]),
            seq(batch[REWARDS]),
            seq(values.detach()),
            seq(next_values),
            continues,
            clip_rho=config.vtrace_clip_rho,
            clip_pg_rho=config.vtrace_clip_pg_rho,
        )
    return vs.T.reshape(-1), pg_adv.T.reshape(-1)


def impala_loss(
    ac: ActorCritic, batch: Mapping[str, Any], config: IMPALAConfig
) -> tuple[torch.Tensor, dict[str, float]]:
    """Policy gradient on V-trace advantages, value regression to V-trace targets, entropy bonus."""
    dist, values = ac(batch[OBS])
    logp = dist.log_prob(batch[ACTIONS])
    vs, pg_adv = vtrace_targets(ac, batch, values, logp.detach(), config)
    pi_loss = -(logp * pg_adv).mean()
    vf_loss = 0.5 * ((vs - values) ** 2).mean()
    entropy = dist.entropy().mean()
    loss = pi_loss + config.vf_loss_coeff * vf_loss - config.entropy_coeff * entropy
    return loss, {
        "total_loss": float(loss.detach()),
        "policy_loss": float(pi_loss.detach()),
        "vf_loss": float(vf_loss.detach()),
        "entropy": float(entropy.detach()),
        "mean_rho": float(torch.exp(logp.detach() - batch[LOGP]).mean()),
    }


class SequencePolicy(ActorCriticPolicy):
    """An actor-critic policy that trains on whole batches in row order (sequences stay intact)."""

    num_epochs = 1

    def learn_on_batch(self, batch: SampleBatch, *_: Any, **__: Any) -> dict[str, float]:  # type: ignore[override]
        """``num_epochs`` passes over the whole batch, rows in order."""
        return super().learn_on_batch(batch, self.num_epochs, None, 0, shuffle=False)


def impala_plan(run: Run[IMPALAConfig, SequencePolicy, None]) -> Plan:
    """Asynchronous samples into the learner thread; the weights back to the worker that sampled."""
    rollouts = parallel_rollouts(run.workers, mode="async", num_async=run.config.num_async)
    trained = train_async(rollouts, run.learner, queue_size=run.config.learner_queue_size)
    trained = sync_weights(trained, run.learner, run.workers, to_source=True)
    return report_metrics(once_per_steps(trained, run.config.timesteps_per_iteration))


VTRACE_CAPABILITIES = Capabilities(
    recurrent=True, numpy_inference=True, learner_precision=True, rmsprop=True, vector_env=False,
    vector_env_reason="V-trace takes fixed-length sequences, and a vector env's autoreset steps would be holes in them",
    policy_mapping=False, policy_mapping_reason="V-trace takes fixed-length sequences of one env lane; an agent's "
    "steps in a multi-agent env are not (agents finish early, wait for their turn)",
)  # fmt: skip

RECIPE: Recipe[IMPALAConfig, SequencePolicy, None] = Recipe(
    name="impala", config=IMPALAConfig, family="actor_critic", plan=impala_plan, models=single_model("actor_critic"),
    workers=ActorCriticWorkers(impala_loss, postprocess="transitions"),  # V-trace takes next_obs and discounts
    learner=ActorCriticLearner(impala_loss, SequencePolicy), capabilities=VTRACE_CAPABILITIES,
    live_fields=("vtrace_clip_rho", "vtrace_clip_pg_rho", "vf_loss_coeff", "entropy_coeff"),
)  # fmt: skip


class IMPALA(Algorithm):
    """IMPALA (the module docstring says where each part lives)."""

    recipe = RECIPE
