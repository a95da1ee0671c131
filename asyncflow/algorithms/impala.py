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
(``rl/rollout_worker.py``); ``train_async`` (``flow/learner.py``) queues them for the learner
thread; ``SequencePolicy.learn_on_batch`` below trains on each in order (no shuffling);
``vtrace_targets`` below reshapes the rows into time-major sequences and calls ``vtrace``
(``rl/vtrace.py``) for the corrected value targets and policy-gradient advantages;
``impala_loss`` below is the loss; ``sync_weights(to_source=True)`` (``flow/learner.py``)
sends the new weights back to the worker that sampled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import torch

from ..errors import ConfigError
from ..flow import once_per_steps, parallel_rollouts, report_metrics
from ..flow.learner import sync_weights, train_async
from ..rl.actor_critic import ActorCritic, ActorCriticPolicy
from ..rl.recurrent import RecurrentActorCritic
from ..rl.sample_batch import ACTIONS, DISCOUNTS, DONES, LOGP, NEXT_OBS, OBS, REWARDS, SampleBatch
from ..rl.vtrace import vtrace
from ..rl.worker_set import WorkerSet
from ._base import Algorithm
from ._config import AlgorithmConfig, algorithm_config, field

__all__ = ["IMPALA", "IMPALAConfig", "SequencePolicy", "impala_loss", "vtrace_targets"]


@algorithm_config
class IMPALAConfig(AlgorithmConfig):
    lr: float = field(1e-3, min=0, exclusive_min=True)
    """Adam learning rate."""
    rollout_fragment_length: int = field(32, min=2)
    """Steps per sequence (V-trace runs over each sequence)."""
    num_envs_per_worker: int = field(8, min=1)
    """Sequences per worker sample (and per learner batch)."""
    max_grad_norm: float | None = field(40.0, min=0, exclusive_min=True)
    """Clip the global gradient norm to this (None: no clipping)."""
    num_async: int = field(2, min=1)
    """Sample requests in flight per worker."""
    learner_queue_size: int = field(4, min=1)
    """Batches waiting for the learner before sampling is made to wait."""
    vtrace_clip_rho: float = field(1.0, min=0)
    """rho-bar: truncation of the importance weights in the value targets."""
    vtrace_clip_pg_rho: float = field(1.0, min=0)
    """Truncation of the importance weights in the policy gradient."""
    vf_loss_coeff: float = field(0.5, min=0)
    """Weight of the value loss."""
    entropy_coeff: float = field(0.01, min=0)
    """Weight of the entropy bonus."""
    timesteps_per_iteration: int = field(2_000, min=1)
    """Env steps sampled between two results."""


def vtrace_targets(
    ac: ActorCritic, batch: Mapping[str, Any], values: torch.Tensor, target_logp: torch.Tensor, config: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace over the batch's sequences: ``(vs, pg_advantages)``, flat, from the current
    ``values`` of the rows and the log-probabilities of the policy being corrected to.

    Rows are ``rollout_fragment_length``-step sequences, one after another.
    """
    steps = config.rollout_fragment_length

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


class IMPALA(Algorithm):
    config_class = IMPALAConfig
    supports_lstm = True
    name = "impala"
    loss = staticmethod(impala_loss)
    policy_class = SequencePolicy

    def worker_options(self) -> dict[str, Any]:
        return {"postprocess": "transitions"}  # V-trace takes next_obs and discounts

    def check_vector_env(self) -> None:
        raise ConfigError(
            f"vector_env: {type(self).__name__}'s V-trace takes fixed-length sequences, "
            "and a vector env's autoreset steps would be holes in them; leave vector_env off"
        )

    def execution_plan(self, workers: WorkerSet, learner: Any, config: Any) -> AsyncIterator[dict[str, Any]]:
        rollouts = parallel_rollouts(workers, mode="async", num_async=config.num_async)
        trained = train_async(rollouts, learner, queue_size=config.learner_queue_size)
        trained = sync_weights(trained, learner, workers, to_source=True)
        return report_metrics(once_per_steps(trained, config.timesteps_per_iteration))
