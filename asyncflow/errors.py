"""The exceptions asyncflow raises, in one place.

::

    AsyncflowError                 base of everything below
    ├── ConfigError                bad input; raised before any process starts
    ├── CheckpointError            a checkpoint that is corrupt, foreign, or for another algorithm
    └── ActorError                 something about an actor call went wrong
        ├── ActorDiedError         the peer died (crash, kill -9, OOM); carries the exit code
        ├── RemoteError            the peer raised, and its exception type could not travel
        ├── SerializationError     an argument or result could not be pickled or unpickled
        └── ClosedError            *you* closed it: the runtime or the actor is shut down

An exception that a remote method raises comes back as itself (``except
ValueError`` works) whenever its type can be unpickled; the remote formatted
traceback is attached as ``__cause__`` (a :class:`RemoteTraceback`), the way
``concurrent.futures.process`` does it. Cancellation is never turned into
another error.
"""

from __future__ import annotations

__all__ = [
    "ActorDiedError",
    "ActorError",
    "AsyncflowError",
    "CheckpointError",
    "ClosedError",
    "ConfigError",
    "RemoteError",
    "RemoteTraceback",
    "SerializationError",
]


class AsyncflowError(Exception):
    """Base class of every error asyncflow raises on purpose."""


class ConfigError(AsyncflowError, ValueError):
    """Bad input (unknown field, wrong type, unknown environment).

    Raised before any process starts; the message names the offending field.
    """


class CheckpointError(AsyncflowError, ValueError):
    """A checkpoint file that cannot be loaded: not ours, damaged, or for another algorithm."""


class ActorError(AsyncflowError):
    """Base class of errors about actors and their calls."""


class ActorDiedError(ActorError):
    """The actor's process ended while calls were pending, or before a call.

    ``exitcode`` is the process exit code; a negative value ``-N`` means it was
    killed by signal ``N`` (the convention of :mod:`multiprocessing`).
    """

    def __init__(self, name: str, exitcode: int | None, detail: str = "") -> None:
        self.name = name
        self.exitcode = exitcode
        how = "unknown exit" if exitcode is None else _describe_exit(exitcode)
        message = f"actor {name!r} died ({how})"
        if detail:
            message += f": {detail}"
        super().__init__(message)


class RemoteError(ActorError):
    """The actor raised an exception whose type could not be rebuilt here.

    ``type_name`` is the qualified name of the original type; the remote
    traceback is in ``__cause__``.
    """

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        super().__init__(f"{type_name}: {message}")


class SerializationError(ActorError, TypeError):
    """An argument or a result could not be serialized or deserialized."""


class ClosedError(ActorError):
    """The runtime or actor was closed by its owner; no call can run on it."""


class RemoteTraceback(Exception):
    """Carries a remote formatted traceback; set as ``__cause__``."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return f'\n"""\n{self.tb}"""'


def _describe_exit(exitcode: int) -> str:
    if exitcode < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
