"""SAC (Haarnoja et al. 2018): soft actor-critic with twin Q networks,
soft target updates and automatic entropy tuning, on ``Box`` actions.

Plan: the replay plan of ``_off_policy.py``; the learner updates its target
critics softly (``tau``) after every step, so there is no separate target
update operator.

Where each part lives: acting with a squashed Gaussian (``SquashedGaussianPolicy``,
``rl/continuous.py``); the twin-critic, actor and temperature steps and the soft target update
(``SACLearner.learn_on_batch``, ``rl/continuous.py``); replay and the plan (``_off_policy.py``).
"""

from __future__ import annotations

import functools

from ..rl.continuous import SACLearner, SquashedGaussianPolicy
from ..rl.replay_buffer import ReplayBuffer
from ..session import Algorithm
from ._config import algorithm_config, field
from ._off_policy import REPLAY_BUFFER, ReplayConfig, replay_plan
from ._recipe import Recipe, Spaces, Workers, single_model

__all__ = ["SAC", "SACConfig"]


@algorithm_config(defaults={"env": "Pendulum-v1", "num_envs_per_worker": 1, "rollout_fragment_length": 8, "lr": 1e-3,
                            "max_grad_norm": None, "train_batch_size": 128, "training_intensity": 128.0})  # fmt: skip
class SACConfig(ReplayConfig):
    """``lr`` is the rate of the actor, the critics and the temperature; ``max_grad_norm`` (None:
    no clipping) clips each of their steps; ``training_intensity`` 128: one learner step per env
    step; the first ``learning_starts`` transitions come from uniform random actions."""

    vector_hidden = (128, 128)

    tau: float = field(default=0.005, min=0, max=1)
    """Soft target update rate."""
    initial_alpha: float = field(default=1.0, min=0, exclusive_min=True)
    """Starting entropy temperature."""
    target_entropy: float | None = None
    """Entropy the temperature aims for (None: minus the action dimension)."""


def sac_workers(config: SACConfig, spaces: Spaces) -> Workers:
    """Squashed-Gaussian workers (uniform random actions for their share of ``learning_starts``)."""
    c = config
    random_steps = c.learning_starts // max(c.rollouts.num_workers, 1)
    policy = functools.partial(SquashedGaussianPolicy, model=c.model, hidden=c.vector_hidden, random_steps=random_steps,
                               device=c.rollouts.device)  # fmt: skip
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


def sac_learner(config: SACConfig, spaces: Spaces) -> SACLearner:
    """Twin critics, the actor and the temperature, with soft target updates."""
    c, part = config, config.learner
    return SACLearner(spaces.observation, spaces.action, model=c.model, device=part.device,
                      max_nonfinite_updates=part.max_nonfinite_updates, hidden=c.vector_hidden, actor_lr=part.lr,
                      critic_lr=part.lr, alpha_lr=part.lr, initial_alpha=c.initial_alpha,
                      target_entropy=c.target_entropy, tau=c.tau, seed=c.seed,
                      max_grad_norm=part.max_grad_norm)  # fmt: skip


RECIPE: Recipe[SACConfig, SACLearner, ReplayBuffer] = Recipe(
    name="sac", config=SACConfig, family="continuous", plan=replay_plan, workers=sac_workers, learner=sac_learner,
    models=single_model("continuous", gaussian=True, num_q=2), resources=REPLAY_BUFFER,
)  # fmt: skip


class SAC(Algorithm):
    """SAC (the module docstring says where each part lives)."""

    recipe = RECIPE
