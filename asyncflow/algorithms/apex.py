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

Where each part lives: the per-worker epsilons (``apex_epsilon``, ``rl/policies/epsilon_greedy.py``);
the replay shards (``ReplayActor``, ``rl/data/replay_actor.py``, each a ``PrioritizedReplayBuffer`` by default);
the learner and its loss (DQN's ``DQNLearner``); priorities back to each batch's shard
(``update_priorities``, ``flow/learner.py``).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from ..actors import Runtime
from ..errors import ConfigError
from ..flow import concurrently, once_per_steps, parallel_rollouts, report_metrics
from ..flow.learner import train_async, update_priorities, update_target_network, update_worker_weights
from ..flow.replay import replay, store_to_replay_buffer
from ..rl.data.replay_actor import ReplayActor
from ..rl.policies.epsilon_greedy import apex_policy
from ..rl.sampling.worker_set import WorkerSet
from ..session import Algorithm
from ._config import algorithm_config, field
from ._recipe import Plan, Recipe, Resources, Run, Spaces, Workers
from .dqn import DQN_CAPABILITIES, DQN_MODELS, DQNConfig, DQNLearner, dqn_learner

__all__ = ["ApexDQN", "ApexDQNConfig"]


@algorithm_config
class ApexDQNConfig(DQNConfig):
    num_replay_shards: int = field(default=2, min=1)
    """Replay actor processes; the buffer capacity is split among them."""
    max_replay_restarts: int = field(default=2, min=0)
    """How often each replay shard may be replaced after it dies."""
    num_async: int = field(default=2, min=1)
    """Sample requests in flight per worker."""
    replay_num_async: int = field(default=2, min=1)
    """Replay requests in flight per shard."""
    learner_queue_size: int = field(default=4, min=1)
    """Replayed batches waiting for the learner."""
    max_weight_sync_delay: int = field(default=256, min=1)
    """Rows a worker samples before it gets fresh weights."""
    epsilon_base: float = field(default=0.4, min=0, max=1)
    """Worker i of N explores with epsilon_base ** (1 + epsilon_alpha * i / (N - 1))."""
    epsilon_alpha: float = field(default=7.0, min=0)
    """See epsilon_base."""

    def __post_init__(self) -> None:
        super().__post_init__()
        # DQN's, which Ape-X would ignore: its workers' epsilons are fixed, its branches run freely.
        for name, instead in (("epsilon", "epsilon_base"), ("epsilon_timesteps", "epsilon_alpha"),
                              ("training_intensity", "num_async and replay_num_async")):  # fmt: skip
            if getattr(self, name) != getattr(DQNConfig(), name):
                raise ConfigError(f"{name}: Ape-X does not use it (set {instead})")


def apex_workers(config: ApexDQNConfig, spaces: Spaces) -> Workers:
    """Each worker greedy in its Q network with its own fixed epsilon; n-step transitions."""
    c = config
    policy = functools.partial(apex_policy, num_workers=max(c.rollouts.num_workers, 1), base=c.epsilon_base,
                               alpha=c.epsilon_alpha, model=c.model, hidden=c.vector_hidden, dueling=c.dueling,
                               device=c.rollouts.device)  # fmt: skip
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


async def _open_shards(config: ApexDQNConfig, runtime: Runtime) -> WorkerSet:
    c, shards = config, config.num_replay_shards
    spawned = await asyncio.gather(*(
        runtime.spawn(ReplayActor, max(1, c.buffer_size // shards), prioritized=c.prioritized_replay,
                      alpha=c.prioritized_replay_alpha, beta=c.prioritized_replay_beta,
                      learning_starts=max(1, c.learning_starts // shards), frame_dedup=c.replay_frame_dedup,
                      seed=c.seed * 101 + i, name=f"apex-replay-{i + 1}", max_restarts=c.max_replay_restarts)
        for i in range(shards)
    ))  # fmt: skip
    return WorkerSet(spawned, timeout_s=c.rollouts.timeout_s, env="its replay shard")


async def _save_shards(config: ApexDQNConfig, shards: WorkerSet) -> Any:
    return await shards.get_states() if config.checkpoint_replay_buffer else None


async def _load_shards(config: ApexDQNConfig, shards: WorkerSet, state: Any) -> WorkerSet:
    await shards.set_states(state)
    return shards


REPLAY_SHARDS: Resources[ApexDQNConfig, WorkerSet] = Resources(open=_open_shards, save=_save_shards, load=_load_shards)
"""Replay actors (``num_replay_shards`` processes), each one's buffer kept by checkpoints."""


def apex_plan(run: Run[ApexDQNConfig, DQNLearner, WorkerSet]) -> Plan:
    """Storing and training run on their own clocks, on replay shards."""
    config, workers, learner, shards = run.config, run.workers, run.learner, run.resources
    rollouts = parallel_rollouts(workers, mode="async", num_async=config.num_async)
    stored = store_to_replay_buffer(rollouts, shards)
    store_op = update_worker_weights(stored, learner, workers, max_delay_steps=config.max_weight_sync_delay)
    replayed = replay(shards, config.train_batch_size, num_async=config.replay_num_async)
    trained = update_priorities(train_async(replayed, learner, queue_size=config.learner_queue_size))
    train_op = update_target_network(trained, learner, config.target_network_update_freq)
    steps = concurrently([store_op, train_op], "async", output_indexes=[1])
    return report_metrics(once_per_steps(steps, config.timesteps_per_iteration))


RECIPE: Recipe[ApexDQNConfig, DQNLearner, WorkerSet] = Recipe(
    name="apex", config=ApexDQNConfig, family="q", plan=apex_plan, models=DQN_MODELS, workers=apex_workers,
    learner=dqn_learner, resources=REPLAY_SHARDS, capabilities=DQN_CAPABILITIES,
)  # fmt: skip


class ApexDQN(Algorithm):
    """Ape-X DQN (the module docstring says where each part lives)."""

    recipe = RECIPE
