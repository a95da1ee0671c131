"""The replay-based plan that DQN, SAC, DDPG and TD3 share, and its config fields.

Plan (RLlib Flow, Fig. 5: two branches in a weighted round robin)::

    store: parallel_rollouts -> store_to_replay_buffer
    train: replay -> learn_on_batches -> update_priorities -> sync_weights [-> update_target_network]
    concurrently([store, train], round_robin, weights [1, k]) -> once_per_steps -> report_metrics

``k`` comes from ``training_intensity``, the rows trained per row sampled:
one round samples ``num_workers * num_envs_per_worker *
rollout_fragment_length`` rows, then runs ``k`` learner steps of
``train_batch_size`` rows. The round robin keeps a run deterministic for a
seed: the same samples are trained in the same order every time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..actors import Runtime
from ..flow import concurrently, once_per_steps, parallel_rollouts, report_metrics
from ..flow.learner import learn_on_batches, sync_weights, update_priorities, update_target_network
from ..flow.replay import replay, store_to_replay_buffer
from ..rl.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
from ..rl.worker_set import WorkerSet
from ._base import Algorithm
from ._config import AlgorithmConfig, algorithm_config, field

__all__ = ["ReplayAlgorithm", "ReplayConfig"]


@algorithm_config
class ReplayConfig(AlgorithmConfig):
    n_step: int = field(1, min=1)
    """Steps summed into each return before bootstrapping."""
    buffer_size: int = field(100_000, min=1)
    """Replay capacity in transitions."""
    prioritized_replay: bool = False
    """Proportional prioritized replay (else uniform)."""
    prioritized_replay_alpha: float = field(0.6, min=0)
    """How strongly priorities shape sampling (0: uniform)."""
    prioritized_replay_beta: float = field(0.4, min=0, max=1)
    """Importance-weight exponent."""
    learning_starts: int = field(1_000, min=0)
    """Transitions stored before training begins."""
    train_batch_size: int = field(256, min=1)
    """Rows per learner step."""
    training_intensity: float = field(256.0, min=0, exclusive_min=True)
    """Rows trained per row sampled (sets the round-robin weight)."""
    timesteps_per_iteration: int = field(1_000, min=1)
    """Env steps sampled between two results."""
    checkpoint_replay_buffer: bool = True
    """Save the replay buffer's contents with each checkpoint (turn off for big buffers)."""
    replay_frame_dedup: bool = True
    """Stacked-frame observations (Atari's ``(4, 84, 84)`` uint8) are stored one frame once, the stacks
    rebuilt when sampled (``frame_store.py``); False: each row as it came."""


class ReplayAlgorithm(Algorithm):
    """Base of the replay-based algorithms: a local buffer and the round-robin plan."""

    use_critic = False
    config: ReplayConfig
    target_network_update_freq: int | None = None

    async def setup(self, runtime: Runtime) -> None:
        c = self.config
        self.buffer: ReplayBuffer = (
            PrioritizedReplayBuffer(
                c.buffer_size,
                alpha=c.prioritized_replay_alpha,
                beta=c.prioritized_replay_beta,
                seed=c.seed,
                frame_dedup=c.replay_frame_dedup,
            )
            if c.prioritized_replay
            else ReplayBuffer(c.buffer_size, seed=c.seed, frame_dedup=c.replay_frame_dedup)
        )

    async def extra_state(self) -> Any:
        return self.buffer if self.config.checkpoint_replay_buffer else None

    async def load_extra_state(self, state: Any) -> None:
        if state is not None:
            self.buffer = state

    @property
    def train_weight(self) -> int:
        """Learner steps per sampling round."""
        c = self.config
        rows = max(c.num_workers, 1) * c.num_envs_per_worker * c.rollout_fragment_length
        return max(1, round(c.training_intensity * rows / c.train_batch_size))

    def execution_plan(self, workers: WorkerSet, learner: Any, config: Any) -> AsyncIterator[dict[str, Any]]:
        k = self.train_weight
        rollouts = parallel_rollouts(workers, mode="bulk_sync")
        store_op = store_to_replay_buffer(rollouts, self.buffer, learning_starts=config.learning_starts)
        trained = learn_on_batches(replay(self.buffer, config.train_batch_size), learner)
        trained = update_priorities(trained)
        train_op = sync_weights(trained, learner, workers, every=k)
        if self.target_network_update_freq is not None:  # DQN's periodic copy; SAC and TD3 update softly
            train_op = update_target_network(train_op, learner, self.target_network_update_freq)
        steps = concurrently([store_op, train_op], "round_robin", output_indexes=[1], round_robin_weights=[1, k])
        return report_metrics(once_per_steps(steps, config.timesteps_per_iteration))
