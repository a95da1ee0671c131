"""The actor layer: Python objects in other processes, called from asyncio.

Knows nothing about reinforcement learning. See :func:`open_runtime`.
"""

from ._handle import ActorHandle
from ._runtime import (
    TORCH_FREE_PRELOAD,
    Runtime,
    RuntimeStatistics,
    open_runtime,
    prefer_torch_free_fork_server,
    start_fork_server,
    start_fork_server_early,
    stop_fork_server,
)

__all__ = [
    "TORCH_FREE_PRELOAD",
    "ActorHandle",
    "Runtime",
    "RuntimeStatistics",
    "open_runtime",
    "prefer_torch_free_fork_server",
    "start_fork_server",
    "start_fork_server_early",
    "stop_fork_server",
]
