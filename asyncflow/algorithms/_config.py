"""Algorithm configs: frozen, keyword-only dataclasses checked at construction.

``@algorithm_config`` turns an unknown field into a ``ConfigError`` that names
it (with the closest known name), and ``AlgorithmConfig.__post_init__``
checks every field's type and range, all before any process starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import CheckpointError, CheckpointTrustError, ConfigError
from ..rl.atari import AtariEnv, AtariOptions, is_atari_id
from ..rl.device import resolve_device
from ..rl.env import EnvSpec
from ..rl.models.config import ModelConfig, model_spec
from ..rl.precision import resolve_precision
from ..rl.state_tree import Pickled, Untrusted, storable

__all__ = ["AlgorithmConfig", "algorithm_config", "check_epsilon", "field"]

C = TypeVar("C", bound=type)


def field(default: Any, *, min: float | None = None, max: float | None = None, exclusive_min: bool = False) -> Any:
    """A config field with an optional allowed range."""
    return dataclasses.field(default=default, metadata={"min": min, "max": max, "exclusive_min": exclusive_min})


RENAMED = {"sample_timeout_s": "worker_timeout_s"}
"""Old field names that still work: old name -> new name."""


def algorithm_config(cls: C) -> C:
    """Make ``cls`` a frozen keyword-only dataclass whose bad input raises ConfigError."""
    cls = dataclasses.dataclass(frozen=True, kw_only=True)(cls)  # type: ignore[assignment]
    generated = cls.__init__  # type: ignore[misc]

    def __init__(self: Any, **kwargs: Any) -> None:
        known = {f.name for f in dataclasses.fields(cls)}
        for old, new in RENAMED.items():
            if old in kwargs and old not in known:
                if new in kwargs:
                    raise ConfigError(f"{cls.__name__}: {old!r} is the old name of {new!r}; give one of them")
                kwargs[new] = kwargs.pop(old)
        for name in kwargs:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"{cls.__name__}: unknown field {name!r}{hint}")
        generated(self, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    return cls


def _check_type(name: str, value: Any, hint: Any) -> Any:
    """Return ``value`` (ints become floats where a float is declared) or raise."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return _check_type(name, value, option)
            except ConfigError:
                continue
        raise ConfigError(f"{name}: expected {hint}, got {type(value).__name__} {value!r}")
    if hint is type(None):
        if value is None:
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint in (str, bool):
        if isinstance(value, hint):
            return value
    elif origin is tuple:
        if isinstance(value, tuple | list):
            (inner, *_) = typing.get_args(hint)
            return tuple(_check_type(name, v, inner) for v in value)
    elif origin is Callable or hint is Callable:
        if callable(value):
            return value
    else:
        return value
    raise ConfigError(f"{name}: expected {getattr(hint, '__name__', hint)}, got {type(value).__name__} {value!r}")


def _numbers(value: Any) -> list[float]:
    """The ints and floats in a field's value (itself, or the items of a tuple)."""
    items = value if isinstance(value, tuple) else (value,)
    return [v for v in items if isinstance(v, int | float) and not isinstance(v, bool)]


def check_epsilon(name: str, value: tuple[float, ...]) -> None:
    """An (initial, final) exploration pair, each in [0, 1]."""
    if len(value) != 2 or not all(0 <= e <= 1 for e in value):
        raise ConfigError(f"{name}: expected (initial, final) in [0, 1], got {value}")


@algorithm_config
class AlgorithmConfig:
    """Fields every algorithm shares."""

    env: EnvSpec = "CartPole-v1"
    """A gymnasium id, or a callable that returns a gymnasium.Env or an ``AsyncEnv`` (a class
    whose ``reset``, ``step`` and ``close`` are coroutines: ``asyncflow.rl.AsyncEnv``)."""
    num_workers: int = field(2, min=0)
    """Rollout worker processes; 0 samples in the driver."""
    backend: str = "process"
    """Where the workers (and any other actors of the plan) run: "process" (a process each, on
    this machine), "ray" (Ray actors, on a Ray cluster: ``address``), or "local" (objects in the
    driver, for debugging). The learner stays in the driver. num_workers=0 runs everything in the driver."""
    address: str | None = None
    """backend="ray": the Ray cluster to attach to ("auto", or HOST:PORT of its head);
    None starts a local Ray for the run (and stops it after)."""
    num_cpus_per_worker: float = field(1.0, min=0)
    """backend="ray": CPUs each rollout worker reserves on the cluster."""
    num_gpus_per_worker: float = field(0.0, min=0)
    """backend="ray": GPUs each rollout worker reserves (fractions share one GPU)."""
    worker_niceness: int = field(15, min=0, max=19)
    """backend="process": the nice value of the actor processes (Ray's workers run at 15 too), so
    that CPU-bound workers yield to the driver, whose event loop then answers in time; 0 runs them
    at the driver's priority."""
    num_envs_per_worker: int = field(8, min=1)
    """Sub-environments stepped by each worker, with one batched forward pass."""
    rollout_fragment_length: int = field(64, min=1)
    """Steps per sub-environment in one ``sample()`` call."""
    vector_env: bool = False
    """Step each worker's sub-environments as one gymnasium vector env, the id's own vectorized
    implementation (``gym.make_vec(..., vectorization_mode="vector_entry_point")``; CartPole-v1
    has one): one ``step`` call for all lanes. A ConfigError for an env without one."""
    gamma: float = field(0.99, min=0, max=1)
    """Discount factor."""
    lam: float = field(0.95, min=0, max=1)
    """GAE lambda."""
    lr: float = field(3e-4, min=0, exclusive_min=True)
    """Adam learning rate."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the policy and value MLPs."""
    model: Any = None
    """The network: None (the built-in model for the spaces), a ``ModelConfig``, or a torch module
    class or factory ``(observation_space, action_space) -> nn.Module`` that honours the
    algorithm's protocol (``asyncflow.rl.models``). In a config file: a mapping of ModelConfig
    fields, or ``"module:name"``."""
    learner_torch_threads: int | None = field(None, min=1)
    """Torch threads of the learner's SGD steps; None: one for models without convolutions (their
    small steps run faster on one), all of this machine's cores (up to 8) for a CNN."""
    learner_device: str = "cpu"
    """Where the learner trains: "auto" (cuda, then mps, then cpu), "cpu", "cuda", "cuda:N", "mps"."""
    learner_precision: str = "float32"
    """The learner's forward passes: "float32", "bfloat16" (mixed precision under
    ``torch.autocast``; weights, gradients and the optimizer stay float32), or "auto" (bfloat16
    where ``learner_device`` computes it natively: a CUDA GPU from compute capability 8.0, a CPU
    with AMX or AVX512-BF16; else float32). See ``asyncflow/rl/precision.py``."""
    worker_device: str = "cpu"
    """Where workers run their policy's inference."""
    worker_inference: str = "auto"
    """How actor-critic workers run their policy: "auto" (in numpy for the built-in MLP on ``Box``
    observations with ``Discrete`` or ``Box`` actions, so that the workers never load torch, and
    in torch for anything else), "torch", or "numpy" (a ConfigError where numpy cannot run the
    model). DQN, SAC, TD3 and A3C workers always use torch."""
    max_grad_norm: float | None = field(0.5, min=0, exclusive_min=True)
    """Clip the global gradient norm to this (None: no clipping)."""
    seed: int = field(0, min=0)
    """Seeds environments, policies and minibatch shuffling."""
    max_worker_restarts: int = field(2, min=0)
    """How often each worker process may be replaced after it dies."""
    metrics_smoothing_episodes: int = field(100, min=1)
    """Episode statistics in a result cover this many of the latest episodes."""
    max_nonfinite_updates: int = field(10, min=1)
    """Updates in a row with a NaN or inf loss or gradient (each skipped) before the run
    stops with ``NonFiniteError``."""
    worker_timeout_s: float | None = field(60.0, min=0, exclusive_min=True)
    """The deadline of every call to a worker process: a sample, a weight broadcast, a normalizer
    sync, a checkpoint's save or restore (an evaluation gets it once per episode). A worker that
    misses it (a hanging env, a frozen process) is killed and restarted (``max_worker_restarts``),
    and the call made again; None: wait forever. A sample takes well under a second on a 2-core
    laptop: 60 s only catches hangs. (Formerly ``sample_timeout_s``, which still works.)"""
    check_env_output: bool = True
    """Check every observation's shape and dtype against the space, and observations and
    rewards for NaN and inf (an ``EnvOutputError`` names the env, worker, field and step)."""
    min_ready: int | None = field(None, min=1)
    """Async envs (``AsyncEnv``): a worker acts once this many of its envs have answered (or
    ``ready_timeout_s`` has passed); None: half of ``num_envs_per_worker``. Set it to
    ``num_envs_per_worker`` with ``ready_timeout_s=None`` for lock step."""
    ready_timeout_s: float | None = field(0.002, min=0)
    """Async envs: how long a worker waits for ``min_ready`` envs before it acts for those
    that have answered (None: until ``min_ready`` have)."""
    env_step_timeout_s: float | None = field(30.0, min=0, exclusive_min=True)
    """Async envs: a ``step`` or ``reset`` that takes longer gets its env closed and replaced
    (``num_env_step_timeouts`` in results); None: wait forever."""
    restart_failed_envs: bool | None = None
    """Replace an env whose ``step`` or ``reset`` raised (or, for an async env, timed out): its
    episode is dropped from the statistics and the run goes on (``num_env_errors``,
    ``num_env_step_timeouts`` in results); an env that fails 3 times in a row, its replacements
    included, fails the run. False: the run fails with the env's own traceback.
    None: True for async envs (a network hiccup), False for gymnasium envs (in a local env an
    exception is usually a bug, and its traceback is what you want)."""

    atari_preprocessing: bool = True
    """An ``ALE/...`` id gets the standard preprocessing (``asyncflow.rl.atari``): the fields below;
    False: the raw env as gymnasium makes it."""
    atari_noop_max: int = field(30, min=0)
    """Atari: up to this many no-op actions at each game's start (a random number)."""
    atari_frame_skip: int = field(4, min=1)
    """Atari: frames per agent step (the action repeated), the observation the max of the last two."""
    atari_screen_size: int = field(84, min=36)
    """Atari: observations are resized to this many pixels square (the CNN needs at least 36)."""
    atari_grayscale: bool = True
    """Atari: grayscale frames (False: RGB, stacked along the channels)."""
    atari_frame_stack: int = field(4, min=1)
    """Atari: the observation stacks the latest this many frames, channels first."""
    atari_episodic_life: bool = True
    """Atari, training: a lost life ends the training episode; the game goes on (evaluation plays whole games)."""
    atari_clip_rewards: bool = True
    """Atari, training: rewards are clipped to their sign; ``episode_return_mean`` stays the game's score."""

    use_lstm: bool = False
    """An LSTM core behind the observation encoder (PG, A2C, A3C, PPO, IMPALA, APPO): workers carry each env's
    state, batches carry sequences of ``max_seq_len`` steps, the learner replays them."""
    lstm_size: int = field(64, min=1)
    """Units of the LSTM core."""
    max_seq_len: int = field(16, min=1)
    """Steps per training sequence; ``rollout_fragment_length`` must be a multiple of it."""
    normalize_observations: bool = False
    """Normalize float Box observations by running mean and variance (VecNormalize's way), the
    statistics merged from every worker in the driver and sent back with the weights."""
    normalize_rewards: bool = False
    """Divide rewards by the running standard deviation of the discounted return."""
    normalize_clip: float = field(10.0, min=0, exclusive_min=True)
    """Normalized observations and rewards are clipped to [-normalize_clip, normalize_clip]."""
    evaluation_interval: int | None = field(None, min=1)
    """Evaluate every this many training iterations, on separate worker actors, while training
    goes on (results gain ``evaluation``: episode_return_mean, ...); None: never."""
    evaluation_episodes: int = field(10, min=1)
    """Whole episodes per evaluation, split over the evaluation workers."""
    evaluation_num_workers: int = field(1, min=1)
    """Evaluation worker actors (their own envs and seeds; they take no steps from training)."""
    evaluation_explore: bool = False
    """Evaluate with sampled actions instead of the greedy ones."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = _check_type(f.name, getattr(self, f.name), hints[f.name])
            object.__setattr__(self, f.name, value)
            for number in _numbers(value):
                if not math.isfinite(number):
                    raise ConfigError(f"{f.name}: must be a finite number, got {value!r}")
            sizes = typing.get_origin(hints[f.name]) is tuple and typing.get_args(hints[f.name])[0] is int
            if sizes and any(n < 1 for n in value):
                raise ConfigError(f"{f.name}: sizes must be >= 1, got {value}")
            low, high = f.metadata.get("min"), f.metadata.get("max")
            if isinstance(value, int | float) and not isinstance(value, bool):
                if low is not None and (value < low or (f.metadata.get("exclusive_min") and value == low)):
                    op = ">" if f.metadata.get("exclusive_min") else ">="
                    raise ConfigError(f"{f.name}: must be {op} {low}, got {value}")
                if high is not None and value > high:
                    raise ConfigError(f"{f.name}: must be <= {high}, got {value}")
        object.__setattr__(self, "model", model_spec(self.model))
        if self.min_ready is not None and self.min_ready > self.num_envs_per_worker:
            raise ConfigError(f"min_ready: must be <= num_envs_per_worker ({self.num_envs_per_worker}), "
                              f"got {self.min_ready}")  # fmt: skip
        if self.use_lstm and self.rollout_fragment_length % self.max_seq_len:
            raise ConfigError(f"max_seq_len: rollout_fragment_length ({self.rollout_fragment_length}) must be a "
                              f"multiple of it (use_lstm), got {self.max_seq_len}")  # fmt: skip
        if self.vector_env and self.restart_failed_envs:
            raise ConfigError("restart_failed_envs: not with vector_env (one vector env steps every lane; "
                              "a failure ends the run)")  # fmt: skip
        if self.backend not in ("process", "ray", "local"):
            raise ConfigError(f"backend: must be 'process', 'ray' or 'local', got {self.backend!r}")
        if self.backend == "ray":
            from ..actors._ray import import_ray

            import_ray()  # a ConfigError naming the extra to install
        elif self.address is not None:
            raise ConfigError(f"address: only for backend='ray' (backend is {self.backend!r})")
        if self.worker_inference not in ("auto", "torch", "numpy"):
            raise ConfigError(f"worker_inference: must be 'auto', 'torch' or 'numpy', got {self.worker_inference!r}")
        for name in ("learner_device", "worker_device"):
            resolve_device(getattr(self, name), name)  # a device this machine lacks fails here
        resolve_precision(self.learner_precision, resolve_device(self.learner_device))

    def worker_env(self, *, training: bool = True) -> EnvSpec:
        """``env`` as the workers build it: an ALE id gets the Atari preprocessing (``atari_*``
        fields); ``training=False`` (evaluation) plays whole games with unclipped rewards."""
        if not (self.atari_preprocessing and is_atari_id(self.env)):
            return self.env
        options = AtariOptions(
            noop_max=self.atari_noop_max,
            frame_skip=self.atari_frame_skip,
            screen_size=self.atari_screen_size,
            grayscale=self.atari_grayscale,
            frame_stack=self.atari_frame_stack,
            episodic_life=self.atari_episodic_life,
            clip_rewards=self.atari_clip_rewards,
        )
        return AtariEnv(str(self.env), options, training=training)

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed (checked the same way)."""
        return type(self)(**{**dataclasses.asdict(self), **changes})  # type: ignore[call-overload]

    def to_state(self) -> dict[str, Any]:
        """The fields for a checkpoint (``state_tree.py``): plain values, a ``ModelConfig`` as
        the mapping of its fields, a function or class by its import path (a partial of one
        with its arguments); one that has none (a lambda, a class defined in ``__main__``)
        pickled by value, which only a trusted restore loads."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, ModelConfig):
                value = dataclasses.asdict(value)
            elif callable(value) and not storable(value):
                import cloudpickle

                kind = "class" if isinstance(value, type) else "function"
                name = getattr(value, "__qualname__", type(value).__name__)
                what = f"{f.name}: a {kind} with no import path ({name}), pickled by value"
                value = Pickled(cloudpickle.dumps(value), what)
            out[f.name] = value
        return out

    @classmethod
    def from_state(cls, state: dict[str, Any], source: str, **changes: Any) -> Any:
        """The config ``to_state`` saved (``changes`` replacing fields); code stored by value
        loads only if the checkpoint was read with ``trust_code`` (``CheckpointTrustError``)."""
        fields: dict[str, Any] = {}
        for name, value in state.items():
            if isinstance(value, Untrusted):
                raise CheckpointTrustError(f"{source}: config field {value.what}; loading it runs that "
                                           "code: pass trust_code=True (--trust-code) if you trust who wrote "
                                           "the file")  # fmt: skip
            fields[name] = value.load() if isinstance(value, Pickled) else value
        try:
            return cls(**{**fields, **changes})
        except ConfigError as exc:
            raise CheckpointError(f"{source}: its config does not fit this asyncflow's {cls.__name__}: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values (an env callable becomes its name), for params.json."""
        out = dataclasses.asdict(self)  # type: ignore[call-overload]
        for name, value in out.items():
            if callable(value):  # an env or a model given as a callable: its name
                out[name] = getattr(value, "__qualname__", repr(value))
        return out  # type: ignore[no-any-return]
