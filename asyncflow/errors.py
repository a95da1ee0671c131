"""The exceptions asyncflow raises, in one place.

::

    AsyncflowError                 base of everything below
    ├── ConfigError                bad input; raised before any process starts
    ├── CheckpointError            a checkpoint that is corrupt, foreign, or for another algorithm
    │   ├── CheckpointImportError  a sound checkpoint whose code (an env's module) cannot be imported here
    │   └── CheckpointTrustError   loading it would run code it holds, and the caller did not trust it
    ├── NoContextError             a flow operator ran outside any plan's context
    ├── TrainingError              the run stopped rather than go on with garbage
    │   ├── EnvOutputError         an env's output broke its own space (shape, dtype, NaN or inf)
    │   ├── EnvStepTimeoutError    an async env's step did not come back within env_step_timeout_s
    │   └── NonFiniteError         too many updates in a row had a NaN or inf loss or gradient
    └── ActorError                 something about an actor call went wrong
        ├── ActorDiedError         the peer died (crash, kill -9, OOM); carries the exit code
        │   └── WorkerTimeoutError a rollout worker did not answer in time and had no restart left
        ├── RemoteError            the peer raised, and its exception type could not travel
        ├── SerializationError     an argument or result could not be pickled or unpickled
        ├── SharedMemoryError      /dev/shm has no room for an actor's rings
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
    "SerializationError",
    "SharedMemoryError",
    "TrainingError",
    "WorkerTimeoutError",
]


class AsyncflowError(Exception):
    """Base class of every error asyncflow raises on purpose."""


class ConfigError(AsyncflowError, ValueError):
    """Bad input (unknown field, wrong type, unknown environment).

    Raised before any process starts; the message names the offending field.
    """


class CheckpointError(AsyncflowError, ValueError):
    """A checkpoint file that cannot be loaded: not ours, damaged, or for another algorithm."""


class CheckpointImportError(CheckpointError, ImportError):
    """A checkpoint that is sound, but refers to code this process cannot import
    (the module of its env, model or policy mapping): ``module`` names it."""

    def __init__(self, message: str, module: str | None) -> None:
        super().__init__(message)
        self.module = module


class CheckpointTrustError(CheckpointError):
    """A checkpoint that holds code (a pickle: a config's lambda, an old format), which
    loading would run: load it with ``trust_code=True`` (``--trust-code``) only if you trust
    who wrote it."""


class NoContextError(AsyncflowError, LookupError):
    """A flow operator ran where no ``FlowContext`` was installed: iterate the plan
    inside ``with use_context(FlowContext()):``, or through ``Algorithm.train()``."""


class TrainingError(AsyncflowError):
    """The run stopped because going on would have trained on garbage."""


class EnvStepTimeoutError(TrainingError, TimeoutError):
    """An async env's ``step`` or ``reset`` did not come back within ``env_step_timeout_s``
    (raised when ``restart_failed_envs=False``; otherwise the env is replaced and counted)."""


class EnvOutputError(TrainingError, ValueError):
    """An environment returned an observation or reward that breaks its own space:
    a wrong shape or dtype, or NaN or inf. The message names the env, the
    worker, the sub-environment, the field and the step."""


class NonFiniteError(TrainingError, FloatingPointError):
    """Updates kept producing a NaN or inf loss or gradient (each was skipped)."""


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


class WorkerTimeoutError(ActorDiedError):
    """A worker did not answer a call within ``worker_timeout_s`` and had no restart left
    (it was killed)."""

    def __init__(self, name: str, detail: str) -> None:
        ActorError.__init__(self, f"worker {name!r} timed out and was killed: {detail}")
        self.name, self.exitcode, self.detail = name, None, detail

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.name, self.detail)


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


class SharedMemoryError(ActorError, OSError):
    """``/dev/shm`` cannot hold an actor's rings; the message says how much is needed."""


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
