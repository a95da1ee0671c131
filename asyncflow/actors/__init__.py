"""The actor layer: Python objects in other processes, called from asyncio.

Knows nothing about reinforcement learning (the layers above tell it what its fork server
should preload: ``add_preload``). See :func:`open_runtime`.
"""

from ._handle import ActorHandle
from ._runtime import (
    Runtime,
    RuntimeStatistics,
    add_preload,
    open_runtime,
    prefer_torch_free_fork_server,
    start_fork_server,
    start_fork_server_early,
    stop_fork_server,
    torch_free_preload,
)

__all__ = [
    "ActorHandle",
    "Runtime",
    "RuntimeStatistics",
    "add_preload",
    "open_runtime",
    "prefer_torch_free_fork_server",
    "start_fork_server",
    "start_fork_server_early",
    "stop_fork_server",
    "torch_free_preload",
]
