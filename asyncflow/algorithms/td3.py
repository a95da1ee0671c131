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

from ..rl.continuous import DeterministicPolicy, TD3Learner
from ..rl.replay_buffer import ReplayBuffer
from ..session import Algorithm
from ._config import algorithm_config, field
from ._off_policy import REPLAY_BUFFER, ReplayConfig, replay_plan
from ._recipe import Recipe, Spaces, Workers, single_model

__all__ = ["DDPG", "TD3", "DDPGConfig", "TD3Config"]


@algorithm_config(defaults={"env": "Pendulum-v1", "num_envs_per_worker": 1, "rollout_fragment_length": 8, "lr": 1e-3,
                            "max_grad_norm": None, "train_batch_size": 128, "training_intensity": 128.0})  # fmt: skip
class TD3Config(ReplayConfig):
    """``lr`` is the rate of the actor and the critics; ``max_grad_norm`` (None: no clipping)
    clips each of their steps; ``training_intensity`` 128: one learner step per env step; the
    first ``learning_starts`` transitions come from uniform random actions."""

    vector_hidden = (128, 128)

    tau: float = field(default=0.005, min=0, max=1)
    """Soft target update rate."""
    twin_q: bool = True
    """Two critics; targets use the smaller."""
    policy_delay: int = field(default=2, min=1)
    """Critic updates per actor (and target) update."""
    target_noise: float = field(default=0.2, min=0)
    """Std of the smoothing noise on target actions (normalized units)."""
    target_noise_clip: float = field(default=0.5, min=0)
    """Bound of that noise."""
    exploration_noise: float = field(default=0.1, min=0)
    """Std of the Gaussian noise the workers add (normalized units)."""


@algorithm_config(defaults={"twin_q": False, "policy_delay": 1, "target_noise": 0.0})
class DDPGConfig(TD3Config):
    """TD3's fields with its three additions switched off (one critic, no delay, no smoothing)."""


def td3_workers(config: TD3Config, spaces: Spaces) -> Workers:
    """Deterministic workers with Gaussian exploration noise (uniform random actions first)."""
    c = config
    policy = functools.partial(DeterministicPolicy, model=c.model, hidden=c.vector_hidden,
                               random_steps=c.learning_starts // max(c.rollouts.num_workers, 1),
                               exploration_noise=c.exploration_noise, num_q=2 if c.twin_q else 1,
                               device=c.rollouts.device)  # fmt: skip
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


def td3_learner(config: TD3Config, spaces: Spaces) -> TD3Learner:
    """The (twin) critics, the delayed actor, target smoothing, soft target updates."""
    c, part = config, config.learner
    return TD3Learner(spaces.observation, spaces.action, model=c.model, device=part.device,
                      max_nonfinite_updates=part.max_nonfinite_updates, hidden=c.vector_hidden, actor_lr=part.lr,
                      critic_lr=part.lr, tau=c.tau, twin_q=c.twin_q, policy_delay=c.policy_delay,
                      target_noise=c.target_noise, target_noise_clip=c.target_noise_clip, seed=c.seed,
                      max_grad_norm=part.max_grad_norm)  # fmt: skip


TD3_MODELS = single_model("continuous", gaussian=False, num_q=lambda c: 2 if c.twin_q else 1)

RECIPE: Recipe[TD3Config, TD3Learner, ReplayBuffer] = Recipe(
    name="td3", config=TD3Config, family="continuous", plan=replay_plan, workers=td3_workers, learner=td3_learner,
    models=TD3_MODELS, resources=REPLAY_BUFFER,
)  # fmt: skip

DDPG_RECIPE: Recipe[DDPGConfig, TD3Learner, ReplayBuffer] = Recipe(
    name="ddpg", config=DDPGConfig, family="continuous", plan=replay_plan, workers=td3_workers, learner=td3_learner,
    models=TD3_MODELS, resources=REPLAY_BUFFER,
)  # fmt: skip


class TD3(Algorithm):
    """TD3 (the module docstring says where each part lives)."""

    recipe = RECIPE


class DDPG(Algorithm):
    """DDPG: TD3 with its three additions switched off."""

    recipe = DDPG_RECIPE
