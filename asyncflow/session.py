"""``Algorithm``: the session that owns one run of an algorithm's recipe.

::

    async with PPO(PPOConfig(env="CartPole-v1")) as algo:   # PPO is Algorithm with PPO's recipe
        async for result in algo.train():
            ...

An algorithm module declares what it needs (``algorithms/_recipe.py``); everything that
runs it is here, the same for every algorithm:

- in the driver, before any process starts: the env is built once to learn its spaces, the
  config is checked against the recipe's capabilities (``check_capabilities``) and each
  policy's model against its spaces;
- ``async with``: the runtime, the rollout workers (restarted by their restart policy, each
  call with a deadline: ``WorkerSet``), the learner, its thread (``LearnerThread``), the
  plan's resources, evaluation workers, and the run's ``FlowContext``, whose ``TaskSet``
  holds every background task (evaluation, the operators' producers);
- ``train()``: the recipe's plan over those inputs (``Run``); cancelled mid-step, it is
  built again and goes on;
- ``save()`` / ``restore()``: checkpoints (``algorithms/_checkpoint.py``);
- leaving the block: the plan is closed, every task cancelled and awaited, the learner's
  thread ended, every worker stopped and every segment unlinked.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch

from ._fields import flatten, to_dict
from .actors import ActorHandle, Runtime, open_runtime, prefer_torch_free_fork_server, torch_free_preload
from .algorithms._checkpoint import read_checkpoint, write_checkpoint
from .algorithms._config import AlgorithmConfig
from .algorithms._inference import worker_numpy_net
from .algorithms._multi_agent import multi_agent_recipe
from .algorithms._recipe import MultiAgentWorkers, PolicyModel, Recipe, Run, Spaces, Workers, check_capabilities
from .errors import CheckpointError, ClosedError, ConfigError
from .flow._context import NUM_ENV_STEPS_SAMPLED, FlowContext, set_context
from .flow.learner_thread import LearnerThread, loop_thread_on_one_torch_thread
from .flow.metrics import Result
from .rl.data.state import get_state, set_state
from .rl.envs.action_mask import has_action_mask
from .rl.envs.checks import env_name
from .rl.envs.make import probe_env
from .rl.envs.multi_agent import make_multi_agent_env
from .rl.envs.spaces import check_action_space, check_observation_space
from .rl.learners.schedule import scheduled
from .rl.models import build_model, check_model, model_name
from .rl.models.config import custom_model
from .rl.models.nets import one_torch_thread
from .rl.offline.minari_format import check_space, env_spec_json
from .rl.offline.writer import Output
from .rl.policies.numpy_policy import NumpyActorCriticPolicy
from .rl.policy import PolicyFactory, WorkerPolicy, check_learner
from .rl.sampling.async_worker import AsyncRolloutWorker
from .rl.sampling.evaluation_worker import EvaluationWorker, MultiAgentEvaluationWorker, summarize_episodes
from .rl.sampling.multi_agent_worker import EpisodeMapping, MultiAgentRolloutWorker
from .rl.sampling.normalization import NormalizerState, check_normalizable
from .rl.sampling.rollout_worker import RolloutWorker
from .rl.sampling.worker_set import WorkerSet

__all__ = ["Algorithm", "ResumeWarning"]

MAPPING_PROBES = 10
"""Episodes over which a multi-agent run asks its policy mapping where each agent goes, before any process starts."""


class ResumeWarning(UserWarning):
    """A restored run could not put back everything (an ``AsyncEnv``'s episodes)."""


class Algorithm:
    """A session that runs one algorithm's ``recipe`` (its subclasses: ``PPO``, ``DQN``, ...)."""

    recipe: ClassVar[Recipe[Any, Any, Any]]
    name: ClassVar[str] = "algorithm"
    """The recipe's name (on the command line, in checkpoints)."""
    config_class: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    """The recipe's config class."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "loss" in cls.__dict__:  # an algorithm on another loss: class NaNPPO(PPO): loss = staticmethod(fn)
            loss = cls.__dict__["loss"]
            cls.recipe = cls.recipe.with_loss(loss.__func__ if isinstance(loss, staticmethod) else loss)
        if "recipe" in cls.__dict__:
            cls.name, cls.config_class = cls.recipe.name, cls.recipe.config

    def __init__(self, config: AlgorithmConfig | None = None) -> None:
        recipe = self.recipe
        config = config if config is not None else recipe.config()
        if not isinstance(config, recipe.config):
            raise ConfigError(f"{type(self).__name__} needs a {recipe.config.__name__}, not {type(config).__name__}")
        self.config: Any = config
        if config.multi_agent is not None:  # this algorithm once per policy (_multi_agent.py)
            self.recipe = multi_agent_recipe(recipe)  # type: ignore[misc]  # this run's, over the class's
        self.spaces: Any = self._check_env()  # in the driver, before any process starts
        self.numpy_net = worker_numpy_net(self.recipe, config, self.spaces, type(self).__name__)
        """The network the workers run in numpy (``rollouts.inference``), or None: torch."""
        if self.numpy_net is not None and config.rollouts.backend == "process" and config.rollouts.num_workers > 0:
            prefer_torch_free_fork_server()
        self.ctx = FlowContext()
        self.runtime: Runtime | None = None
        self.workers = WorkerSet([])
        self.evaluation_workers: WorkerSet | None = None
        self.learner: Any = None
        self.resources: Any = None
        """What the plan uses beside workers and learner (a replay buffer, replay shards)."""
        self._stack = contextlib.AsyncExitStack()
        self._plan: AsyncIterator[Result] | None = None
        self._entered = False  # an algorithm runs once: a second 'async with' is refused
        self._plan_broken = False  # the plan was cancelled mid-step: train() builds it again
        self._lr: float | None = None  # the rate lr_schedule last set (None: not yet)
        self._restoring: dict[str, Any] | None = None
        self._evaluating: asyncio.Task[dict[str, Any]] | None = None
        self._evaluation: dict[str, Any] | None = None  # the latest finished one

    # -- the env, the config and the models: checked in the driver ---------------------

    @property
    def observation_space(self) -> Any:
        """The observation space (a single-agent algorithm's)."""
        return self._single().observation

    @property
    def action_space(self) -> Any:
        """The action space (a single-agent algorithm's)."""
        return self._single().action

    def _single(self) -> Spaces:
        if not isinstance(self.spaces, Spaces):
            raise AttributeError(f"{type(self).__name__} is multi-agent: its spaces are by policy (algo.spaces)")
        return self.spaces

    def _check_env(self) -> Spaces | dict[str, Spaces]:
        """Build the env once to learn its spaces; check the config against the recipe and each
        policy's model against its spaces; ConfigError if anything does not fit."""
        recipe, c = self.recipe, self.config
        models = recipe.models(c)
        if recipe.capabilities.multi_agent:
            check_capabilities(recipe, c, is_async=False)
            self.async_env = False
            return self._check_multi_agent_env(models)
        data = None if recipe.dataset is None else recipe.dataset(c)
        if data is not None and c.env is None and c.evaluation.interval is not None and data.env_id is not None:
            c = self.config = dataclasses.replace(c, env=data.env_id)  # evaluate in the data's registered env
        if data is not None and c.env is None:  # an offline algorithm without an env: the data's spaces
            if c.evaluation.interval is not None:
                raise ConfigError("evaluation_interval: evaluation plays episodes in an env, and the data names "
                                  "none that gymnasium has registered here: give env (--env)")  # fmt: skip
            self.async_env = False
            check_capabilities(recipe, c, is_async=False)
            spaces = Spaces(data.observation_space, data.action_space)
            self._check_model(models["default"], spaces)
            return spaces
        probe = probe_env(c.worker_env())
        self.async_env = probe.is_async
        check_capabilities(recipe, c, probe.is_async)
        spaces = Spaces(probe.observation_space, probe.action_space)
        if data is not None:
            data.check_fits(spaces.observation, spaces.action, f"env {env_name(c.env)!r}")
        if c.environment.normalize_observations:
            check_normalizable(spaces.observation)
        if c.output is not None:
            check_space(spaces.observation, "output: the observation space")
            check_space(spaces.action, "output: the action space")
        if recipe.model_spaces is not None:  # its model sees part of the spaces (QMIX: one agent's)
            self._check_model(models["default"], Spaces(*recipe.model_spaces(spaces.observation, spaces.action)))
        else:
            self._check_model(models["default"], spaces)
        return spaces

    def _check_multi_agent_env(self, models: Mapping[str, PolicyModel]) -> dict[str, Spaces]:
        """Each policy's spaces: those of the agents mapped to it over the first episodes (which
        must all have the same), or its ``PolicySpec``'s; every mapping must name a policy."""
        c = self.config
        mapping = self.recipe.workers(c, None)
        assert isinstance(mapping, MultiAgentWorkers)
        env = make_multi_agent_env(c.env)
        given = {} if c.multi_agent is None else {
            pid: Spaces(spec.observation_space, spec.action_space)
            for pid, spec in c.multi_agent.policies.items() if spec.observation_space is not None}  # fmt: skip

        def trainer(pid: str) -> str:  # the algorithm that trains a policy, by its class's name
            other = None if c.multi_agent is None else c.multi_agent.policies[pid].algorithm
            if other is None:
                return ""
            from .algorithms import ALGORITHMS

            return ALGORITHMS[other].__name__

        policy_of = EpisodeMapping(mapping.mapping)
        try:
            spaces: dict[str, Spaces] = dict(given)
            whose: dict[str, str] = {}
            for episode in range(MAPPING_PROBES):
                for agent in env.possible_agents:
                    pid = policy_of(agent, episode)
                    if pid not in models:
                        raise ConfigError(f"policy_mapping_fn: {agent!r} -> {pid!r}; expected one of {sorted(models)}")
                    have = Spaces(env.observation_spaces[agent], env.action_spaces[agent])
                    if pid not in spaces:
                        self._check_model(models[pid], have, field=f"env ({agent})", algorithm=trainer(pid))
                        spaces[pid], whose[pid] = have, agent
                    elif spaces[pid] != have:
                        other = f"those of agent {whose[pid]!r}" if pid in whose else "its PolicySpec's"
                        raise ConfigError(f"policy_mapping_fn: {agent!r} -> {pid!r}, whose spaces are {other} "
                                          f"({spaces[pid].observation}, {spaces[pid].action}), not {agent!r}'s "
                                          f"({have.observation}, {have.action})")  # fmt: skip
            for pid, have in given.items():
                if pid not in whose:
                    self._check_model(models[pid], have, field=f"multi_agent.policies[{pid!r}]", algorithm=trainer(pid))
            missing = sorted(set(models) - set(spaces))
            if missing:
                raise ConfigError(f"policy_mapping_fn: every policy needs an agent (none maps to {missing} in the "
                                  f"first {MAPPING_PROBES} episodes; or give a PolicySpec its spaces)")  # fmt: skip
            return {pid: spaces[pid] for pid in models}
        finally:
            env.close()

    def _check_model(self, policy: PolicyModel, spaces: Spaces, field: str = "env", algorithm: str = "") -> None:
        """ConfigError unless the policy can act in these spaces with the model it builds,
        checked on a sample observation (``algorithm``: who trains it, if not this run's)."""
        custom = custom_model(policy.spec) is not None
        name, options = algorithm or type(self).__name__, dict(policy.options)
        check_observation_space(spaces.observation, custom_model=custom, field=field)
        has_action_mask(spaces.observation, spaces.action)  # a mask that does not fit the actions: ConfigError
        check_action_space(spaces.action, policy.family, name, field=field)
        with one_torch_thread():  # small ops, at start-up: no thread team to wait for (nets.py)
            model = build_model(policy.spec, spaces.observation, spaces.action, policy.family, **options)
            check_model(model, policy.family, spaces.observation, spaces.action, algorithm=name,
                        name=model_name(policy.spec), gaussian=options.get("gaussian", True),
                        num_q=options.get("num_q", 2))  # fmt: skip

    def new_normalizer(self) -> NormalizerState | None:
        """Empty global statistics for what the config normalizes, or None."""
        env = self.config.environment
        if not (env.normalize_observations or env.normalize_rewards):
            return None
        shape = check_normalizable(self.observation_space) if env.normalize_observations else None
        return NormalizerState.empty(shape, env.normalize_rewards, env.normalize_clip)

    def worker_policy(self) -> PolicyFactory:
        """What each worker builds its policy with: the recipe's, or its numpy twin (``numpy_net``)."""
        if self.numpy_net is not None:
            return functools.partial(NumpyActorCriticPolicy, net=self.numpy_net)  # type: ignore[return-value]
        spec = self.recipe.workers(self.config, self.spaces)
        assert isinstance(spec, Workers), "a multi-agent recipe's workers build their own policies"
        return spec.policy

    # -- lifecycle ---------------------------------------------------------------------

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
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the plan (cancelling anything in flight), every background task, the learner's
        thread, and stop every worker."""
        plan, self._plan = self._plan, None
        if plan is not None:
            await plan.aclose()  # type: ignore[attr-defined]
        await self.ctx.tasks.aclose()
        await self._stack.aclose()

    async def _start(self) -> None:
        recipe, c = self.recipe, self.config
        self._stack.enter_context(loop_thread_on_one_torch_thread())
        backend = c.rollouts.backend if c.rollouts.num_workers > 0 else "local"
        options: dict[str, Any] = {}
        if backend == "ray":
            options["address"] = c.rollouts.address
        elif backend == "process":
            options["niceness"] = c.rollouts.niceness
            if self.numpy_net is not None:
                options["preload"] = torch_free_preload()
        runtime = await self._stack.enter_async_context(open_runtime(backend, **options))  # type: ignore[arg-type]
        self.runtime = runtime
        rollouts = c.rollouts
        if recipe.samples:
            count = max(rollouts.num_workers, 1)
            runtime.check_fits(count, num_cpus=rollouts.num_cpus_per_worker, num_gpus=rollouts.num_gpus_per_worker)
        spawns = self._spawn_workers(runtime) if recipe.samples else []
        self.learner = recipe.learner(c, self.spaces)
        learners = recipe.learners(self.learner)
        for learner in learners:
            check_learner(learner, f"{type(self).__name__}'s learner")
        thread = LearnerThread(c.learner.torch_threads or learner_threads(learners))
        self._stack.callback(thread.close)
        handles = await asyncio.gather(*spawns)
        self.workers = WorkerSet(
            handles, timeout_s=rollouts.timeout_s, env=f"env {env_name(c.env)!r}", share=runtime.share,
            normalizer=self.new_normalizer(),
        )  # fmt: skip
        await self.workers.broadcast(self.learner.get_weights())  # one starting point everywhere
        if c.evaluation.interval is not None:
            evaluators = await asyncio.gather(*self._spawn_evaluation_workers(runtime))
            where = f"env {env_name(c.env)!r}"
            self.evaluation_workers = WorkerSet(evaluators, timeout_s=rollouts.timeout_s, env=where)
        if recipe.resources is not None:
            self.resources = await recipe.resources.open(c, runtime)
        self.ctx = FlowContext(start_time=time.perf_counter(), smoothing_episodes=c.metrics_smoothing_episodes,
                               learner_thread=thread)  # fmt: skip

    def _spawn_workers(self, runtime: Runtime) -> list[Awaitable[ActorHandle]]:
        """Start the rollout workers (awaitables, gathered while the learner is built)."""
        c, name = self.config, self.name
        spec = self.recipe.workers(c, self.spaces)
        common: dict[str, Any] = {"rollout_fragment_length": c.rollouts.fragment_length, "gamma": c.gamma,
                                  "seed": c.seed, "check_env_output": c.environment.check_output}  # fmt: skip
        worker: Any
        if isinstance(spec, MultiAgentWorkers):
            worker = MultiAgentRolloutWorker
            options: dict[str, Any] = {
                "policies": spec.policies,
                "policy_mapping_fn": spec.mapping,
                "lam": spec.lam,
                "spaces": {pid: (s.observation, s.action) for pid, s in self.spaces.items()},
            }
        else:
            common |= {"policy_factory": self.worker_policy(), "num_envs": c.rollouts.num_envs_per_worker,
                       "lam": spec.lam, "use_critic": spec.use_critic, "postprocess": spec.postprocess,
                       "n_step": spec.n_step}  # fmt: skip
            env = c.environment
            if self.async_env:
                worker = AsyncRolloutWorker.create
                options = {"min_ready": env.min_ready, "ready_timeout_s": env.ready_timeout_s,
                           "env_step_timeout_s": env.step_timeout_s,
                           "restart_failed_envs": env.restart_failed is not False}  # fmt: skip
            else:
                worker = RolloutWorker
                options = {"vector_env": c.rollouts.vector_env, "normalize_observations": env.normalize_observations,
                           "normalize_rewards": env.normalize_rewards, "normalize_clip": env.normalize_clip,
                           "restart_failed_envs": bool(env.restart_failed)}  # fmt: skip

        if c.output is not None and not isinstance(spec, MultiAgentWorkers):
            options["output"] = Output(c.output, f"asyncflow {self.recipe.name}", env_spec_json(c.env))
        return [
            runtime.spawn(
                worker,
                c.worker_env(),
                **common,
                **options,
                worker_index=i + 1,
                name=f"{name}-worker-{i + 1}",
                max_restarts=c.rollouts.max_restarts,
                num_cpus=c.rollouts.num_cpus_per_worker,
                num_gpus=c.rollouts.num_gpus_per_worker,
            )
            for i in range(max(c.rollouts.num_workers, 1))
        ]

    def _spawn_evaluation_workers(self, runtime: Runtime) -> list[Awaitable[ActorHandle]]:
        """Start the evaluation workers: the training workers' policy, on envs and seeds of their own."""
        c = self.config
        if self.recipe.capabilities.multi_agent:  # a policy per id, agents mapped as in training
            spec = self.recipe.workers(c, self.spaces)
            assert isinstance(spec, MultiAgentWorkers)
            return [
                runtime.spawn(
                    MultiAgentEvaluationWorker,
                    c.worker_env(training=False),
                    policy_factories={pid: mapped.factory for pid, mapped in spec.policies.items()},
                    spaces={pid: (s.observation, s.action) for pid, s in self.spaces.items()},
                    policy_mapping_fn=spec.mapping,
                    seed=c.seed + 10_000 + 1_000 * i,
                    worker_index=c.rollouts.num_workers + 1 + i,
                    explore=c.evaluation.explore,
                    name=f"{self.name}-evaluation-{i + 1}",
                    max_restarts=c.rollouts.max_restarts,
                )
                for i in range(c.evaluation.num_workers)
            ]
        factory = self.worker_policy()
        return [
            runtime.spawn(
                EvaluationWorker,
                c.worker_env(training=False),
                policy_factory=factory,
                seed=c.seed + 10_000 + 1_000 * i,
                worker_index=c.rollouts.num_workers + 1 + i,
                explore=c.evaluation.explore,
                async_env=self.async_env,
                name=f"{self.name}-evaluation-{i + 1}",
                max_restarts=c.rollouts.max_restarts,
            )
            for i in range(c.evaluation.num_workers)
        ]

    # -- evaluation --------------------------------------------------------------------

    async def evaluate(self) -> dict[str, Any]:
        """Evaluate the learner's current weights now (``evaluation.episodes`` whole episodes on
        the evaluation workers) and wait for it; what ``train()`` results carry as ``evaluation``."""
        workers = self.evaluation_workers
        if workers is None:
            raise RuntimeError(f"{type(self).__name__}.evaluate() needs evaluation_interval set, inside 'async with'")
        weights, iteration = self.learner.get_weights(), self.ctx.iteration
        normalizer = self.workers.normalizer.copy() if self.workers.normalizer is not None else None
        played = await workers.evaluate(weights, self.config.evaluation.episodes, normalizer)
        self._evaluation = summarize_episodes(played, iteration)
        return self._evaluation

    def _with_evaluation(self, result: Result) -> Result:
        """Start an evaluation when one is due, in the background (sampling and training go on);
        attach the latest finished one to ``result``."""
        interval = self.config.evaluation.interval
        running = self._evaluating
        if running is not None and running.done():
            self._evaluating = None
            running.result()  # an evaluation that failed fails the run here
        if interval is not None and self._evaluating is None and result["training_iteration"] % interval == 0:
            self._evaluating = self.ctx.tasks.spawn(self.evaluate(), "asyncflow evaluation")
        if self._evaluation is not None:
            result["evaluation"] = dict(self._evaluation)
        return result

    # -- checkpoints -------------------------------------------------------------------

    async def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the training state to ``path`` (one file, written atomically).

        Learner weights, target networks and optimizer state, every worker (exploration
        schedules, random generators, and, pickled, its environments mid-episode), counters
        and the episode window, and the plan's resources (the replay buffer, unless
        ``checkpoint_replay_buffer=False``). Call it between iterations, not while
        ``train()`` is inside one.
        """
        if self.learner is None:
            raise RuntimeError(f"use 'async with {type(self).__name__}(config) as algo' before save()")
        resources = self.recipe.resources
        payload = {
            "algorithm": self.name,
            "config": self.config.to_state(),
            "learner": await self.ctx.learner_thread.run(get_state, self.learner),  # between two learner steps
            "workers": await self.workers.get_states(),
            "extra": await resources.save(self.config, self.resources) if resources is not None else None,
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
        from .algorithms import ALGORITHMS

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
        await self.ctx.learner_thread.run(set_state, self.learner, payload["learner"])
        if any(state is None for state in states):  # formats 1 and 2: pickled workers of another layout
            warnings.warn(f"a checkpoint of format {payload.get('format')} keeps its workers as an older "
                          "asyncflow had them: the resumed run's workers start new episodes with the "
                          "learner's weights (policy, counters and statistics continue)",
                          ResumeWarning, stacklevel=2)  # fmt: skip
            await self.workers.broadcast(self.learner.get_weights())
        else:
            await self.workers.set_states(states)
        self.workers.latest_weights = self.learner.get_weights()  # what a restarted worker gets
        resources = self.recipe.resources
        if resources is not None and payload["extra"] is not None:
            self.resources = await resources.load(self.config, self.resources, payload["extra"])
        self.ctx.set_state(payload["ctx"])
        self.workers.normalizer = payload.get("normalizer")  # the workers' own counts came with their state

    def policy_from_checkpoint(self, policy_id: str | None = None) -> WorkerPolicy:
        """The workers' policy with the learner's weights of the checkpoint this algorithm was
        restored from (``restore``), built in this process: no worker starts (``asyncflow evaluate``).
        A multi-agent run's: the policy ``policy_id``'s."""
        if self._restoring is None:
            raise RuntimeError(f"{type(self).__name__}.policy_from_checkpoint() needs an algorithm from restore()")
        learner = self.recipe.learner(self.config, self.spaces)
        set_state(learner, self._restoring["learner"])
        if isinstance(self.spaces, Spaces):
            policy = self.worker_policy()(self.observation_space, self.action_space, seed=0, worker_index=1)
            policy.set_weights(learner.get_weights())
            return policy
        if policy_id is None or policy_id not in self.spaces:
            raise ConfigError(f"policy: this multi-agent run's policies are {sorted(self.spaces)}; name one "
                              f"(--policy), got {policy_id!r}")  # fmt: skip
        spec = self.recipe.workers(self.config, self.spaces)
        assert isinstance(spec, MultiAgentWorkers)
        spaces = self.spaces[policy_id]
        policy = spec.policies[policy_id].factory(spaces.observation, spaces.action, seed=0, worker_index=1)
        policy.set_weights(learner.get_weights()[policy_id])
        return policy  # type: ignore[no-any-return]

    def normalizer_from_checkpoint(self) -> NormalizerState | None:
        """The observation statistics saved in the checkpoint this algorithm was restored
        from (None: the run did not normalize observations, or this is not a restored one)."""
        state = (self._restoring or {}).get("normalizer")
        return state if state is not None and state.obs is not None else None

    # -- changing the config while training ---------------------------------------------

    def live_changes(self, **changes: Any) -> tuple[AlgorithmConfig, set[str]]:
        """The config with ``changes`` applied (checked) and the fields they change, each one
        ``change_config`` may change while training (a ``ConfigError`` names one that it may not)."""
        new = self.config.replace(**changes)
        old_fields, new_fields = flatten(to_dict(self.config)), flatten(to_dict(new))
        changed = {path for path, value in new_fields.items() if old_fields.get(path) != value}
        live = {"learner.lr", *self.recipe.live_fields}
        if "learner.lr" in changed and new.learner.lr_schedule is not None:
            raise ConfigError("learner.lr: this run's rate follows learner.lr_schedule; change the schedule "
                              "before training, not the rate while it trains")  # fmt: skip
        for name, schedule in self.recipe.schedules:
            if name in changed and getattr(new, schedule) is not None:
                raise ConfigError(f"{name}: this run's {name} follows {schedule}; change the schedule before "
                                  f"training, not the value while it trains")  # fmt: skip
        if refused := sorted(changed - live):
            can = ", ".join(sorted(live))
            raise ConfigError(f"{refused[0]}: {self.name} cannot change it while training (its workers or its "
                              f"learner's construction read it); it can change {can}")  # fmt: skip
        return new, changed

    async def change_config(self, **changes: Any) -> None:
        """Change config fields between two iterations, training going on: ``lr`` (every optimizer
        of the learner takes it at its next step) and the fields the recipe lists as live
        (``Recipe.live_fields``: the loss coefficients and batch sizes of PG, A2C, PPO and IMPALA,
        PPO's epochs), which the loss reads at its next step and the plan when it is built again,
        before the next iteration.
        Checkpoints save the changed config. Any other field is a ``ConfigError``."""
        if self.learner is None:
            raise RuntimeError(f"use 'async with {type(self).__name__}(config) as algo' before change_config()")
        new, _ = self.live_changes(**changes)
        for learner in self.recipe.learners(self.learner):
            await self.ctx.learner_thread.run(_reconfigure, learner, new)
        self.config = new
        self._plan_broken = True  # built again from the new config by the next train()

    # -- training ----------------------------------------------------------------------

    async def train(self) -> AsyncIterator[Result]:
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
                await self.workers.broadcast(await self.ctx.learner_thread.run(self.learner.get_weights))
            run = Run(self.config, self.workers, self.learner, self.resources)
            self._plan, self._plan_broken = self.recipe.plan(run), False
        plan = self._plan
        while True:
            await self._follow_schedules()
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

    async def _follow_schedules(self) -> None:
        """``learner.lr_schedule``: before each iteration, the learner's optimizers take the
        rate the schedule gives for the env steps sampled so far (a resumed run's go on); and
        each of the recipe's ``schedules`` that the config sets: the field takes its value, which
        the loss reads at its next step (the config a checkpoint saves has it)."""
        steps = self.ctx.counters.get(NUM_ENV_STEPS_SAMPLED, 0)
        schedule = self.config.learner.lr_schedule
        if schedule is not None and (lr := scheduled(schedule, steps)) != self._lr:
            for learner in self.recipe.learners(self.learner):
                await self.ctx.learner_thread.run(_set_lr, learner, lr)
            self._lr = lr
        changes = {}
        for name, schedule_field in self.recipe.schedules:
            points = getattr(self.config, schedule_field)
            if points is not None and (value := scheduled(points, steps)) != getattr(self.config, name):
                changes[name] = value
        if changes:
            self.config = self.config.replace(**changes)
            for learner in self.recipe.learners(self.learner):
                await self.ctx.learner_thread.run(_set_loss_config, learner, self.config)


def _reconfigure(learner: Any, config: AlgorithmConfig) -> None:
    """In the learner thread, between two steps: the learner's optimizers take ``learner.lr``
    and its loss reads ``config``."""
    _set_lr(learner, config.learner.lr)
    _set_loss_config(learner, config)


def _set_loss_config(learner: Any, config: AlgorithmConfig) -> None:
    """The learner's loss reads ``config`` from its next step (a learner with a loss of its own)."""
    if hasattr(learner, "loss_config"):
        learner.loss_config = config


def _set_lr(learner: Any, lr: float) -> None:
    """Every optimizer of ``learner`` takes ``lr`` at its next step."""
    from .rl.learners.optim import FlatOptimizer

    for value in vars(learner).values():
        if isinstance(value, FlatOptimizer):
            value.lr = lr
    if isinstance(getattr(learner, "lr", None), float):  # an optimizer built on first use takes it
        learner.lr = lr


BIG_MODEL = 100_000
"""Parameters from which a dense model's learner steps take every core. Measured with the event
loop's thread on one torch thread (2-core VM, 2026-12-07), 4,000 env steps from 1,000, one env
in the driver: TD3's tuned Pendulum example (400x300, about 370k parameters) 43.8 s on one
learner thread, 29.0 s on two; SAC's (256x256, about 200k) 38.7 s and 28.9 s; SAC with its
default 128x128 (about 52k) 16.6 s and 16.0 s; PPO on CartPole (64x64) 5.1 s and 5.0 s for
100k env steps."""


def learner_threads(learners: list[Any]) -> int:
    """One torch thread for the learner, or every core (up to 8) where a model convolves or
    holds ``BIG_MODEL`` parameters or more."""
    models = [m for learner in learners if isinstance(m := getattr(learner, "model", None), torch.nn.Module)]
    convolves = any(
        isinstance(module, torch.nn.Conv1d | torch.nn.Conv2d | torch.nn.Conv3d)
        for model in models
        for module in model.modules()
    )
    big = any(sum(p.numel() for p in model.parameters()) >= BIG_MODEL for model in models)
    return min(len(os.sched_getaffinity(0)), 8) if convolves or big else 1
