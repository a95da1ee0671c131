"""TD3 (Fujimoto et al. 2018) and DDPG (Lillicrap et al. 2016) on ``Box`` actions.

TD3 adds three things to DDPG: twin critics (the smaller target wins),
smoothing noise on the target action, and actor updates only every
``policy_delay`` critic updates. ``DDPGConfig`` is ``TD3Config`` with the
three switched off. Plan: the replay plan of ``_off_policy.py``; targets are
updated softly inside the learner.

Where each part lives: acting with Gaussian exploration noise (``DeterministicPolicy``,
``rl/continuous.py``); the clipped double-Q critic step, the delayed actor step, target
smoothing and the soft target updates (``TD3Learner.learn_on_batch``, ``rl/continuous.py``);
replay and the plan (``_off_policy.py``).
"""

from __future__ import annotations

import functools
from typing import Any

from ..rl.continuous import DeterministicPolicy, TD3Learner
from ..rl.policy import PolicyFactory
from ._config import algorithm_config, field
from ._off_policy import ReplayAlgorithm, ReplayConfig

__all__ = ["DDPG", "TD3", "DDPGConfig", "TD3Config"]


@algorithm_config
class TD3Config(ReplayConfig):
    env: Any = "Pendulum-v1"
    """A gymnasium id, or a callable that returns a gymnasium.Env (Box actions)."""
    num_envs_per_worker: int = field(1, min=1)
    """Sub-environments stepped by each worker."""
    rollout_fragment_length: int = field(8, min=1)
    """Steps per sub-environment in one ``sample()`` call."""
    hidden: tuple[int, ...] = (128, 128)
    """Hidden layer sizes of the actor and the critics."""
    lr: float = field(1e-3, min=0, exclusive_min=True)
    """Learning rate of the actor and the critics."""
    max_grad_norm: float | None = field(None, min=0, exclusive_min=True)
    """Clip each step's gradient norm (critics, actor) to this; None: no clipping."""
    tau: float = field(0.005, min=0, max=1)
    """Soft target update rate."""
    twin_q: bool = True
    """Two critics; targets use the smaller."""
    policy_delay: int = field(2, min=1)
    """Critic updates per actor (and target) update."""
    target_noise: float = field(0.2, min=0)
    """Std of the smoothing noise on target actions (normalized units)."""
    target_noise_clip: float = field(0.5, min=0)
    """Bound of that noise."""
    exploration_noise: float = field(0.1, min=0)
    """Std of the Gaussian noise the workers add (normalized units)."""
    train_batch_size: int = field(128, min=1)
    """Rows per learner step."""
    training_intensity: float = field(128.0, min=0, exclusive_min=True)
    """Rows trained per row sampled: one learner step per env step by default."""
    learning_starts: int = field(1_000, min=0)
    """Transitions stored (with uniform random actions) before training begins."""


@algorithm_config
class DDPGConfig(TD3Config):
    twin_q: bool = False
    """Two critics; targets use the smaller."""
    policy_delay: int = field(1, min=1)
    """Critic updates per actor (and target) update."""
    target_noise: float = field(0.0, min=0)
    """Std of the smoothing noise on target actions (normalized units)."""


class TD3(ReplayAlgorithm):
    config_class = TD3Config
    supports_learner_precision = False
    name = "td3"
    family = "continuous"
    config: TD3Config

    def model_options(self) -> dict[str, Any]:
        return {"hidden": self.config.hidden, "gaussian": False, "num_q": 2 if self.config.twin_q else 1}

    def policy_factory(self) -> PolicyFactory:
        c = self.config
        return functools.partial(  # type: ignore[return-value]
            DeterministicPolicy,
            model=c.model,
            hidden=c.hidden,
            random_steps=c.learning_starts // max(c.num_workers, 1),
            exploration_noise=c.exploration_noise,
            num_q=self.model_options()["num_q"],
            device=c.worker_device,
        )

    def worker_options(self) -> dict[str, Any]:
        return {"postprocess": "transitions", "n_step": self.config.n_step}

    def make_learner(self) -> TD3Learner:
        c = self.config
        return TD3Learner(
            self.observation_space,
            self.action_space,
            model=c.model,
            device=c.learner_device,
            max_nonfinite_updates=c.max_nonfinite_updates,
            hidden=c.hidden,
            actor_lr=c.lr,
            critic_lr=c.lr,
            tau=c.tau,
            twin_q=c.twin_q,
            policy_delay=c.policy_delay,
            target_noise=c.target_noise,
            target_noise_clip=c.target_noise_clip,
            seed=c.seed,
            max_grad_norm=c.max_grad_norm,
        )


class DDPG(TD3):
    config_class = DDPGConfig
    name = "ddpg"
