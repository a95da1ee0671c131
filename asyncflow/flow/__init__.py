"""Dataflow operators: plain async generator functions.

Creation: parallel_rollouts, async_gradients, dequeue. Transformation:
concat_batches, select_experiences, standardize_fields, train_one_step,
compute_gradients, apply_gradients, average_gradients, enqueue, map, filter,
batch, flatten. Sequencing: concurrently, union, duplicate. Metrics:
report_metrics, once_per_interval, once_per_steps.
"""

from ._context import FlowContext, current_context, use_context
from .concurrency import concurrently, dequeue, duplicate, enqueue, union
from .generic import batch, filter, flatten, map
from .metrics import once_per_interval, once_per_steps, report_metrics
from .rollouts import GradientsItem, async_gradients, parallel_rollouts
from .train import (
    apply_gradients,
    average_gradients,
    compute_gradients,
    concat_batches,
    select_experiences,
    standardize_fields,
    train_one_step,
)

__all__ = [
    "FlowContext",
    "GradientsItem",
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
    "once_per_interval",
    "once_per_steps",
    "parallel_rollouts",
    "report_metrics",
    "select_experiences",
    "standardize_fields",
    "train_one_step",
    "union",
    "use_context",
]
