"""The actor layer: Python objects in other processes, called from asyncio.

Knows nothing about reinforcement learning. See :func:`open_runtime`.
"""

from ._handle import ActorHandle
from ._runtime import (
    Runtime,
    RuntimeStatistics,
    open_runtime,
    start_fork_server,
    start_fork_server_early,
    stop_fork_server,
)

__all__ = [
    "ActorHandle",
    "Runtime",
    "RuntimeStatistics",
    "open_runtime",
    "start_fork_server",
    "start_fork_server_early",
    "stop_fork_server",
]
