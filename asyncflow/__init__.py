"""asyncflow: distributed reinforcement learning as asyncio dataflow."""

from .actors import ActorHandle, Runtime, RuntimeStatistics, open_runtime
from .errors import (
    ActorDiedError,
    ActorError,
    AsyncflowError,
    CheckpointError,
    ClosedError,
    ConfigError,
    RemoteError,
    RemoteTraceback,
    SerializationError,
)

__version__ = "0.1.0"

__all__ = [
    "ActorDiedError",
    "ActorError",
    "ActorHandle",
    "AsyncflowError",
    "CheckpointError",
    "ClosedError",
    "ConfigError",
    "RemoteError",
    "RemoteTraceback",
    "Runtime",
    "RuntimeStatistics",
    "SerializationError",
    "open_runtime",
]
