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

from ..rl.q_learning import DQNLearner, EpsilonGreedyPolicy
from ..rl.replay_buffer import ReplayBuffer
from ..session import Algorithm
from ._config import algorithm_config, check_epsilon, field
from ._off_policy import REPLAY_BUFFER, ReplayConfig, replay_plan
from ._recipe import Capabilities, Recipe, Spaces, Workers, single_model

__all__ = ["DQN", "DQN_CAPABILITIES", "DQN_MODELS", "DQNConfig", "dqn_learner"]


@algorithm_config(defaults={"lr": 1e-3, "num_envs_per_worker": 4, "rollout_fragment_length": 4, "max_grad_norm": 10.0,
                            "n_step": 3, "buffer_size": 50_000, "prioritized_replay": True, "train_batch_size": 64,
                            "training_intensity": 16.0})  # fmt: skip
class DQNConfig(ReplayConfig):
    vector_hidden = (128, 128)

    dueling: bool = True
    """Dueling heads: Q = V + A - mean(A)."""
    double_q: bool = True
    """Pick the next action with the online network, value it with the target network."""
    target_network_update_freq: int = field(default=4_000, min=1)
    """Rows trained between target network updates."""
    epsilon: tuple[float, ...] = (1.0, 0.02)
    """Exploration: (initial, final) epsilon of a linear schedule."""
    epsilon_timesteps: int = field(default=10_000, min=0)
    """Env steps (over all workers) over which epsilon decays."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_epsilon("epsilon", self.epsilon)

    def target_update_freq(self) -> int | None:
        """``target_network_update_freq``."""
        return self.target_network_update_freq


def dqn_workers(config: DQNConfig, spaces: Spaces) -> Workers:
    """Epsilon-greedy workers (epsilon decays over each worker's share of the steps), n-step transitions."""
    c = config
    initial, final = c.epsilon
    per_worker = c.epsilon_timesteps // max(c.rollouts.num_workers, 1)
    policy = functools.partial(EpsilonGreedyPolicy, model=c.model, hidden=c.vector_hidden, dueling=c.dueling,
                               epsilon=(initial, final, per_worker), device=c.rollouts.device)  # fmt: skip
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


def dqn_learner(config: DQNConfig, spaces: Spaces) -> DQNLearner:
    """The double-Q, dueling learner with its target network."""
    c, part = config, config.learner
    return DQNLearner(spaces.observation, spaces.action, model=c.model, device=part.device,
                      max_nonfinite_updates=part.max_nonfinite_updates, precision=part.precision,
                      hidden=c.vector_hidden, dueling=c.dueling, double_q=c.double_q, lr=part.lr,
                      max_grad_norm=part.max_grad_norm, seed=c.seed)  # fmt: skip


DQN_MODELS = single_model("q", dueling=lambda c: c.dueling)
DQN_CAPABILITIES = Capabilities(learner_precision=True)

RECIPE: Recipe[DQNConfig, DQNLearner, ReplayBuffer] = Recipe(
    name="dqn", config=DQNConfig, family="q", plan=replay_plan, models=DQN_MODELS, workers=dqn_workers,
    learner=dqn_learner, resources=REPLAY_BUFFER, capabilities=DQN_CAPABILITIES,
)  # fmt: skip


class DQN(Algorithm):
    """DQN (the module docstring says where each part lives)."""

    recipe = RECIPE
