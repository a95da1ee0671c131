"""asyncflow: distributed reinforcement learning as asyncio dataflow."""

from .actors import ActorHandle, Runtime, RuntimeStatistics, open_runtime
from .errors import (
    ActorDiedError,
    ActorError,
    AsyncflowError,
    CheckpointError,
    CheckpointImportError,
    ClosedError,
    ConfigError,
    EnvOutputError,
    NonFiniteError,
    RemoteError,
    RemoteTraceback,
    SerializationError,
    SharedMemoryError,
    TrainingError,
    WorkerTimeoutError,
)

__version__ = "0.1.0"

__all__ = [
    "ActorDiedError",
    "ActorError",
    "ActorHandle",
    "AsyncflowError",
    "CheckpointError",
    "CheckpointImportError",
    "ClosedError",
    "ConfigError",
    "EnvOutputError",
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
