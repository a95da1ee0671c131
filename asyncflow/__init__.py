"""asyncflow: distributed reinforcement learning as asyncio dataflow.

The actor layer's names load on first use (PEP 562), so that ``import
asyncflow.cli`` costs only the standard library: the command line can then
answer a Ctrl-C or bad input in one line even while numpy and torch load.
"""

from typing import TYPE_CHECKING, Any

from .errors import (
    ActorDiedError,
    ActorError,
    AsyncflowError,
    CheckpointError,
    CheckpointImportError,
    CheckpointTrustError,
    ClosedError,
    ConfigError,
    EnvOutputError,
    EnvStepTimeoutError,
    NoContextError,
    NonFiniteError,
    RemoteError,
    RemoteTraceback,
    SerializationError,
    SharedMemoryError,
    TrainingError,
    WorkerTimeoutError,
)

if TYPE_CHECKING:
    from .actors import ActorHandle, Runtime, RuntimeStatistics, open_runtime

__version__ = "0.1.0"

_LAZY = {"ActorHandle", "Runtime", "RuntimeStatistics", "open_runtime"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import actors

        return getattr(actors, name)
    raise AttributeError(f"module 'asyncflow' has no attribute {name!r}")


__all__ = [
    "ActorDiedError",
    "ActorError",
    "ActorHandle",
    "AsyncflowError",
    "CheckpointError",
    "CheckpointImportError",
    "CheckpointTrustError",
    "ClosedError",
    "ConfigError",
    "EnvOutputError",
    "EnvStepTimeoutError",
    "NoContextError",
    "NonFiniteError",
    "RemoteError",
    "RemoteTraceback",
    "Runtime",
    "RuntimeStatistics",
    "SerializationError",
    "SharedMemoryError",
    "TrainingError",
    "WorkerTimeoutError",
    "open_runtime",
]
