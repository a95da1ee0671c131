"""DQN (Mnih et al. 2015) with double Q, dueling heads, n-step returns and
prioritized replay.

Plan: the replay plan of ``_off_policy.py`` (store and train branches in a
weighted round robin), with ``update_target_network`` copying the online
network into the target every ``target_network_update_freq`` rows trained.

Defaults are tuned for CartPole-sized tasks: 2 workers x 4 envs x 4 steps
per round, 16 rows trained per row sampled (8 learner steps of 64 per
round), 3-step returns, prioritized replay. Measured on CartPole-v1 (mean
return of the last 100 episodes >= 150): seeds 0/1: 18.4k / 18.4k steps, 18-22 s.

Where each part lives: epsilon-greedy acting in the workers (``EpsilonGreedyPolicy``,
``rl/q_learning.py``); n-step transitions built there too (``compute_nstep``,
``rl/postprocessing.py``, from ``rl/trajectory.py``); the replay buffers, uniform and
prioritized, with frames stored once (``rl/replay_buffer.py``, ``rl/sum_tree.py``,
``rl/frame_store.py``); the store and train branches (``_off_policy.py``); the double-Q
Huber loss with importance weights and the target network (``DQNLearner``,
``rl/q_learning.py``); the dueling head (``QNet``, ``rl/models/builtin.py``).
"""

from __future__ import annotations

import functools
from typing import Any

from ..rl.policy import PolicyFactory
from ..rl.q_learning import DQNLearner, EpsilonGreedyPolicy
from ._config import algorithm_config, check_epsilon, field
from ._off_policy import ReplayAlgorithm, ReplayConfig

__all__ = ["DQN", "DQNConfig"]


@algorithm_config
class DQNConfig(ReplayConfig):
    lr: float = field(1e-3, min=0, exclusive_min=True)
    """Adam learning rate."""
    num_envs_per_worker: int = field(4, min=1)
    """Sub-environments stepped by each worker."""
    rollout_fragment_length: int = field(4, min=1)
    """Steps per sub-environment in one ``sample()`` call."""
    hidden: tuple[int, ...] = (128, 128)
    """Hidden layer sizes of the Q network."""
    max_grad_norm: float | None = field(10.0, min=0, exclusive_min=True)
    """Clip the global gradient norm to this (None: no clipping)."""
    dueling: bool = True
    """Dueling heads: Q = V + A - mean(A)."""
    double_q: bool = True
    """Pick the next action with the online network, value it with the target network."""
    n_step: int = field(3, min=1)
    """Steps summed into each return before bootstrapping."""
    buffer_size: int = field(50_000, min=1)
    """Replay capacity in transitions."""
    prioritized_replay: bool = True
    """Proportional prioritized replay (else uniform)."""
    train_batch_size: int = field(64, min=1)
    """Rows per learner step."""
    training_intensity: float = field(16.0, min=0, exclusive_min=True)
    """Rows trained per row sampled (sets the round-robin weight)."""
    target_network_update_freq: int = field(4_000, min=1)
    """Rows trained between target network updates."""
    epsilon: tuple[float, ...] = (1.0, 0.02)
    """Exploration: (initial, final) epsilon of a linear schedule."""
    epsilon_timesteps: int = field(10_000, min=0)
    """Env steps (over all workers) over which epsilon decays."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_epsilon("epsilon", self.epsilon)


class DQN(ReplayAlgorithm):
    config_class = DQNConfig
    name = "dqn"
    family = "q"
    config: DQNConfig

    @property
    def target_network_update_freq(self) -> int:  # type: ignore[override]
        return self.config.target_network_update_freq

    def model_options(self) -> dict[str, Any]:
        return {"hidden": self.config.hidden, "dueling": self.config.dueling}

    def policy_factory(self) -> PolicyFactory:
        c = self.config
        initial, final = c.epsilon
        per_worker = c.epsilon_timesteps // max(c.num_workers, 1)
        return functools.partial(  # type: ignore[return-value]
            EpsilonGreedyPolicy, model=c.model, hidden=c.hidden, dueling=c.dueling,
            epsilon=(initial, final, per_worker), device=c.worker_device,
        )  # fmt: skip

    def worker_options(self) -> dict[str, Any]:
        return {"postprocess": "transitions", "n_step": self.config.n_step}

    def make_learner(self) -> DQNLearner:
        c = self.config
        return DQNLearner(
            self.observation_space,
            self.action_space,
            model=c.model,
            device=c.learner_device,
            max_nonfinite_updates=c.max_nonfinite_updates,
            precision=c.learner_precision,
            hidden=c.hidden,
            dueling=c.dueling,
            double_q=c.double_q,
            lr=c.lr,
            max_grad_norm=c.max_grad_norm,
            seed=c.seed,
        )
