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
from typing import Any

from ..rl.continuous import SACLearner, SquashedGaussianPolicy
from ..rl.policy import PolicyFactory
from ._config import algorithm_config, field
from ._off_policy import ReplayAlgorithm, ReplayConfig

__all__ = ["SAC", "SACConfig"]


@algorithm_config
class SACConfig(ReplayConfig):
    env: Any = "Pendulum-v1"
    """A gymnasium id, or a callable that returns a gymnasium.Env (Box actions)."""
    num_envs_per_worker: int = field(1, min=1)
    """Sub-environments stepped by each worker."""
    rollout_fragment_length: int = field(8, min=1)
    """Steps per sub-environment in one ``sample()`` call."""
    hidden: tuple[int, ...] = (128, 128)
    """Hidden layer sizes of the actor and the critics."""
    lr: float = field(1e-3, min=0, exclusive_min=True)
    """Learning rate of the actor, the critics and the temperature."""
    max_grad_norm: float | None = field(None, min=0, exclusive_min=True)
    """Clip each step's gradient norm (critics, actor, temperature) to this; None: no clipping."""
    tau: float = field(0.005, min=0, max=1)
    """Soft target update rate."""
    initial_alpha: float = field(1.0, min=0, exclusive_min=True)
    """Starting entropy temperature."""
    target_entropy: float | None = None
    """Entropy the temperature aims for (None: minus the action dimension)."""
    train_batch_size: int = field(128, min=1)
    """Rows per learner step."""
    training_intensity: float = field(128.0, min=0, exclusive_min=True)
    """Rows trained per row sampled: one learner step per env step by default."""
    learning_starts: int = field(1_000, min=0)
    """Transitions stored (with uniform random actions) before training begins."""


class SAC(ReplayAlgorithm):
    config_class = SACConfig
    supports_learner_precision = False
    name = "sac"
    family = "continuous"
    config: SACConfig

    def model_options(self) -> dict[str, Any]:
        return {"hidden": self.config.hidden, "gaussian": True, "num_q": 2}

    def policy_factory(self) -> PolicyFactory:
        c = self.config
        random_steps = c.learning_starts // max(c.num_workers, 1)
        return functools.partial(  # type: ignore[return-value]
            SquashedGaussianPolicy, model=c.model, hidden=c.hidden, random_steps=random_steps, device=c.worker_device
        )

    def worker_options(self) -> dict[str, Any]:
        return {"postprocess": "transitions", "n_step": self.config.n_step}

    def make_learner(self) -> SACLearner:
        c = self.config
        return SACLearner(
            self.observation_space,
            self.action_space,
            model=c.model,
            device=c.learner_device,
            max_nonfinite_updates=c.max_nonfinite_updates,
            hidden=c.hidden,
            actor_lr=c.lr,
            critic_lr=c.lr,
            alpha_lr=c.lr,
            initial_alpha=c.initial_alpha,
            target_entropy=c.target_entropy,
            tau=c.tau,
            seed=c.seed,
            max_grad_norm=c.max_grad_norm,
        )
