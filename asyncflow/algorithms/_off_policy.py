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

from typing import Any

from ..actors import Runtime
from ..errors import CheckpointError
from ..flow import concurrently, once_per_steps, parallel_rollouts, report_metrics
from ..flow.learner import learn_on_batches, sync_weights, update_priorities, update_target_network
from ..flow.replay import replay, store_to_replay_buffer
from ..rl.data.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
from ..rl.policy import Learner
from ._config import AlgorithmConfig, algorithm_config, field
from ._recipe import Plan, Resources, Run

__all__ = ["REPLAY_BUFFER", "ReplayConfig", "replay_plan", "train_weight"]


@algorithm_config
class ReplayConfig(AlgorithmConfig):
    n_step: int = field(default=1, min=1)
    """Steps summed into each return before bootstrapping."""
    buffer_size: int = field(default=100_000, min=1)
    """Replay capacity in transitions."""
    prioritized_replay: bool = False
    """Proportional prioritized replay (else uniform)."""
    prioritized_replay_alpha: float = field(default=0.6, min=0)
    """How strongly priorities shape sampling (0: uniform)."""
    prioritized_replay_beta: float = field(default=0.4, min=0, max=1)
    """Importance-weight exponent."""
    learning_starts: int = field(default=1_000, min=0)
    """Transitions stored before training begins."""
    train_batch_size: int = field(default=256, min=1)
    """Rows per learner step."""
    training_intensity: float = field(default=256.0, min=0, exclusive_min=True)
    """Rows trained per row sampled (sets the round-robin weight)."""
    timesteps_per_iteration: int = field(default=1_000, min=1)
    """Env steps sampled between two results."""
    checkpoint_replay_buffer: bool = True
    """Save the replay buffer's contents with each checkpoint (turn off for big buffers)."""
    replay_frame_dedup: bool = True
    """Stacked-frame observations (Atari's ``(4, 84, 84)`` uint8) are stored one frame once, the stacks
    rebuilt when sampled (``frame_store.py``); False: each row as it came."""

    def target_update_freq(self) -> int | None:
        """Rows trained between copies of the online network into the target (None: the learner
        updates its targets itself, softly)."""
        return None


def train_weight(config: ReplayConfig) -> int:
    """Learner steps per sampling round (``training_intensity`` rows trained per row sampled)."""
    rows = max(config.rollouts.num_workers, 1) * config.rollouts.num_envs_per_worker * config.rollouts.fragment_length
    return max(1, round(config.training_intensity * rows / config.train_batch_size))


async def _open_buffer(config: ReplayConfig, runtime: Runtime) -> ReplayBuffer:
    c = config
    if c.prioritized_replay:
        return PrioritizedReplayBuffer(c.buffer_size, alpha=c.prioritized_replay_alpha, beta=c.prioritized_replay_beta,
                                       seed=c.seed, frame_dedup=c.replay_frame_dedup)  # fmt: skip
    return ReplayBuffer(c.buffer_size, seed=c.seed, frame_dedup=c.replay_frame_dedup)


async def _save_buffer(config: ReplayConfig, buffer: ReplayBuffer) -> ReplayBuffer | None:
    return buffer if config.checkpoint_replay_buffer else None


async def _load_buffer(config: ReplayConfig, buffer: ReplayBuffer, state: Any) -> ReplayBuffer:
    if not isinstance(state, ReplayBuffer):
        raise CheckpointError(f"the checkpoint's replay buffer is a {type(state).__name__}")
    return state


REPLAY_BUFFER: Resources[Any, ReplayBuffer] = Resources(open=_open_buffer, save=_save_buffer, load=_load_buffer)
"""A replay buffer in the driver, kept by checkpoints unless ``checkpoint_replay_buffer=False``."""


def replay_plan(run: Run[ReplayConfig, Learner, ReplayBuffer]) -> Plan:
    """The store and train branches in a weighted round robin (the module docstring), with
    DQN's periodic target copy (``target_update_freq``; SAC and TD3 update softly, inside the learner)."""
    config, workers, learner, buffer = run.config, run.workers, run.learner, run.resources
    k = train_weight(config)
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    store_op = store_to_replay_buffer(rollouts, buffer, learning_starts=config.learning_starts)
    trained = learn_on_batches(replay(buffer, config.train_batch_size), learner)
    trained = update_priorities(trained)
    train_op = sync_weights(trained, learner, workers, every=k)
    if (freq := config.target_update_freq()) is not None:
        train_op = update_target_network(train_op, learner, freq)  # type: ignore[arg-type]
    steps = concurrently([store_op, train_op], "round_robin", output_indexes=[1], round_robin_weights=[1, k])
    return report_metrics(once_per_steps(steps, config.timesteps_per_iteration))
