"""What an algorithm is: a typed recipe, which the session (``session.py``) runs.

An algorithm module declares one ``Recipe``: its config class, the model family it talks to,
what its workers run, its learner, the resources its plan uses (a replay buffer, replay
shards), what it can do (``Capabilities``), and its plan: a function of typed inputs
(``Run``) that composes operators and reads nothing else::

    RECIPE = Recipe(
        name="ppo", config=PPOConfig, family="actor_critic",
        workers=ActorCriticWorkers(ppo_loss), learner=ActorCriticLearner(ppo_loss, ActorCriticPolicy),
        plan=ppo_plan, capabilities=Capabilities(recurrent=True, numpy_inference=True, learner_precision=True),
    )

    def ppo_plan(run: Run[PPOConfig, ActorCriticPolicy, None]) -> Plan:
        rollouts = parallel_rollouts(run.workers, mode="bulk_sync")
        ...

The session checks a config against the capabilities in one place (``check_capabilities``),
with one-line ``ConfigError``s, before any process starts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import gymnasium as gym

from ..errors import ConfigError
from ..rl.envs.spaces import Family
from ..rl.models.config import ModelSpec
from ..rl.policy import PolicyFactory
from ..rl.sampling.trajectory import PostprocessMode
from ..rl.sampling.worker_set import WorkerSet
from ._config import AlgorithmConfig

if TYPE_CHECKING:
    from ..actors import Runtime
    from ..flow.metrics import Result

__all__ = [
    "Capabilities",
    "MultiAgentWorkers",
    "Plan",
    "PolicyModel",
    "Recipe",
    "Resources",
    "Run",
    "Spaces",
    "Workers",
    "check_capabilities",
]

C = TypeVar("C", bound=AlgorithmConfig)
L = TypeVar("L")
R = TypeVar("R")
C_co = TypeVar("C_co", bound=AlgorithmConfig, covariant=True)
L_co = TypeVar("L_co", covariant=True)
R_co = TypeVar("R_co", covariant=True)

Plan = AsyncIterator["Result"]
"""What a plan is: an async iterator of one result per training iteration."""


@dataclass(frozen=True)
class Spaces:
    """The spaces a policy acts in."""

    observation: gym.Space[Any]
    action: gym.Space[Any]


@dataclass(frozen=True)
class Capabilities:
    """What an algorithm can take beyond a gymnasium env stepped one by one."""

    recurrent: bool = False
    """``model.use_lstm``: its losses read only the observations (an LSTM core replays them)."""
    vector_env: bool = True
    """``rollouts.vector_env``: its batches may lose a row at a vector env's autoreset."""
    vector_env_reason: str = ""
    """Why not, when not."""
    async_env: bool = True
    """An ``AsyncEnv``."""
    numpy_inference: bool = False
    """Its workers may run the built-in MLP in numpy (``rollouts.inference``)."""
    numpy_inference_reason: str = "worker policy (only actor-critic workers run in numpy)"
    """Why not, when not (after the algorithm's name and "'s")."""
    learner_precision: bool = False
    """``learner.precision`` reaches its losses (bfloat16)."""
    rmsprop: bool = False
    """``learner.optimizer="rmsprop"``: its learner builds its optimizer from the config."""
    multi_agent: bool = False
    """Its env is a multi-agent env (and a single-agent env is not)."""
    policy_mapping: bool = True
    """``multi_agent``: it runs once per policy on a multi-agent env (``_multi_agent.py``)."""
    policy_mapping_reason: str = ""
    """Why not, when not."""
    team: bool = False
    """Its env is a multi-agent env whose agents it plays as one team (``rl/envs/team.py``:
    QMIX, MADDPG; its ``worker_env`` wraps the env)."""


@dataclass(frozen=True)
class PolicyModel:
    """A policy's model: what to build (``config.model``), for which protocol, shaped how."""

    spec: ModelSpec
    family: Family
    options: Mapping[str, Any] = field(default_factory=dict)
    """``build_model``'s keywords for the built-in model (``hidden``, ``dueling``, ``num_q``, ...)."""


@dataclass(frozen=True)
class Workers:
    """What each rollout worker runs: a policy, and how its experience is postprocessed."""

    policy: PolicyFactory
    postprocess: PostprocessMode = "gae"
    n_step: int = 1
    use_critic: bool = True
    """GAE with a learned value baseline; False: plain discounted returns (PG)."""
    lam: float = 1.0
    """GAE lambda."""


@dataclass(frozen=True)
class MultiAgentWorkers:
    """What each worker of a multi-agent env runs: one policy per id, agents mapped to them."""

    policies: Mapping[str, Any]  # policy id -> rl.multi_agent_worker.MappedPolicy
    mapping: Callable[..., str]
    """``(agent_id)`` or ``(agent_id, episode_id)`` -> policy id."""
    lam: float = 1.0
    """GAE lambda of the policies that take GAE."""


@dataclass(frozen=True)
class Resources(Generic[C, R]):
    """What a plan uses beside workers and learner (a replay buffer, replay shards): how the
    session opens it, and what of it a checkpoint keeps."""

    open: Callable[[C, Runtime], Awaitable[R]]
    save: Callable[[C, R], Awaitable[Any]]
    """Its state for a checkpoint (None: nothing to keep)."""
    load: Callable[[C, R, Any], Awaitable[R]]
    """It again, from that state."""


@dataclass(frozen=True)
class Run(Generic[C_co, L_co, R_co]):
    """A plan's inputs: everything it composes operators over."""

    config: C_co
    workers: WorkerSet
    learner: L_co
    resources: R_co


def one_learner(learner: Any) -> list[Any]:
    """``Recipe.learners`` of an algorithm that trains one learner: the learner itself."""
    return [learner]


@dataclass(frozen=True)
class Recipe(Generic[C, L, R]):
    """An algorithm: what the session needs to run it (see the module docstring)."""

    name: str
    """Its name on the command line and in checkpoints."""
    config: type[C]
    family: Family
    """The model protocol its policies talk to (``asyncflow.rl.models``)."""
    plan: Callable[[Run[C, L, R]], Plan]
    learner: Callable[[C, Any], L]
    """Its learner, from the config and the spaces (``Spaces``, or a mapping of them by policy id)."""
    workers: Callable[[C, Any], Workers | MultiAgentWorkers]
    """What its workers run (the spaces as for ``learner``; ``Workers.policy`` may be replaced by
    the numpy policy, ``rollouts.inference``): the rollout workers, and the evaluation workers."""
    models: Callable[[C], Mapping[str, PolicyModel]]
    """Its policies' models by policy id (one, ``"default"``, for a single-agent algorithm)."""
    capabilities: Capabilities = Capabilities()
    resources: Resources[C, R] | None = None
    samples: bool = True
    """Whether its plan samples from rollout workers. False: it learns from what its resources
    hold (a dataset); no rollout worker starts, and the env gives the spaces and evaluation."""
    dataset: Callable[[C], Any] | None = None
    """An offline algorithm's dataset (``rl.offline.dataset.Dataset``), opened and checked in the
    driver before any process starts: without an env its spaces are the policy's; with one,
    they must be the env's."""
    learners: Callable[[L], list[Any]] = one_learner
    """The learners (torch modules) inside what ``learner`` built: their models decide the
    learner thread's torch threads."""
    model_spaces: Callable[[gym.Space[Any], gym.Space[Any]], tuple[gym.Space[Any], gym.Space[Any]]] | None = None
    """The spaces its model acts in, from the env's, where they differ (QMIX's agent network:
    one agent's, from the team's)."""
    live_fields: tuple[str, ...] = ()
    """Config fields besides ``learner.lr`` that may change while it trains
    (``Algorithm.change_config``, population-based training): those only its loss (through the
    learner's ``loss_config``) and its plan read, never its workers nor the learner's construction."""
    schedules: tuple[tuple[str, str], ...] = ()
    """``(field, schedule field)`` pairs: a field only its loss reads that follows a piecewise-linear
    schedule over env steps when the config sets one (PPO's ``clip_param``, ``clip_param_schedule``)."""

    def with_loss(self, loss: Callable[..., Any]) -> Recipe[C, L, R]:
        """This algorithm training on another loss, where its learner takes one (the
        actor-critic family); ``class NaNPPO(PPO): loss = staticmethod(fn)`` does the same."""
        if not hasattr(self.learner, "loss"):
            raise TypeError(f"{self.name}'s learner takes no loss to replace")
        changes = {name: dataclasses.replace(getattr(self, name), loss=loss)  # type: ignore[type-var]
                   for name in ("learner", "workers") if hasattr(getattr(self, name), "loss")}  # fmt: skip
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def single_model(family: Family, **options: Any) -> Callable[[AlgorithmConfig], Mapping[str, PolicyModel]]:
    """``Recipe.models`` of a single-agent algorithm: ``config.model`` shaped by ``options``
    (callables of the config) and the config's ``vector_hidden``."""

    def models(config: AlgorithmConfig) -> Mapping[str, PolicyModel]:
        built = {k: v(config) if callable(v) else v for k, v in options.items()}
        return {"default": PolicyModel(config.model, family, {"hidden": type(config).vector_hidden, **built})}

    return models


def check_capabilities(recipe: Recipe[Any, Any, Any], config: AlgorithmConfig, is_async: bool) -> None:
    """The one place where a config's features meet what the algorithm can take: a one-line
    ``ConfigError`` for each that it cannot, before any process starts."""
    caps, name, c = recipe.capabilities, recipe.config.__name__.removesuffix("Config"), config
    if c.model.use_lstm:
        if not caps.recurrent:
            raise ConfigError(f"use_lstm: not available for {name} ({_have('recurrent')} have it)")
        if is_async or c.rollouts.vector_env:
            raise ConfigError("use_lstm: gymnasium envs stepped one by one only (not vector_env or an AsyncEnv)")
    if c.rollouts.vector_env:
        if not caps.vector_env:
            raise ConfigError(f"vector_env: {name}'s {caps.vector_env_reason}; leave vector_env off")
        from ..rl.envs.make import check_vector_env

        check_vector_env(c.env)
    if is_async and not caps.async_env:
        raise ConfigError(f"env: {name} does not take an AsyncEnv")
    if c.learner.optimizer != "adam" and not caps.rmsprop:
        raise ConfigError(f"optimizer: {name} steps with Adam only ({_have('rmsprop')} take 'rmsprop')")
    if c.learner.precision != "float32" and not caps.learner_precision:
        raise ConfigError(f"learner_precision: {name}'s losses run in float32 only ({_have('learner_precision')} "
                          "take 'bfloat16' or 'auto')")  # fmt: skip
    env = c.environment
    if env.normalize_observations or env.normalize_rewards:
        setting = "normalize_observations" if env.normalize_observations else "normalize_rewards"
        what = ("a multi-agent plan" if caps.multi_agent else "an AsyncEnv" if is_async
                else "vector_env=True" if c.rollouts.vector_env else None)  # fmt: skip
        if what is not None:
            raise ConfigError(f"{setting}: not available with {what} (gymnasium envs stepped one by one only)")
    if c.output is not None:
        check_output(c, caps)


def check_output(c: AlgorithmConfig, caps: Capabilities) -> None:
    """``output``: what can write experiences (a single-agent plan, the observations as the
    env gave them)."""
    from ..rl.offline.minari_format import require

    require("output")
    what = ("a multi-agent plan" if caps.multi_agent
            else "normalize_observations (the data would hold the normalized ones)"
            if c.environment.normalize_observations else None)  # fmt: skip
    if what is not None:
        raise ConfigError(f"output: not available with {what}")
    if Path(c.output or "").is_file():
        raise ConfigError(f"output: {c.output} is a file; give a folder (made if missing)")


@functools.cache
def _have(capability: str) -> str:
    """The algorithms that have ``capability``, as a message lists them ("A, B and C")."""
    from . import recipes

    names = [r.config.__name__.removesuffix("Config") for r in recipes() if getattr(r.capabilities, capability)]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)
