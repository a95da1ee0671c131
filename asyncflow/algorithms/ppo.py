"""PPO (Schulman et al. 2017): clipped surrogate, clipped value loss, entropy bonus.

Plan (RLlib Flow, Fig. 4)::

    parallel_rollouts -> concat_batches -> standardize_fields -> train_one_step -> report_metrics

Defaults are tuned for CartPole-sized problems on a laptop, for wall time to
a solved task: 2 workers x 8 envs x 128 steps = 2,048 steps per iteration, 8
minibatches of 256 for 5 epochs, learning rate 3e-3 (a 64x64 MLP tolerates it
with Adam and gradient clipping). Measured on CartPole-v1, steps to a mean
return of 475 for seeds 0/1/2, and training seconds for seed 0 on 2 cores:

    2048 x 5 epochs,  lr 3e-3: 65.5k / 63.5k / 69.6k steps,  8.8 s   (default)
    1024 x 10 epochs, lr 3e-3: 59.4k / 58.4k / 61.4k steps, 12.2 s
    1024 x 10 epochs, lr 2e-3: 66.6k / 62.5k / 61.4k steps
    1024 x 10 epochs, lr 1e-3: 79.9k / 94.2k / 89.1k steps, 17.7 s

The learner's SGD steps cost more wall time than sampling here, so fewer
steps per sample win even when they need a few more samples.

Where each part lives, in the order one iteration runs:

- acting: each rollout worker (``rl/sampling/rollout_worker.py``) asks its policy for actions,
  log-probabilities and values (``ActorCriticPolicy.compute_actions`` in ``rl/policies/actor_critic.py``,
  or its numpy twin ``rl/policies/numpy_policy.py``);
- GAE advantages and value targets: ``Postprocessing`` (``rl/sampling/trajectory.py``) calls
  ``compute_gae`` (``rl/sampling/postprocessing.py``) in the worker, per segment, bootstrapping from
  the value of the last observation and of truncated episodes' final ones;
- advantage standardization (``standardize_advantages``): per training batch in the plan's
  ``standardize_fields`` (``flow/train.py``), as RLlib does, or per minibatch in ``ppo_loss``,
  as Stable-Baselines3, CleanRL and OpenAI Baselines' ppo2 do;
- epochs of shuffled minibatches, gradient-norm clipping and Adam (eps 1e-5):
  ``ActorCriticPolicy.learn_on_batch`` (``rl/policies/actor_critic.py``, ``rl/learners/optim.py``);
- the clipped surrogate, the value loss and the entropy bonus: ``ppo_loss`` below;
- the new weights to every worker: ``train_one_step`` (``flow/train.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..errors import ConfigError
from ..flow import concat_batches, parallel_rollouts, report_metrics, standardize_fields, train_one_step
from ..rl.learners.schedule import check_schedule
from ..rl.policies.actor_critic import ActorCritic, ActorCriticPolicy
from ..session import Algorithm
from ._actor_critic import ON_POLICY_MODELS, ActorCriticLearner, ActorCriticWorkers
from ._config import OnPolicyConfig, algorithm_config, field
from ._recipe import Capabilities, Plan, Recipe, Run

__all__ = ["PPO", "PPOConfig", "ppo_loss"]

STANDARDIZE = ("batch", "minibatch", "none")


@algorithm_config(defaults={"lr": 3e-3, "rollout_fragment_length": 128})
class PPOConfig(OnPolicyConfig):
    minibatch_size: int = field(default=256, min=1)
    """Rows per SGD minibatch."""
    num_epochs: int = field(default=5, min=1)
    """Passes over each training batch."""
    clip_param: float = field(default=0.2, min=0)
    """Surrogate clip range (its first, when ``clip_param_schedule`` is set)."""
    clip_param_schedule: tuple[tuple[float, float], ...] | None = None
    """``((env_steps, clip), ...)``: the clip range over the env steps sampled, linear between the
    points, set before each iteration (Stable-Baselines3's ``clip_range: lin_0.1`` over a budget
    ``B`` is ``((0, 0.1), (B, 0))``)."""
    vf_clip_param: float | None = field(default=10.0, min=0, exclusive_min=True)
    """Value clip range (None: no value clipping)."""
    vf_loss_coeff: float = field(default=0.5, min=0)
    """Weight of the value loss."""
    entropy_coeff: float = field(default=0.0, min=0)
    """Weight of the entropy bonus."""
    standardize_advantages: str = "batch"
    """Scale advantages to mean 0 and std 1 over each training batch (``"batch"``, RLlib's way),
    over each SGD minibatch (``"minibatch"``: Stable-Baselines3, CleanRL), or not (``"none"``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.clip_param_schedule is not None:
            check_schedule("clip_param_schedule", self.clip_param_schedule)
            if self.multi_agent is not None:
                raise ConfigError("clip_param_schedule: not available with multi_agent (give each policy its "
                                  "clip_param)")  # fmt: skip
        if self.standardize_advantages not in STANDARDIZE:
            choices = ", ".join(map(repr, STANDARDIZE[:-1])) + f" or {STANDARDIZE[-1]!r}"
            raise ConfigError(f"standardize_advantages: must be {choices}, got {self.standardize_advantages!r}")
        # One row standardizes to 0: the policy would never move, without a word.
        sizes = {"batch": "train_batch_size", "minibatch": "minibatch_size"}
        name = sizes.get(self.standardize_advantages)
        if name is not None and (value := getattr(self, name)) < 2:
            raise ConfigError(f"{name}: must be >= 2 to standardize advantages per {self.standardize_advantages} "
                              f"(one row standardizes to 0), got {value}")  # fmt: skip


def ppo_loss(ac: ActorCritic, batch: Mapping[str, Any], config: PPOConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate, the (clipped) value loss and the entropy bonus, with KL and clip stats."""
    dist, values = ac(batch["obs"])
    logp = dist.log_prob(batch["actions"])
    ratio = torch.exp(logp - batch["action_logp"])
    adv = batch["advantages"]
    if config.standardize_advantages == "minibatch" and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # as SB3 and CleanRL: the sample std, eps 1e-8
    surrogate = torch.min(ratio * adv, torch.clamp(ratio, 1 - config.clip_param, 1 + config.clip_param) * adv)
    vf_loss = (values - batch["value_targets"]) ** 2
    if config.vf_clip_param is not None:
        old = batch["vf_preds"]
        clipped = old + torch.clamp(values - old, -config.vf_clip_param, config.vf_clip_param)
        vf_loss = torch.max(vf_loss, (clipped - batch["value_targets"]) ** 2)
    entropy = dist.entropy().mean()
    loss = -surrogate.mean() + config.vf_loss_coeff * vf_loss.mean() - config.entropy_coeff * entropy
    with torch.no_grad():
        log_ratio = logp - batch["action_logp"]
        kl = ((ratio - 1) - log_ratio).mean()  # the low-variance k3 estimator
        clip_frac = ((ratio - 1).abs() > config.clip_param).float().mean()
    return loss, {
        "total_loss": float(loss.detach()),
        "policy_loss": float(-surrogate.mean().detach()),
        "vf_loss": float(vf_loss.mean().detach()),
        "entropy": float(entropy.detach()),
        "kl": float(kl.detach()),
        "clip_fraction": float(clip_frac.detach()),
    }


def ppo_plan(run: Run[PPOConfig, ActorCriticPolicy, None]) -> Plan:
    """Rollouts from every worker in lock step, a batch of them, epochs of minibatches."""
    config, workers = run.config, run.workers
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    batches = concat_batches(rollouts, min_batch_size=config.train_batch_size)
    if config.standardize_advantages == "batch":
        batches = standardize_fields(batches, ["advantages"])
    trained = train_one_step(
        batches,
        run.learner,
        workers,
        num_epochs=config.num_epochs,
        minibatch_size=config.minibatch_size,
        seed=config.seed,
    )
    return report_metrics(trained)


RECIPE: Recipe[PPOConfig, ActorCriticPolicy, None] = Recipe(
    name="ppo", config=PPOConfig, family="actor_critic", plan=ppo_plan, models=ON_POLICY_MODELS,
    workers=ActorCriticWorkers(ppo_loss), learner=ActorCriticLearner(ppo_loss, ActorCriticPolicy),
    capabilities=Capabilities(recurrent=True, numpy_inference=True, learner_precision=True, rmsprop=True),
    live_fields=("clip_param", "vf_clip_param", "vf_loss_coeff", "entropy_coeff", "num_epochs", "minibatch_size",
                 "train_batch_size"),
    schedules=(("clip_param", "clip_param_schedule"),),
)  # fmt: skip


class PPO(Algorithm):
    """PPO (the module docstring says where each part lives)."""

    recipe = RECIPE
