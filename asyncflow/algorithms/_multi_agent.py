"""Any algorithm on a multi-agent env: ``config.multi_agent`` (``asyncflow.rl.MultiAgent``).

``multi_agent_recipe(recipe)`` is the algorithm's own recipe, once per policy: each policy
gets the algorithm's workers' policy and postprocessing (in one ``MultiAgentRolloutWorker``
per worker), its own learner, its own resources (a replay buffer), and runs the algorithm's
own plan unchanged. The plans share one stream of multi-agent rollouts::

    rollouts = parallel_rollouts(workers)                   # MultiAgentBatch, counted once
    branches = duplicate(rollouts, len(policies_to_train))
    for each policy p to train:
        plan_p = recipe.plan(Run(config of p, PolicyWorkers(workers, p, branch_p), learner_p, resources_p))
    concurrently(plan_p for each p, async) -> a result once every policy has reported -> report_metrics

A plan sees ``PolicyWorkers``: ``parallel_rollouts`` on it yields its policy's rows of the
shared stream, and the weights it broadcasts go to its policy id. Each plan runs in a flow
context of its own (``FlowContext.child``): its counters count its policy's agent steps and
its learner's steps, so ``timesteps_per_iteration``, ``learning_starts`` and target updates
read as they would in a single-agent run of that policy.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from typing import Any, cast

from ..actors import ActorHandle, Runtime
from ..errors import ConfigError
from ..flow._context import NUM_ENV_STEPS_SAMPLED, NUM_ENV_STEPS_TRAINED, FlowContext, current_context, set_context
from ..flow._util import closing
from ..flow.concurrency import concurrently, duplicate
from ..flow.metrics import Result, report_metrics
from ..rl.data.sample_batch import MultiAgentBatch, SampleBatch
from ..rl.data.state import get_state, set_state
from ..rl.multi_agent import MultiAgent
from ..rl.policies.league_opponent import LeagueOpponent
from ..rl.policy import FlatWeights
from ..rl.sampling.multi_agent_worker import MappedPolicy
from ..rl.sampling.worker_set import WorkerSet
from ._config import AlgorithmConfig
from ._league import league_play
from ._recipe import MultiAgentWorkers, Plan, PolicyModel, Recipe, Resources, Run, Spaces, Workers

__all__ = ["PolicyLearners", "PolicyWorkers", "multi_agent_recipe", "policy_config"]


SHARED = ("env", "environment", "rollouts", "evaluation", "gamma", "seed", "metrics_smoothing_episodes")
"""What a policy trained by another algorithm (``PolicySpec.algorithm``) takes from the run."""


def policy_config(config: AlgorithmConfig, policy_id: str) -> Any:
    """The config one policy of a multi-agent run trains with: the run's, with its
    ``PolicySpec.config`` over it, and no ``multi_agent``; for a policy of another algorithm,
    that algorithm's with the run's ``SHARED`` fields."""
    ma = config.multi_agent
    assert ma is not None
    spec = ma.policies[policy_id]
    try:
        if spec.algorithm is None:
            return config.replace(multi_agent=None, **dict(spec.config))
        shared = {name: getattr(config, name) for name in SHARED}
        return policy_recipe(config, policy_id).config.build({}, **shared, **dict(spec.config))
    except ConfigError as exc:
        raise ConfigError(f"multi_agent.policies[{policy_id!r}].config: {exc}") from None


def policy_recipe(config: AlgorithmConfig, policy_id: str, base: Recipe[Any, Any, Any] | None = None) -> Any:
    """The recipe that trains one policy: ``PolicySpec.algorithm``'s, else the run's (``base``)."""
    ma = config.multi_agent
    assert ma is not None
    name = ma.policies[policy_id].algorithm
    if name is None:
        assert base is not None
        return base
    from . import ALGORITHMS

    if name not in ALGORITHMS:
        raise ConfigError(f"multi_agent.policies[{policy_id!r}].algorithm: no algorithm {name!r}; expected one of "
                          f"{sorted(ALGORITHMS)}")  # fmt: skip
    recipe = ALGORITHMS[name].recipe
    _check_mappable(recipe)
    return recipe


def _check_mappable(recipe: Recipe[Any, Any, Any]) -> None:
    caps, name = recipe.capabilities, recipe.config.__name__.removesuffix("Config")
    if caps.multi_agent:
        raise ConfigError(f"multi_agent: {name} is a multi-agent plan already; give its own fields")
    if not recipe.samples:
        raise ConfigError(f"multi_agent: {name} learns from a dataset, not from a multi-agent env")
    if not caps.policy_mapping:
        raise ConfigError(f"multi_agent: not available for {name} ({caps.policy_mapping_reason})")


class PolicyLearners:
    """One learner per policy id: the workers get each one's weights under its id."""

    def __init__(self, by_id: Mapping[str, Any]) -> None:
        self.by_id = dict(by_id)

    def get_state(self) -> dict[str, Any]:
        return {pid: get_state(learner) for pid, learner in self.by_id.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        for pid, learner_state in state.items():
            set_state(self.by_id[pid], learner_state)

    def get_weights(self) -> dict[str, FlatWeights]:
        return {pid: learner.get_weights() for pid, learner in self.by_id.items()}


class SharedRollouts:
    """One stream of multi-agent rollouts, a branch per trained policy, started by the first
    plan that asks (with its ``parallel_rollouts`` mode), counted once in the run's context."""

    def __init__(self, workers: WorkerSet, policies: Sequence[str], ctx: FlowContext) -> None:
        self.workers, self.policies, self.ctx = workers, list(policies), ctx
        self.branches: dict[str, AsyncIterator[MultiAgentBatch]] | None = None
        self.outcomes: dict[str, list[float]] = {}
        """Policy id -> its agents' returns of the episodes finished since a reader cleared it
        (a league's games)."""

    def branch(self, policy_id: str, mode: str, num_async: int) -> AsyncIterator[MultiAgentBatch]:
        if self.branches is None:
            from ..flow.rollouts import parallel_rollouts

            sampled = parallel_rollouts(self.workers, mode, num_async, ctx=self.ctx)  # type: ignore[arg-type]
            stream = self._note_outcomes(cast(AsyncIterator[MultiAgentBatch], sampled))
            self.branches = dict(zip(self.policies, duplicate(stream, len(self.policies)), strict=True))
        return self.branches[policy_id]

    async def _note_outcomes(self, batches: AsyncIterator[MultiAgentBatch]) -> AsyncIterator[MultiAgentBatch]:
        async with closing(batches) as items:
            async for batch in items:
                for pid, returns in self.outcomes.items():
                    returns.extend(batch.policy_returns.get(pid, []))
                yield batch


class PolicyWorkers(WorkerSet):
    """The workers as one policy's plan sees them: its rows of the shared rollouts, and its
    weights sent under its id."""

    def __init__(self, workers: WorkerSet, policy_id: str, shared: SharedRollouts) -> None:
        self.__dict__.update(workers.__dict__)  # the same actors, deadlines and counters
        self.inner, self.policy_id, self.shared = workers, policy_id, shared

    async def policy_rollouts(self, mode: str, num_async: int) -> AsyncIterator[SampleBatch]:
        """This policy's rows of each multi-agent batch (batches without any are skipped), counted
        as its env steps in its plan's context."""
        ctx = current_context()
        async with closing(self.shared.branch(self.policy_id, mode, num_async)) as batches:
            async for batch in batches:
                rows = batch.policy_batches.get(self.policy_id)
                returns = batch.policy_returns.get(self.policy_id, [])
                ctx.record_policy_returns({self.policy_id: returns})
                if rows is None or len(rows) == 0:
                    continue
                rows.source = batch.source
                ctx.add(NUM_ENV_STEPS_SAMPLED, len(rows))
                yield rows

    async def broadcast(
        self, weights: FlatWeights | dict[str, FlatWeights], to: Sequence[ActorHandle] | None = None
    ) -> None:
        await self.inner.broadcast(weights if isinstance(weights, dict) else {self.policy_id: weights}, to)


async def _in_context(plan: Plan, ctx: FlowContext, policy_id: str) -> AsyncIterator[tuple[str, Result]]:
    set_context(ctx)  # this task's operators count in the policy's own context
    async with closing(plan) as results:
        async for result in results:
            yield policy_id, result


async def _rounds(
    source: AsyncIterable[tuple[str, Result]], policies: Sequence[str], ctx: FlowContext
) -> AsyncIterator[dict[str, Result]]:
    """Each policy's latest result, once every policy has reported since the last time; the
    run's learner stats are theirs by policy (``"<policy>/<stat>"``)."""
    latest: dict[str, Result] = {}
    waiting = set(policies)
    async with closing(source) as results:
        async for policy_id, result in results:
            latest[policy_id] = result
            waiting.discard(policy_id)
            if waiting:
                continue
            waiting = set(policies)
            ctx.counters[NUM_ENV_STEPS_TRAINED] = sum(ctx.child(p).get(NUM_ENV_STEPS_TRAINED) for p in policies)
            ctx.learner_info = {f"{p}/{k}": v for p, r in latest.items() for k, v in r.learner.items()}
            yield latest


async def _with_policies(results: AsyncIterator[Result], ctx: FlowContext, policies: Sequence[str]) -> Plan:
    async with closing(results) as items:
        async for result in items:
            result["policies"] = {
                p: {"num_agent_steps_sampled": ctx.child(p).get(NUM_ENV_STEPS_SAMPLED),
                    "num_agent_steps_trained": ctx.child(p).get(NUM_ENV_STEPS_TRAINED),
                    "training_iteration": ctx.child(p).iteration}
                for p in policies
            }  # fmt: skip
            yield result


def multi_agent_recipe(base: Recipe[Any, Any, Any]) -> Recipe[Any, PolicyLearners, dict[str, Any]]:
    """``base`` on a multi-agent env, one learner and one plan per policy (the module docstring)."""
    _check_mappable(base)
    caps = base.capabilities
    recipe_of: dict[str, Recipe[Any, Any, Any]] = {}  # by policy id, as the config says (learners() has no config)

    def each(config: AlgorithmConfig) -> dict[str, tuple[Recipe[Any, Any, Any], Any]]:
        ma: MultiAgent = config.multi_agent  # type: ignore[assignment]
        recipe_of.update({pid: policy_recipe(config, pid, base) for pid in ma.policies})
        return {pid: (recipe_of[pid], policy_config(config, pid)) for pid in ma.policies}

    def models(config: AlgorithmConfig) -> Mapping[str, PolicyModel]:
        return {pid: r.models(c)["default"] for pid, (r, c) in each(config).items()}

    def workers(config: AlgorithmConfig, spaces: Mapping[str, Spaces] | None) -> MultiAgentWorkers:
        ma: MultiAgent = config.multi_agent  # type: ignore[assignment]
        policies = {}
        for pid, (r, c) in each(config).items():
            spec = r.workers(c, None if spaces is None else spaces[pid])
            assert isinstance(spec, Workers)
            factory = spec.policy
            if ma.league is not None and ma.league.players and pid == "opponent":
                factory = functools.partial(LeagueOpponent, factory, ma.league.players)
            policies[pid] = MappedPolicy(factory, spec.postprocess, spec.n_step, spec.use_critic, spec.lam)
        return MultiAgentWorkers(policies, ma.policy_mapping)

    def learner(config: AlgorithmConfig, spaces: Mapping[str, Spaces]) -> PolicyLearners:
        return PolicyLearners({pid: r.learner(c, spaces[pid]) for pid, (r, c) in each(config).items()})

    def learners(built: PolicyLearners) -> list[Any]:
        return [one for pid, learner in built.by_id.items() for one in recipe_of.get(pid, base).learners(learner)]

    def plan(run: Run[Any, PolicyLearners, dict[str, Any]]) -> Plan:
        ma: MultiAgent = run.config.multi_agent
        ctx, trained, parts = current_context(), ma.trained, each(run.config)
        shared = SharedRollouts(run.workers, trained, ctx)
        plans = []
        for pid in trained:
            view = PolicyWorkers(run.workers, pid, shared)
            r, c = parts[pid]
            sub = r.plan(Run(c, view, run.learner.by_id[pid], (run.resources or {}).get(pid)))
            plans.append(_in_context(sub, ctx.child(pid), pid))
        results = _with_policies(report_metrics(_rounds(concurrently(plans, "async"), trained, ctx), ctx), ctx, trained)
        if ma.league is None:
            return results
        shared.outcomes["main"] = []
        return league_play(results, ma.league, outcomes=shared.outcomes["main"], workers=run.workers,
                           learners=run.learner.by_id, ctx=ctx, seed=run.config.seed)  # fmt: skip

    def held(config: AlgorithmConfig) -> dict[str, tuple[Resources[Any, Any], Any]]:
        """The policies whose algorithm's plan uses resources (a replay buffer): those, and the config."""
        return {pid: (r.resources, c) for pid, (r, c) in each(config).items() if r.resources is not None}

    async def open_all(config: AlgorithmConfig, runtime: Runtime) -> dict[str, Any]:
        return {pid: await res.open(c, runtime) for pid, (res, c) in held(config).items()}

    async def save_all(config: AlgorithmConfig, opened: dict[str, Any]) -> Any:
        parts = held(config)
        return {pid: await parts[pid][0].save(parts[pid][1], r) for pid, r in opened.items()}

    async def load_all(config: AlgorithmConfig, opened: dict[str, Any], state: Any) -> dict[str, Any]:
        parts = held(config)
        return {pid: await parts[pid][0].load(parts[pid][1], r, state[pid]) if state.get(pid) is not None else r
                for pid, r in opened.items()}  # fmt: skip

    resources = Resources(open=open_all, save=save_all, load=load_all)

    return dataclasses.replace(
        base, models=models, workers=workers, learner=learner, learners=learners, plan=plan,  # type: ignore[arg-type]
        resources=resources, live_fields=(), schedules=(),
        capabilities=dataclasses.replace(caps, multi_agent=True, vector_env=False, async_env=False, recurrent=False,
                                         numpy_inference=False, vector_env_reason="multi-agent envs are stepped "
                                         "one by one", numpy_inference_reason="multi-agent workers"),
    )  # fmt: skip
