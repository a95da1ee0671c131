"""Ape-X DQN (Horgan et al. 2018): many workers with their own fixed
epsilons, prioritized replay sharded over replay actors, and one learner
that trains while sampling and replay go on.

Plan (RLlib Flow, Fig. 7: three asynchronous pieces, here two branches)::

    store: parallel_rollouts(async) -> store_to_replay_buffer(shards)
               -> update_worker_weights(max_delay)
    train: replay(shards, num_async) -> train_async (learner thread)
               -> update_priorities (back to each batch's shard) -> update_target_network
    concurrently([store, train], async) -> once_per_steps -> report_metrics

Each replay shard is a ``ReplayActor`` process; a shard that dies is
restarted empty (``max_replay_restarts``) and refills from the store branch.

Where each part lives: the per-worker epsilons (``apex_epsilon``, ``rl/q_learning.py``);
the replay shards (``ReplayActor``, ``rl/replay_actor.py``, each a ``PrioritizedReplayBuffer`` by default);
the learner and its loss (DQN's ``DQNLearner``); priorities back to each batch's shard
(``update_priorities``, ``flow/learner.py``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

from ..actors import Runtime
from ..flow import concurrently, once_per_steps, parallel_rollouts, report_metrics
from ..flow.learner import train_async, update_priorities, update_target_network, update_worker_weights
from ..flow.replay import replay, store_to_replay_buffer
from ..rl.policy import PolicyFactory
from ..rl.q_learning import apex_policy
from ..rl.replay_actor import ReplayActor
from ..rl.worker_set import WorkerSet
from ._config import algorithm_config, field
from .dqn import DQN, DQNConfig

__all__ = ["ApexDQN", "ApexDQNConfig"]


@algorithm_config
class ApexDQNConfig(DQNConfig):
    num_replay_shards: int = field(2, min=1)
    """Replay actor processes; the buffer capacity is split among them."""
    max_replay_restarts: int = field(2, min=0)
    """How often each replay shard may be replaced after it dies."""
    num_async: int = field(2, min=1)
    """Sample requests in flight per worker."""
    replay_num_async: int = field(2, min=1)
    """Replay requests in flight per shard."""
    learner_queue_size: int = field(4, min=1)
    """Replayed batches waiting for the learner."""
    max_weight_sync_delay: int = field(256, min=1)
    """Rows a worker samples before it gets fresh weights."""
    epsilon_base: float = field(0.4, min=0, max=1)
    """Worker i of N explores with epsilon_base ** (1 + epsilon_alpha * i / (N - 1))."""
    epsilon_alpha: float = field(7.0, min=0)
    """See epsilon_base."""


class ApexDQN(DQN):
    config_class = ApexDQNConfig
    name = "apex"
    config: ApexDQNConfig

    def policy_factory(self) -> PolicyFactory:
        c = self.config
        return functools.partial(  # type: ignore[return-value]
            apex_policy,
            num_workers=max(c.num_workers, 1),
            base=c.epsilon_base,
            alpha=c.epsilon_alpha,
            model=c.model,
            hidden=c.hidden,
            dueling=c.dueling,
            device=c.worker_device,
        )

    async def setup(self, runtime: Runtime) -> None:
        c = self.config
        shards = c.num_replay_shards
        self.replay_actors = list(
            await asyncio.gather(
                *(
                    runtime.spawn(
                        ReplayActor,
                        max(1, c.buffer_size // shards),
                        prioritized=c.prioritized_replay,
                        alpha=c.prioritized_replay_alpha,
                        beta=c.prioritized_replay_beta,
                        learning_starts=max(1, c.learning_starts // shards),
                        frame_dedup=c.replay_frame_dedup,
                        seed=c.seed * 101 + i,
                        name=f"apex-replay-{i + 1}",
                        max_restarts=c.max_replay_restarts,
                    )
                    for i in range(shards)
                )
            )
        )
        self.replay_shards = WorkerSet(self.replay_actors, timeout_s=c.worker_timeout_s, env="its replay shard")

    async def extra_state(self) -> Any:
        if not self.config.checkpoint_replay_buffer:
            return None
        return await self.replay_shards.get_states()

    async def load_extra_state(self, state: Any) -> None:
        if state is not None:
            await self.replay_shards.set_states(state)

    def execution_plan(self, workers: WorkerSet, learner: Any, config: Any) -> AsyncIterator[dict[str, Any]]:
        shards = self.replay_shards
        rollouts = parallel_rollouts(workers, mode="async", num_async=config.num_async)
        stored = store_to_replay_buffer(rollouts, shards)
        store_op = update_worker_weights(stored, learner, workers, max_delay_steps=config.max_weight_sync_delay)
        replayed = replay(shards, config.train_batch_size, num_async=config.replay_num_async)
        trained = update_priorities(train_async(replayed, learner, queue_size=config.learner_queue_size))
        train_op = update_target_network(trained, learner, config.target_network_update_freq)
        steps = concurrently([store_op, train_op], "async", output_indexes=[1])
        return report_metrics(once_per_steps(steps, config.timesteps_per_iteration))
