"""``Algorithm``: owns a runtime, the rollout workers and the learner, and
runs an algorithm's execution plan.

::

    async with PPO(PPOConfig(env="CartPole-v1")) as algo:
        async for result in algo.train():
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
import warnings
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import torch

from ..actors import TORCH_FREE_PRELOAD, ActorHandle, Runtime, open_runtime, prefer_torch_free_fork_server
from ..errors import CheckpointError, ClosedError, ConfigError
from ..flow._context import FlowContext, set_context
from ..flow.learner_thread import in_learner_thread, set_learner_threads
from ..rl.action_mask import has_action_mask
from ..rl.actor_critic import ActorCriticPolicy
from ..rl.async_worker import AsyncRolloutWorker
from ..rl.env import check_vector_env, probe_env
from ..rl.env_checks import env_name
from ..rl.evaluation_worker import EvaluationWorker, summarize_episodes
from ..rl.models import build_model, check_model, model_name
from ..rl.models.config import ModelConfig
from ..rl.nets import one_torch_thread
from ..rl.normalization import NormalizerState, check_normalizable
from ..rl.numpy_policy import NumpyActorCriticPolicy
from ..rl.policy import PolicyFactory, WorkerPolicy, check_learner
from ..rl.recurrent import recurrent_policy
from ..rl.rollout_worker import RolloutWorker
from ..rl.spaces import Family, check_action_space, check_observation_space
from ..rl.state import get_state, set_state
from ..rl.worker_set import WorkerSet
from ._checkpoint import read_checkpoint, write_checkpoint
from ._config import AlgorithmConfig
from ._inference import worker_numpy_net

__all__ = ["Algorithm", "ResumeWarning"]


class ResumeWarning(UserWarning):
    """A restored run could not put back everything (an ``AsyncEnv``'s episodes)."""


class Algorithm:
    """Base class; subclasses set ``config_class``, ``loss`` and ``execution_plan``.

    ``family`` names the model protocol the algorithm talks to
    (``asyncflow.rl.models``) and so the action spaces it takes.
    """

    config_class: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    name: ClassVar[str] = "algorithm"
    family: ClassVar[Family] = "actor_critic"
    use_critic: ClassVar[bool] = True
    policy_class: ClassVar[type[ActorCriticPolicy]] = ActorCriticPolicy
    supports_lstm: ClassVar[bool] = False
    """Whether ``use_lstm`` works with this plan's losses (they read only the observations)."""
    workers_learn: ClassVar[bool] = False
    """Whether the workers compute gradients (A3C): then their policy is torch's, never numpy's."""
    supports_learner_precision: ClassVar[bool] = True
    """Whether ``learner_precision`` reaches this algorithm's losses (the actor-critic and DQN
    learners); where it does not, anything but "float32" is a ConfigError."""

    @staticmethod
    def loss(ac: Any, batch: Any, config: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def __init__(self, config: AlgorithmConfig | None = None) -> None:
        config = config if config is not None else self.config_class()
        if not isinstance(config, self.config_class):
            raise ConfigError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, not {type(config).__name__}"
            )
        self.config = config
        self.check_env()  # in the driver, before any process starts
        self.ctx = FlowContext()
        self.runtime: Runtime | None = None
        self.workers = WorkerSet([])
        self.learner: Any = None
        self._stack = contextlib.AsyncExitStack()
        self._plan: AsyncIterator[dict[str, Any]] | None = None
        self._entered = False  # an algorithm runs once: a second 'async with' is refused
        self._plan_broken = False  # the plan was cancelled mid-step: train() builds it again
        self._restoring: dict[str, Any] | None = None
        self.evaluation_workers: WorkerSet | None = None
        self._evaluating: asyncio.Task[dict[str, Any]] | None = None
        self._evaluation: dict[str, Any] | None = None  # the latest finished one
        self.check_normalization()
        self.check_recurrent()
        if config.learner_precision != "float32" and not self.supports_learner_precision:
            raise ConfigError(f"learner_precision: {type(self).__name__}'s losses run in float32 only (PG, A2C, PPO, "
                              "IMPALA, APPO, DQN and Ape-X take 'bfloat16' or 'auto')")  # fmt: skip
        self.numpy_net = worker_numpy_net(self)
        """The network the workers run in numpy (``worker_inference``), or None: torch."""
        if self.numpy_net is not None and config.backend == "process" and config.num_workers > 0:
            prefer_torch_free_fork_server()
        if config.evaluation_interval is not None and not hasattr(self, "action_space"):
            raise ConfigError(f"evaluation_interval: {type(self).__name__} is multi-agent; "
                              "evaluation during training is for single-agent algorithms")  # fmt: skip

    async_env = False
    """Whether the env is an ``AsyncEnv`` (set by ``check_env``)."""

    def check_normalization(self) -> None:
        """``normalize_observations``/``normalize_rewards`` fit this env and these workers."""
        c = self.config
        if not (c.normalize_observations or c.normalize_rewards):
            return
        field = "normalize_observations" if c.normalize_observations else "normalize_rewards"
        if not hasattr(self, "observation_space") or self.async_env or c.vector_env:
            what = "a multi-agent plan" if not hasattr(self, "observation_space") else (
                "an AsyncEnv" if self.async_env else "vector_env=True")  # fmt: skip
            raise ConfigError(f"{field}: not available with {what} (gymnasium envs stepped one by one only)")
        if c.normalize_observations:
            check_normalizable(self.observation_space)

    def check_recurrent(self) -> None:
        """``use_lstm`` fits this algorithm, env and model."""
        c = self.config
        if not c.use_lstm:
            return
        if not self.supports_lstm:
            raise ConfigError(f"use_lstm: not available for {type(self).__name__} "
                              "(PG, A2C, A3C, PPO, IMPALA and APPO have it)")  # fmt: skip
        if self.async_env or c.vector_env:
            raise ConfigError("use_lstm: gymnasium envs stepped one by one only (not vector_env or an AsyncEnv)")
        if c.model is not None and not isinstance(c.model, ModelConfig):
            raise ConfigError("use_lstm: the LSTM core is built in; it does not take a model of your own")

    def new_normalizer(self) -> NormalizerState | None:
        """Empty global statistics for what the config normalizes, or None."""
        c = self.config
        if not (c.normalize_observations or c.normalize_rewards):
            return None
        shape = check_normalizable(self.observation_space) if c.normalize_observations else None
        return NormalizerState.empty(shape, c.normalize_rewards, c.normalize_clip)

    def check_env(self) -> None:
        """Build the environment once to learn its spaces, and the model once on a sample
        observation; raise ConfigError if the spaces or the model do not fit."""
        if self.config.vector_env:
            self.check_vector_env()
        probe = probe_env(self.config.worker_env())
        self.observation_space, self.action_space = probe.observation_space, probe.action_space
        self.async_env = probe.is_async
        self.check_model(self.config.model, self.observation_space, self.action_space)

    def check_vector_env(self) -> None:
        """ConfigError unless ``vector_env`` can be honoured: the env has a vectorized
        implementation, and the plan takes batches whose lanes may lose a row at an
        autoreset (every plan but V-trace's fixed-length sequences)."""
        check_vector_env(self.config.env)

    def check_model(
        self,
        spec: Any,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        family: Family | None = None,
        options: dict[str, Any] | None = None,
        field: str = "env",
    ) -> None:
        """ConfigError unless this algorithm (or one ``family`` of its policies) can act in
        these spaces with the model ``spec`` builds, checked on a sample observation."""
        family = family or self.family
        options = self.model_options() if options is None else options
        custom = spec is not None and not isinstance(spec, ModelConfig)
        if custom and getattr(self.config, "use_lstm", False):
            raise ConfigError("use_lstm: the LSTM core is built in; it does not take a model of your own")
        check_observation_space(observation_space, custom_model=custom, field=field)
        has_action_mask(observation_space, action_space)  # a mask that does not fit the actions: ConfigError
        check_action_space(action_space, family, type(self).__name__, field=field)
        with one_torch_thread():  # small ops, at start-up: no thread team to wait for (nets.py)
            model = build_model(spec, observation_space, action_space, family, **options)
            check_model(model, family, observation_space, action_space, algorithm=type(self).__name__,
                        name=model_name(spec), gaussian=options.get("gaussian", True),
                        num_q=options.get("num_q", 2))  # fmt: skip

    def model_options(self) -> dict[str, Any]:
        """How the built-in model is shaped for this algorithm (``build_model``'s keywords)."""
        return {"hidden": self.config.hidden}

    # -- lifecycle -------------------------------------------------------

    async def __aenter__(self) -> Algorithm:
        if self._entered:
            name = type(self).__name__
            raise ClosedError(f"this {name} has run once already ('async with' it only once): build a new {name}, "
                              f"or continue this run from a checkpoint (await algo.save(path), then "
                              f"{name}.restore(path))")  # fmt: skip
        self._entered = True
        try:
            await self._start()
            if self._restoring is not None:
                await self._load_state(self._restoring)
                self._restoring = None
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the plan (cancelling anything in flight) and stop every worker."""
        plan, self._plan = self._plan, None
        if plan is not None:
            await plan.aclose()  # type: ignore[attr-defined]
        evaluating, self._evaluating = self._evaluating, None
        if evaluating is not None:
            evaluating.cancel()
            await asyncio.wait([evaluating])
        await self._stack.aclose()

    # -- hooks for algorithms that are not actor-critic -----------------

    def policy_factory(self) -> PolicyFactory:
        """What each worker builds its policy with (a ``PolicyFactory``); by default the
        actor-critic policy with this algorithm's model and loss (A3C's workers compute gradients)."""
        c = self.config
        if self.numpy_net is not None:
            return functools.partial(NumpyActorCriticPolicy, net=self.numpy_net)  # type: ignore[return-value]
        return functools.partial(  # type: ignore[return-value]
            self._policy_class(ActorCriticPolicy), model=c.model, hidden=c.hidden, lr=c.lr,
            max_grad_norm=c.max_grad_norm, loss=type(self).loss, loss_config=c, device=c.worker_device,
            **self._recurrent_options(),
        )  # fmt: skip

    def _policy_class(self, default: type[ActorCriticPolicy]) -> type[ActorCriticPolicy]:
        return recurrent_policy(default) if self.config.use_lstm else default

    def _recurrent_options(self) -> dict[str, Any]:
        c = self.config
        return {"lstm_size": c.lstm_size, "max_seq_len": c.max_seq_len} if c.use_lstm else {}

    def worker_options(self) -> dict[str, Any]:
        """How workers postprocess (``RolloutWorker``'s ``postprocess``, ``n_step``)."""
        return {}

    def make_learner(self) -> Any:
        """The learner (a ``Learner``: ``learn_on_batch`` and ``get_weights``), on ``learner_device``.

        By default a ``policy_class`` (an actor-critic policy) with the algorithm's loss.
        """
        c = self.config
        return self._policy_class(self.policy_class)(
            self.observation_space,
            self.action_space,
            model=c.model,
            hidden=c.hidden,
            lr=c.lr,
            max_grad_norm=c.max_grad_norm,
            loss=type(self).loss,
            loss_config=c,
            seed=c.seed,
            device=c.learner_device,
            max_nonfinite_updates=c.max_nonfinite_updates,
            precision=c.learner_precision,
            **self._recurrent_options(),
        )

    def learners(self) -> list[Any]:
        """Every ``Learner`` the plan trains (one, unless the algorithm trains several policies)."""
        return [self.learner]

    async def setup(self, runtime: Runtime) -> None:
        """Start whatever else the plan needs (replay buffers, replay actors)."""

    async def _start(self) -> None:
        c = self.config
        backend = c.backend if c.num_workers > 0 else "local"
        options: dict[str, Any] = {}
        if backend == "ray":
            options["address"] = c.address
        elif backend == "process":
            options["niceness"] = c.worker_niceness
            if self.numpy_net is not None:
                options["preload"] = TORCH_FREE_PRELOAD
        runtime = await self._stack.enter_async_context(open_runtime(backend, **options))  # type: ignore[arg-type]
        self.runtime = runtime
        runtime.check_fits(max(c.num_workers, 1), num_cpus=c.num_cpus_per_worker, num_gpus=c.num_gpus_per_worker)
        spawns = self.spawn_workers(runtime)
        self.learner = self.make_learner()
        for learner in self.learners():
            check_learner(learner, f"{type(self).__name__}.make_learner()")
        set_learner_threads(c.learner_torch_threads or learner_threads(self.learners()))
        handles = await asyncio.gather(*spawns)
        self.workers = WorkerSet(
            handles, timeout_s=c.worker_timeout_s, env=f"env {env_name(c.env)!r}", share=runtime.share,
            normalizer=self.new_normalizer(),
        )  # fmt: skip
        await self.workers.broadcast(self.learner.get_weights())  # one starting point everywhere
        if c.evaluation_interval is not None:
            evaluators = await asyncio.gather(*self.spawn_evaluation_workers(runtime))
            where = f"env {env_name(c.env)!r}"
            self.evaluation_workers = WorkerSet(evaluators, timeout_s=c.worker_timeout_s, env=where)
        await self.setup(runtime)
        self.ctx = FlowContext(start_time=time.perf_counter(), smoothing_episodes=c.metrics_smoothing_episodes)

    def spawn_workers(self, runtime: Runtime) -> list[Awaitable[ActorHandle]]:
        """Start the rollout workers (awaitables, gathered while the learner is built)."""
        c = self.config
        if self.async_env:
            worker: Any = AsyncRolloutWorker.create
            options: dict[str, Any] = {"min_ready": c.min_ready,
                                       "ready_timeout_s": c.ready_timeout_s,
                                       "env_step_timeout_s": c.env_step_timeout_s,
                                       "restart_failed_envs": c.restart_failed_envs is not False}  # fmt: skip
        else:
            worker, options = RolloutWorker, {"vector_env": c.vector_env,
                                              "normalize_observations": c.normalize_observations,
                                              "normalize_rewards": c.normalize_rewards,
                                              "normalize_clip": c.normalize_clip,
                                              "restart_failed_envs": bool(c.restart_failed_envs)}  # fmt: skip
        factory = self.policy_factory()
        return [
            runtime.spawn(
                worker,
                c.worker_env(),
                policy_factory=factory,
                num_envs=c.num_envs_per_worker,
                rollout_fragment_length=c.rollout_fragment_length,
                gamma=c.gamma,
                lam=c.lam,
                seed=c.seed,
                worker_index=i + 1,
                use_critic=self.use_critic,
                check_env_output=c.check_env_output,
                **options,
                **self.worker_options(),
                name=f"{self.name}-worker-{i + 1}",
                max_restarts=c.max_worker_restarts,
                num_cpus=c.num_cpus_per_worker,
                num_gpus=c.num_gpus_per_worker,
            )
            for i in range(max(c.num_workers, 1))
        ]

    def spawn_evaluation_workers(self, runtime: Runtime) -> list[Awaitable[ActorHandle]]:
        """Start the evaluation workers: the training workers' policy, on envs and seeds of their own."""
        c = self.config
        factory = self.policy_factory()
        return [
            runtime.spawn(
                EvaluationWorker,
                c.worker_env(training=False),
                policy_factory=factory,
                seed=c.seed + 10_000 + 1_000 * i,
                worker_index=c.num_workers + 1 + i,
                explore=c.evaluation_explore,
                async_env=self.async_env,
                name=f"{self.name}-evaluation-{i + 1}",
                max_restarts=c.max_worker_restarts,
            )
            for i in range(c.evaluation_num_workers)
        ]

    async def evaluate(self) -> dict[str, Any]:
        """Evaluate the learner's current weights now (``evaluation_episodes`` whole episodes on
        the evaluation workers) and wait for it; what ``train()`` results carry as ``evaluation``."""
        workers = self.evaluation_workers
        if workers is None:
            raise RuntimeError(f"{type(self).__name__}.evaluate() needs evaluation_interval set, inside 'async with'")
        weights, iteration = self.learner.get_weights(), self.ctx.iteration
        normalizer = self.workers.normalizer.copy() if self.workers.normalizer is not None else None
        played = await workers.evaluate(weights, self.config.evaluation_episodes, normalizer)
        self._evaluation = summarize_episodes(played, iteration)
        return self._evaluation

    def _with_evaluation(self, result: dict[str, Any]) -> dict[str, Any]:
        """Start an evaluation when one is due, in the background (sampling and training go on);
        attach the latest finished one to ``result``."""
        interval = self.config.evaluation_interval
        running = self._evaluating
        if running is not None and running.done():
            self._evaluating = None
            running.result()  # an evaluation that failed fails the run here
        if interval is not None and self._evaluating is None and result["training_iteration"] % interval == 0:
            self._evaluating = asyncio.ensure_future(self.evaluate())
        if self._evaluation is not None:
            result["evaluation"] = dict(self._evaluation)
        return result

    # -- checkpoints -----------------------------------------------------

    async def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the complete training state to ``path`` (one file, written atomically).

        Learner weights, target networks and optimizer state, every worker
        (environments mid-episode, exploration schedules, random generators),
        counters and the episode window, the global random generators, and the
        replay buffer where the algorithm has one (``checkpoint_replay_buffer``).
        Call it between iterations, not while ``train()`` is inside one.
        """
        if self.learner is None:
            raise RuntimeError(f"use 'async with {type(self).__name__}(config) as algo' before save()")
        payload = {
            "algorithm": self.name,
            "config": self.config.to_state(),
            "learner": await in_learner_thread(get_state, self.learner),  # between two learner steps
            "workers": await self.workers.get_states(),
            "extra": await self.extra_state(),
            "ctx": self.ctx.get_state(),
            "normalizer": self.workers.normalizer,
        }
        return write_checkpoint(path, payload)

    @classmethod
    def restore(cls, path: str | os.PathLike[str], *, trust_code: bool = False, **changes: Any) -> Algorithm:
        """An algorithm that continues from a checkpoint once entered (``async with``).

        Called on ``Algorithm`` itself, it builds whichever algorithm saved the file.
        ``changes`` replace config fields that do not shape the state (for
        instance ``learner_device="cpu"`` for a run trained on a GPU).

        Loading runs no code from the file (``_checkpoint.py``). Two things in it only
        unpickling brings back, and ``trust_code=True`` loads them: a config value with no
        import path (a lambda; without trust that is a ``CheckpointTrustError``), and each
        worker's environments mid-episode (without trust the run goes on from the saved
        learner, counters and replay buffers, its environments starting new episodes).
        Checkpoints of formats 1 and 2 (pickles) need ``trust_code=True``.
        """
        from . import ALGORITHMS

        payload = read_checkpoint(path, trust_code=trust_code)
        name = payload["algorithm"]
        target = ALGORITHMS.get(name) if cls is Algorithm else cls
        if target is None or target.name != name:
            raise CheckpointError(f"{path} holds a {name!r} checkpoint, not {cls.name!r}")
        saved = payload["config"]
        if isinstance(saved, AlgorithmConfig):  # formats 1 and 2 pickled the config itself
            config = saved.replace(**changes) if changes else saved
        elif isinstance(saved, dict):
            config = target.config_class.from_state(saved, str(path), **changes)
        else:
            raise CheckpointError(f"{path} is damaged: its config is a {type(saved).__name__}")
        algo = target(config)
        algo._restoring = payload
        return algo

    async def _load_state(self, payload: dict[str, Any]) -> None:
        states = payload["workers"]
        if self.async_env:
            warnings.warn(f"{env_name(self.config.env)!r} is an AsyncEnv, whose episodes cannot be saved "
                          "mid-episode: the resumed run starts fresh episodes (policy, counters and "
                          "statistics continue)", ResumeWarning, stacklevel=2)  # fmt: skip
        if len(states) != len(self.workers):
            raise CheckpointError(f"the checkpoint has {len(states)} workers, this run {len(self.workers)}")
        await in_learner_thread(set_state, self.learner, payload["learner"])
        await self.workers.set_states(states)
        self.workers.latest_weights = self.learner.get_weights()  # what a restarted worker gets
        await self.load_extra_state(payload["extra"])
        self.ctx.set_state(payload["ctx"])
        self.workers.normalizer = payload.get("normalizer")  # the workers' own counts came with their state

    def policy_from_checkpoint(self) -> WorkerPolicy:
        """The workers' policy with the learner's weights of the checkpoint this algorithm was
        restored from (``restore``), built in this process: no worker starts (``asyncflow evaluate``)."""
        if self._restoring is None:
            raise RuntimeError(f"{type(self).__name__}.policy_from_checkpoint() needs an algorithm from restore()")
        learner = self.make_learner()
        set_state(learner, self._restoring["learner"])
        policy = self.policy_factory()(self.observation_space, self.action_space, seed=0, worker_index=1)
        policy.set_weights(learner.get_weights())
        return policy

    def normalizer_from_checkpoint(self) -> NormalizerState | None:
        """The observation statistics saved in the checkpoint this algorithm was restored
        from (None: the run did not normalize observations, or this is not a restored one)."""
        state = (self._restoring or {}).get("normalizer")
        return state if state is not None and state.obs is not None else None

    async def extra_state(self) -> Any:
        """State beyond learner, workers and counters (replay buffers); ``None`` if none."""
        return None

    async def load_extra_state(self, state: Any) -> None:
        """Put back what ``extra_state`` returned."""

    # -- training --------------------------------------------------------

    def execution_plan(self, workers: WorkerSet, learner: Any, config: Any) -> AsyncIterator[dict[str, Any]]:
        """The plan: an async iterator of results, composed from ``asyncflow.flow`` operators."""
        raise NotImplementedError  # pragma: no cover - every algorithm defines its plan

    async def train(self) -> AsyncIterator[dict[str, Any]]:
        """One result mapping per training iteration, for as long as you iterate.

        Leaving the loop (``break``) and iterating ``train()`` again goes on with the next
        iteration. So does a loop that was cancelled (``asyncio.timeout`` around it, a host
        application's pause): what was in flight is dropped (samples being collected, a batch
        being put together; a learner step in progress finishes first), the workers get the
        learner's weights, and the plan is built again from the counters, which go on.
        """
        if self.learner is None:
            raise RuntimeError(f"use 'async with {type(self).__name__}(config) as algo' before train()")
        set_context(self.ctx)  # the operators find their context here
        if self._plan is None or self._plan_broken:
            if self._plan_broken:  # a step may have trained without sending the weights
                await self.workers.broadcast(await in_learner_thread(self.learner.get_weights))
            self._plan, self._plan_broken = self.execution_plan(self.workers, self.learner, self.config), False
        plan = self._plan
        while True:
            try:
                result = await anext(plan)
            except StopAsyncIteration:
                return
            except BaseException:
                # An exception (cancellation above all) that went through the plan has ended
                # it: every operator in it is closed. The next train() builds a new one.
                self._plan_broken = True
                raise
            yield self._with_evaluation(result)


def learner_threads(learners: list[Any]) -> int:
    """One torch thread for the learner, or every core (up to 8) where a model convolves."""
    models = [getattr(learner, "model", None) for learner in learners]
    convolves = any(
        isinstance(module, torch.nn.Conv1d | torch.nn.Conv2d | torch.nn.Conv3d)
        for model in models
        if isinstance(model, torch.nn.Module)
        for module in model.modules()
    )
    return min(len(os.sched_getaffinity(0)), 8) if convolves else 1
