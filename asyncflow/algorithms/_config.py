"""Algorithm configs: frozen dataclasses composed of parts, checked at construction.

Every algorithm's config holds the same parts (``_fields.py`` says how parts work)::

    env            the env: a gymnasium id or a callable
    environment    what is done with it: output checks, normalization, failures, async envs, Atari
    rollouts       the rollout workers: how many, how many envs each, where they run, deadlines
    learner        lr, max_grad_norm, device, precision, threads
    model          the network (ModelConfig: the built-in one, or yours), and its LSTM core
    evaluation     evaluation during training

plus ``gamma``, ``seed`` and ``metrics_smoothing_episodes``, and its own fields. An
algorithm changes the parts' defaults without redeclaring a field
(``@algorithm_config(defaults={"learner.lr": 3e-3})``). The flat names of earlier
versions (``lr``, ``num_workers``, ``atari_frame_skip``, ...) are shorthands: they are read
and written as the nested fields they name (``SHORTHANDS``). Unknown names get the
closest known one, at every level; all of it before any process starts.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym

from .._fields import Fields, config_class, field, part, to_dict
from ..errors import CheckpointError, CheckpointTrustError, ConfigError
from ..rl.data.state_tree import Pickled, Untrusted, storable
from ..rl.envs.atari import AtariEnv, AtariOptions, is_atari_id
from ..rl.envs.make import EnvSpec
from ..rl.learners.device import resolve_device
from ..rl.learners.optim import OPTIMIZERS
from ..rl.learners.precision import resolve_precision
from ..rl.learners.schedule import check_schedule
from ..rl.models.config import ModelConfig
from ..rl.multi_agent import MultiAgent

__all__ = [
    "SHORTHANDS",
    "AlgorithmConfig",
    "OnPolicyConfig",
    "AtariConfig",
    "EnvironmentConfig",
    "EvaluationConfig",
    "LearnerConfig",
    "ModelConfig",
    "RolloutConfig",
    "algorithm_config",
    "check_epsilon",
    "field",
]


@config_class
class AtariConfig(Fields):
    """The standard Atari preprocessing (``asyncflow.rl.envs.atari``), for ``ALE/...`` ids."""

    preprocessing: bool = True
    """Preprocess ``ALE/...`` ids (the fields below); False: the raw env as gymnasium makes it."""
    noop_max: int = field(default=30, min=0)
    """Up to this many no-op actions at each game's start (a random number)."""
    frame_skip: int = field(default=4, min=1)
    """Frames per agent step (the action repeated), the observation the max of the last two."""
    screen_size: int = field(default=84, min=36)
    """Observations are resized to this many pixels square (the CNN needs at least 36)."""
    grayscale: bool = True
    """Grayscale frames (False: RGB, stacked along the channels)."""
    frame_stack: int = field(default=4, min=1)
    """The observation stacks the latest this many frames, channels first."""
    episodic_life: bool = True
    """Training: a lost life ends the training episode; the game goes on (evaluation plays whole games)."""
    clip_rewards: bool = True
    """Training: rewards are clipped to their sign; ``episode_return_mean`` stays the game's score."""


@config_class
class EnvironmentConfig(Fields):
    """What is done with the env's output: checks, normalization, failures; async envs; Atari."""

    check_output: bool = True
    """Check what the env returns every step: observations against the space (shape, dtype,
    values that fit), rewards (numbers), flags (bools), NaN and inf; an ``EnvOutputError``
    names the env, worker, field and step."""
    normalize_observations: bool = False
    """Normalize float Box observations by running mean and variance (VecNormalize's way), the
    statistics merged from every worker in the driver and sent back with the weights."""
    normalize_rewards: bool = False
    """Divide rewards by the running standard deviation of the discounted return."""
    normalize_clip: float = field(default=10.0, min=0, exclusive_min=True)
    """Normalized observations and rewards are clipped to [-normalize_clip, normalize_clip]."""
    restart_failed: bool | None = None
    """Replace an env whose ``step`` or ``reset`` raised (or, for an async env, timed out): its
    episode is dropped from the statistics and the run goes on (``num_env_errors``,
    ``num_env_step_timeouts`` in results); an env that fails 3 times in a row, its replacements
    included, fails the run. False: the run fails with the env's own traceback. None: True for
    async envs (a network hiccup), False for gymnasium envs (in a local env an exception is
    usually a bug, and its traceback is what you want)."""
    min_ready: int | None = field(default=None, min=1)
    """Async envs (``AsyncEnv``): a worker acts once this many of its envs have answered (or
    ``ready_timeout_s`` has passed); None: half of its envs. Set it to ``num_envs_per_worker``
    with ``ready_timeout_s=None`` for lock step."""
    ready_timeout_s: float | None = field(default=0.002, min=0)
    """Async envs: how long a worker waits for ``min_ready`` envs before it acts for those
    that have answered (None: until ``min_ready`` have)."""
    step_timeout_s: float | None = field(default=30.0, min=0, exclusive_min=True)
    """Async envs: a ``step`` or ``reset`` that takes longer gets its env closed and replaced
    (``num_env_step_timeouts`` in results); None: wait forever."""
    atari: AtariConfig = part(default_factory=AtariConfig)
    """The Atari preprocessing of ``ALE/...`` ids."""


@config_class
class RolloutConfig(Fields):
    """The rollout workers: how many, how many envs each, where they run, their deadlines."""

    num_workers: int = field(default=2, min=0)
    """Rollout worker processes; 0 samples in the driver."""
    num_envs_per_worker: int = field(default=8, min=1)
    """Sub-environments stepped by each worker, with one batched forward pass."""
    fragment_length: int = field(default=64, min=1)
    """Steps per sub-environment in one ``sample()`` call."""
    vector_env: bool = False
    """Step each worker's sub-environments as one gymnasium vector env, the id's own vectorized
    implementation (``gym.make_vec(..., vectorization_mode="vector_entry_point")``; CartPole-v1
    has one): one ``step`` call for all lanes. A ConfigError for an env without one."""
    backend: str = "process"
    """Where the workers (and any other actors of the plan) run: "process" (a process each, on
    this machine), "ray" (Ray actors, on a Ray cluster: ``address``), or "local" (objects in the
    driver, for debugging). The learner stays in the driver. num_workers=0 runs everything in the driver."""
    address: str | None = None
    """backend="ray": the Ray cluster to attach to ("auto", or HOST:PORT of its head);
    None starts a local Ray for the run (and stops it after)."""
    num_cpus_per_worker: float = field(default=1.0, min=0)
    """backend="ray": CPUs each rollout worker reserves on the cluster."""
    num_gpus_per_worker: float = field(default=0.0, min=0)
    """backend="ray": GPUs each rollout worker reserves (fractions share one GPU)."""
    niceness: int = field(default=15, min=0, max=19)
    """backend="process": the nice value of the actor processes (Ray's workers run at 15 too), so
    that CPU-bound workers yield to the driver, whose event loop then answers in time; 0 runs them
    at the driver's priority."""
    device: str = "cpu"
    """Where workers run their policy's inference."""
    inference: str = "auto"
    """How actor-critic workers run their policy: "auto" (in numpy for the built-in MLP on ``Box``
    observations with ``Discrete`` or ``Box`` actions, so that the workers never load torch, and
    in torch for anything else), "torch", or "numpy" (a ConfigError where numpy cannot run the
    model). DQN, SAC, TD3 and A3C workers always use torch."""
    max_restarts: int = field(default=2, min=0)
    """How often each worker process may be replaced after it dies or misses a deadline."""
    timeout_s: float | None = field(default=60.0, min=0, exclusive_min=True)
    """The deadline of every call to a worker process: a sample, a weight broadcast, a normalizer
    sync, a checkpoint's save or restore (an evaluation gets it once per episode). A worker that
    misses it (a hanging env, a frozen process) is killed and restarted (``max_restarts``), and
    the call made again; None: wait forever. A sample takes well under a second on a 2-core
    laptop: 60 s only catches hangs."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backend not in ("process", "ray", "local"):
            raise ConfigError(f"backend: must be 'process', 'ray' or 'local', got {self.backend!r}")
        if self.backend == "ray":
            from ..actors._ray import import_ray

            import_ray()  # a ConfigError naming the extra to install
        elif self.address is not None:
            raise ConfigError(f"address: only for backend='ray' (backend is {self.backend!r})")
        if self.inference not in ("auto", "torch", "numpy"):
            raise ConfigError(f"inference: must be 'auto', 'torch' or 'numpy', got {self.inference!r}")
        resolve_device(self.device, "device")  # a device this machine lacks fails here


@config_class
class LearnerConfig(Fields):
    """The learner: its optimizer's step and where and how it computes."""

    lr: float = field(default=3e-4, min=0, exclusive_min=True)
    """The optimizer's learning rate (its first, when ``lr_schedule`` is set)."""
    lr_schedule: tuple[tuple[float, float], ...] | None = None
    """``((env_steps, lr), ...)``: the learning rate at each iteration, linear between these
    points over the env steps sampled, the last one's after it (``((0, 1e-3), (100_000, 0))``
    decays linearly to 0 by 100k steps, as Stable-Baselines3's ``linear`` schedules over a run of
    that length). None: ``lr`` throughout. ``lr`` is the rate before the first iteration."""
    optimizer: str = "adam"
    """``"adam"``, or ``"rmsprop"`` (torch's, alpha 0.99, eps 1e-5: Stable-Baselines3's A2C
    optimizer) for the actor-critic algorithms."""
    max_grad_norm: float | None = field(default=0.5, min=0, exclusive_min=True)
    """Clip the global gradient norm to this (None: no clipping)."""
    device: str = "cpu"
    """Where the learner trains: "auto" (cuda, then mps, then cpu), "cpu", "cuda", "cuda:N", "mps"."""
    precision: str = "float32"
    """The learner's forward passes: "float32", "bfloat16" (mixed precision under
    ``torch.autocast``; weights, gradients and the optimizer stay float32), or "auto" (bfloat16
    where ``device`` computes it natively: a CUDA GPU from compute capability 8.0, a CPU with AMX
    or AVX512-BF16; else float32). See ``asyncflow/rl/learners/precision.py``."""
    torch_threads: int | None = field(default=None, min=1)
    """Torch threads of the learner's SGD steps; None: all of this machine's cores (up to 8) for a
    CNN or a model of 100k parameters or more (``session.BIG_MODEL``), one for smaller models
    (their small steps run faster on one)."""
    max_nonfinite_updates: int = field(default=10, min=1)
    """Updates in a row with a NaN or inf loss or gradient (each skipped) before the run
    stops with ``NonFiniteError``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        resolve_precision(self.precision, resolve_device(self.device, "device"))
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer: expected one of {sorted(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.lr_schedule is not None:
            check_schedule("lr_schedule", self.lr_schedule)


@config_class
class EvaluationConfig(Fields):
    """Evaluation during training, on actors of its own, while training goes on."""

    interval: int | None = field(default=None, min=1)
    """Evaluate every this many training iterations (results gain ``evaluation``:
    episode_return_mean, ...); None: never."""
    episodes: int = field(default=10, min=1)
    """Whole episodes per evaluation, split over the evaluation workers."""
    num_workers: int = field(default=1, min=1)
    """Evaluation worker actors (their own envs and seeds; they take no steps from training)."""
    explore: bool = False
    """Evaluate with sampled actions instead of the greedy ones."""


SHORTHANDS: dict[str, str] = {
    **{
        name: f"learner.{name}" for name in ("lr", "lr_schedule", "optimizer", "max_grad_norm", "max_nonfinite_updates")
    },
    **{f"learner_{name}": f"learner.{name}" for name in ("device", "precision", "torch_threads")},
    **{
        name: f"rollouts.{name}"
        for name in (
            "num_workers",
            "num_envs_per_worker",
            "vector_env",
            "backend",
            "address",
            "num_cpus_per_worker",
            "num_gpus_per_worker",
        )
    },
    "rollout_fragment_length": "rollouts.fragment_length",
    "worker_niceness": "rollouts.niceness",
    "worker_device": "rollouts.device",
    "worker_inference": "rollouts.inference",
    "max_worker_restarts": "rollouts.max_restarts",
    "worker_timeout_s": "rollouts.timeout_s",
    "sample_timeout_s": "rollouts.timeout_s",  # its name until 2026-12
    "check_env_output": "environment.check_output",
    **{
        name: f"environment.{name}"
        for name in ("normalize_observations", "normalize_rewards", "normalize_clip", "min_ready", "ready_timeout_s")
    },
    "restart_failed_envs": "environment.restart_failed",
    "env_step_timeout_s": "environment.step_timeout_s",
    **{f"atari_{f.name}": f"environment.atari.{f.name}" for f in dataclasses.fields(AtariConfig)},
    **{name: f"model.{name}" for name in ("hidden", "use_lstm", "lstm_size", "max_seq_len")},
    **{f"evaluation_{name}": f"evaluation.{name}" for name in ("interval", "episodes", "num_workers", "explore")},
}
"""The flat names of earlier versions, each a nested field: ``lr`` is ``learner.lr``."""


@typing.dataclass_transform(
    kw_only_default=True, frozen_default=True, field_specifiers=(dataclasses.field, field, part)
)
def algorithm_config(
    cls: Any = None, *, defaults: dict[str, Any] | None = None, shorthands: dict[str, str] | None = None
) -> Any:
    """Make ``cls`` (an ``AlgorithmConfig`` subclass) a config class: its own fields, and
    ``defaults`` for inherited ones by path (``{"learner.lr": 3e-3}``) or shorthand."""
    return config_class(cls, defaults=defaults, shorthands=shorthands)


def check_epsilon(name: str, value: tuple[float, ...]) -> None:
    """An (initial, final) exploration pair, each in [0, 1]."""
    if len(value) != 2 or not all(0 <= e <= 1 for e in value):
        raise ConfigError(f"{name}: expected (initial, final) in [0, 1], got {value}")


@config_class(shorthands=SHORTHANDS)
class AlgorithmConfig(Fields):
    """What every algorithm's config holds (the module docstring lists the parts)."""

    vector_hidden: ClassVar[tuple[int, ...]] = (64, 64)
    """The dense layers of the built-in MLP on vector observations when ``model.hidden`` is None."""

    env: EnvSpec = "CartPole-v1"
    """A gymnasium id, or a callable that returns a gymnasium.Env or an ``AsyncEnv`` (a class
    whose ``reset``, ``step`` and ``close`` are coroutines: ``asyncflow.rl.AsyncEnv``)."""
    environment: EnvironmentConfig = part(default_factory=EnvironmentConfig)
    """What is done with the env's output (checks, normalization, failures, async envs, Atari)."""
    rollouts: RolloutConfig = part(default_factory=RolloutConfig)
    """The rollout workers."""
    learner: LearnerConfig = part(default_factory=LearnerConfig)
    """The learner."""
    model: ModelConfig = part(default_factory=ModelConfig)
    """The network: the built-in one for the spaces (shaped by its fields), or yours (``custom``,
    or give the class itself: ``model=MyNet``)."""
    evaluation: EvaluationConfig = part(default_factory=EvaluationConfig)
    """Evaluation during training."""
    gamma: float = field(default=0.99, min=0, max=1)
    """Discount factor."""
    seed: int = field(default=0, min=0)
    """Seeds environments, policies and minibatch shuffling."""
    metrics_smoothing_episodes: int = field(default=100, min=1)
    """Episode statistics in a result cover this many of the latest episodes."""
    output: str | None = None
    """A folder to write what every rollout worker samples to, as Minari datasets, one per
    worker process (``asyncflow.rl.offline``; ``pip install 'asyncflow[offline]'``)."""
    multi_agent: MultiAgent | None = None
    """A multi-agent env's policies and which agent each acts for (``asyncflow.rl.MultiAgent``):
    one learner and one plan of this algorithm per policy (None: a single-agent env)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.multi_agent, Mapping):  # a config file's or a checkpoint's
            object.__setattr__(self, "multi_agent", MultiAgent.from_dict(self.multi_agent))
        if self.multi_agent is not None and not isinstance(self.multi_agent, MultiAgent):
            got = type(self.multi_agent).__name__
            raise ConfigError(f"multi_agent: expected an asyncflow.rl.MultiAgent, got {got}")
        env, rollouts, model = self.environment, self.rollouts, self.model
        if env.min_ready is not None and env.min_ready > rollouts.num_envs_per_worker:
            raise ConfigError(f"environment.min_ready: must be <= rollouts.num_envs_per_worker "
                              f"({rollouts.num_envs_per_worker}), got {env.min_ready}")  # fmt: skip
        if model.use_lstm and rollouts.fragment_length % model.max_seq_len:
            raise ConfigError(f"model.max_seq_len: rollouts.fragment_length ({rollouts.fragment_length}) must be a "
                              f"multiple of it (use_lstm), got {model.max_seq_len}")  # fmt: skip
        if rollouts.vector_env and env.restart_failed:
            raise ConfigError("environment.restart_failed: not with rollouts.vector_env (one vector env steps "
                              "every lane; a failure ends the run)")  # fmt: skip

    def worker_env(self, *, training: bool = True) -> EnvSpec:
        """``env`` as the workers build it: an ALE id gets the Atari preprocessing
        (``environment.atari``); ``training=False`` (evaluation) plays whole games with
        unclipped rewards."""
        atari = self.environment.atari
        if not (atari.preprocessing and is_atari_id(self.env)):
            return self.env
        options = AtariOptions(**{k: v for k, v in to_dict(atari).items() if k != "preprocessing"})
        return AtariEnv(str(self.env), options, training=training)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values, parts nested (an env or model callable becomes its name),
        for params.json."""

        def plain(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if callable(value):
                return getattr(value, "__qualname__", repr(value))
            return value

        return plain(to_dict(self))  # type: ignore[no-any-return]

    def to_state(self) -> dict[str, Any]:
        """The fields for a checkpoint (``state_tree.py``), parts nested: plain values, a
        function or class by its import path (a partial of one with its arguments); one that
        has none (a lambda, a class defined in ``__main__``) pickled by value, which only a
        trusted restore loads."""

        def state(value: Any, path: str) -> Any:
            if isinstance(value, MultiAgent):
                value = value.to_dict()
            if isinstance(value, gym.Space):
                import cloudpickle

                return Pickled(cloudpickle.dumps(value), f"{path}: a gymnasium space, pickled")
            if isinstance(value, dict):
                return {k: state(v, f"{path}.{k}" if path else k) for k, v in value.items()}
            if callable(value) and not storable(value):
                import cloudpickle

                kind = "class" if isinstance(value, type) else "function"
                name = getattr(value, "__qualname__", type(value).__name__)
                return Pickled(
                    cloudpickle.dumps(value), f"{path}: a {kind} with no import path ({name}), pickled by value"
                )
            return value

        return state(to_dict(self), "")  # type: ignore[no-any-return]

    @classmethod
    def from_state(cls, state: dict[str, Any], source: str, **changes: Any) -> Any:
        """The config ``to_state`` saved (``changes`` replacing fields); code stored by value
        loads only if the checkpoint was read with ``trust_code`` (``CheckpointTrustError``).
        A checkpoint's flat fields (written before the parts) are read as the shorthands they are."""

        def load(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: load(v) for k, v in value.items()}
            if isinstance(value, Untrusted):
                raise CheckpointTrustError(f"{source}: config field {value.what}; loading it runs that "
                                           "code: pass trust_code=True (--trust-code) if you trust who wrote "
                                           "the file")  # fmt: skip
            return value.load() if isinstance(value, Pickled) else value

        try:
            return cls.build(load(state), **changes)
        except ConfigError as exc:
            raise CheckpointError(f"{source}: its config does not fit this asyncflow's {cls.__name__}: {exc}") from exc


@config_class
class OnPolicyConfig(AlgorithmConfig):
    """What PG, A2C, A3C and PPO add: batches of whole rollouts with GAE advantages."""

    lam: float = field(default=0.95, min=0, max=1)
    """GAE lambda (1.0: the returns minus the value baseline)."""
    train_batch_size: int = field(default=2048, min=1)
    """Environment steps per training batch."""
    use_sde: bool = False
    """Generalized state-dependent exploration for Box actions (gSDE; Raffin et al. 2022), as
    Stable-Baselines3's PPO and A2C: the noise is the policy's last hidden features times a
    matrix each env keeps for ``sde_sample_freq`` steps, its variance the state's (the built-in
    model only; ``ActorCriticNet``)."""
    sde_sample_freq: int | None = field(default=None, min=1)
    """With ``use_sde``: env steps each env keeps its noise matrix (None: one rollout fragment,
    as Stable-Baselines3's -1, a new matrix at each rollout)."""
    log_std_init: float = field(default=0.0, min=-20.0, max=2.0)
    """The initial log-std of a Box action's Gaussian (with ``use_sde``: of the noise matrix's entries)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, set_ in (("use_sde", self.use_sde), ("log_std_init", self.log_std_init != 0.0)):
            if set_ and self.model.use_lstm:
                raise ConfigError(f"{name}: the built-in feed-forward model's; not with use_lstm")
            if set_ and self.model.custom is not None:
                raise ConfigError(f"{name}: the built-in model's; not with a model of your own")

    def actor_critic_options(self) -> dict[str, Any]:
        """What the actor-critic policy takes from these fields (``_actor_critic.py``)."""
        return {"sde": self.use_sde, "log_std_init": self.log_std_init,
                "sde_sample_freq": self.sde_sample_freq or self.rollouts.fragment_length}  # fmt: skip
