"""Dataflow operators: plain async generator functions.

Creation: parallel_rollouts, async_gradients, replay, dequeue.
Transformation: concat_batches, select_experiences, standardize_fields,
train_one_step, compute_gradients, apply_gradients, average_gradients,
store_to_replay_buffer, mix_in_replay, enqueue, map, filter, batch, flatten.
Learners: learn_on_batches, train_async (trains while sampling continues), and what
goes back to where a batch came from: sync_weights, update_priorities,
update_worker_weights, update_target_network. Sequencing: concurrently,
union, duplicate. Metrics: report_metrics, once_per_interval, once_per_steps.
"""

from ._context import FlowContext, current_context, set_context, use_context
from .concurrency import concurrently, dequeue, duplicate, enqueue, union
from .generic import batch, filter, flatten, map
from .learner import (
    Trained,
    learn_on_batches,
    sync_weights,
    train_async,
    update_priorities,
    update_target_network,
    update_worker_weights,
)
from .metrics import Result, once_per_interval, once_per_steps, report_metrics
from .replay import mix_in_replay, replay, store_to_replay_buffer
from .rollouts import GradientsItem, async_gradients, parallel_rollouts
from .train import (
    apply_gradients,
    average_gradients,
    compute_gradients,
    concat_batches,
    select_experiences,
    select_policy,
    standardize_fields,
    train_one_step,
)

__all__ = [
    "FlowContext",
    "GradientsItem",
    "Result",
    "Trained",
    "apply_gradients",
    "async_gradients",
    "average_gradients",
    "batch",
    "compute_gradients",
    "concat_batches",
    "concurrently",
    "current_context",
    "dequeue",
    "duplicate",
    "enqueue",
    "filter",
    "flatten",
    "map",
    "mix_in_replay",
    "once_per_interval",
    "once_per_steps",
    "parallel_rollouts",
    "replay",
    "report_metrics",
    "select_experiences",
    "select_policy",
    "set_context",
    "standardize_fields",
    "store_to_replay_buffer",
    "sync_weights",
    "train_async",
    "train_one_step",
    "learn_on_batches",
    "union",
    "update_priorities",
    "update_target_network",
    "update_worker_weights",
    "use_context",
]
