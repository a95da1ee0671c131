"""Two trainers, one environment: a PPO policy and a DQN policy learn side by
side from the same multi-agent rollouts (RLlib Flow, Fig. 9: the composition
that a user of a monolithic trainer could not write).

It is one configuration of the policy mapping (``_multi_agent.py``): PPO's recipe on a
multi-agent env, with the DQN policy trained by DQN (``PolicySpec(algorithm="dqn")``).
``TwoTrainerConfig`` keeps its two parts (``ppo``, ``dqn``) and the flat names of earlier
versions; ``as_mapping(config)`` is the same run as a ``PPOConfig`` with ``multi_agent``, and
the plan is the mapping's::

    rollouts = parallel_rollouts(workers)                    # MultiAgentBatch, counted once
    ppo_rows, dqn_rows = duplicate(rollouts, 2)              # a branch per policy to train
    ppo: PPO's own plan on its rows; dqn: DQN's own replay plan on its rows
    concurrently([ppo, dqn], async) -> a result once both have reported -> report_metrics

With ``policies_to_train`` naming one policy, only its plan runs; the other policy keeps acting
with the weights it has. Each policy's experiences reach only its own learner; each learner
sends its weights to the workers under its own policy id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, cast

from .._fields import part
from ..actors import Runtime
from ..errors import ConfigError
from ..rl.envs.multi_agent import MultiAgentCartPole
from ..rl.multi_agent import MultiAgent, PolicySpec
from ..session import Algorithm
from . import ppo
from ._config import AlgorithmConfig, algorithm_config, field
from ._multi_agent import SHARED, PolicyLearners, multi_agent_recipe
from ._recipe import MultiAgentWorkers, Plan, PolicyModel, Recipe, Resources, Run, Spaces
from .dqn import DQNConfig
from .ppo import PPOConfig

__all__ = ["DQN_POLICY", "PPO_POLICY", "TwoTrainer", "TwoTrainerConfig", "as_mapping", "two_agent_cartpole"]

PPO_POLICY = "ppo_policy"
DQN_POLICY = "dqn_policy"


def two_agent_cartpole() -> MultiAgentCartPole:
    """The default env: two independent CartPoles, ``agent_0`` and ``agent_1``."""
    return MultiAgentCartPole(num_agents=2)


def alternate_ppo_dqn(agent_id: str) -> str:
    """Agents whose id ends in an even number go to PPO, the others to DQN."""
    digits = "".join(c for c in agent_id if c.isdigit())
    return PPO_POLICY if not digits or int(digits) % 2 == 0 else DQN_POLICY


_PPO_FIELDS = ("train_batch_size", "minibatch_size", "num_epochs")
_DQN_FIELDS = ("n_step", "buffer_size", "train_batch_size", "training_intensity", "learning_starts",
               "target_network_update_freq", "epsilon", "epsilon_timesteps")  # fmt: skip
_PPO_SHORTHANDS = {
    "ppo_lr": "ppo.learner.lr",
    "ppo_model": "ppo.model",
    **{f"ppo_{n}": f"ppo.{n}" for n in _PPO_FIELDS},
}
_DQN_SHORTHANDS = {"dqn_lr": "dqn.learner.lr", "dqn_model": "dqn.model", "dqn_hidden": "dqn.model.hidden",
                   **{f"dqn_{n}": f"dqn.{n}" for n in _DQN_FIELDS}}  # fmt: skip


@algorithm_config(
    defaults={"env": two_agent_cartpole, "rollout_fragment_length": 256, "ppo.learner.lr": 3e-3,
              "ppo.train_batch_size": 1024, "ppo.minibatch_size": 128, "ppo.num_epochs": 5, "dqn.learner.lr": 1e-3,
              "dqn.training_intensity": 4.0},
    shorthands={**_PPO_SHORTHANDS, **_DQN_SHORTHANDS},
)  # fmt: skip
class TwoTrainerConfig(AlgorithmConfig):
    """A PPO policy and a DQN policy, each with its own config (its learner, its model and its
    algorithm's fields); the env, the rollouts and ``gamma`` are the run's. The flat names of
    earlier versions are shorthands: ``ppo_lr`` is ``ppo.learner.lr``, ``dqn_n_step`` is
    ``dqn.n_step``, and so on."""

    ppo: PPOConfig = part(default_factory=PPOConfig)
    """The PPO policy: its learner, model, GAE ``lam`` and PPO's own fields."""
    dqn: DQNConfig = part(default_factory=DQNConfig)
    """The DQN policy: its learner, model, replay and DQN's own fields (``dqn.training_intensity``:
    rows replayed per row stored; 4 here, where DQN's own default is 16, since the two policies
    share one stream of rollouts and the slower one sets its pace)."""
    policy_mapping_fn: Callable[[str], str] = alternate_ppo_dqn
    """Agent id -> "ppo_policy" or "dqn_policy" (a module-level function: it is sent to workers)."""
    policies_to_train: tuple[str, ...] = (PPO_POLICY, DQN_POLICY)
    """The policies that learn; the others keep acting with their current weights."""
    timesteps_per_iteration: int = field(default=2_048, min=1)
    """The DQN policy's agent steps between two of its reports (PPO's policy reports once per
    ``ppo.train_batch_size``); a result comes once every policy that learns has reported."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("learner", "model"):
            if getattr(self, name) != getattr(AlgorithmConfig(), name):
                raise ConfigError(f"{name}: the two policies have one each; set ppo.{name} and dqn.{name}")
        for policy in ("ppo", "dqn"):
            sub = getattr(self, policy)
            fresh = type(sub)()
            for name in (*SHARED, "multi_agent"):
                if getattr(sub, name) != getattr(fresh, name):
                    raise ConfigError(f"{policy}.{name}: the two policies share the run's {name}; set {name}")
        unknown = set(self.policies_to_train) - {PPO_POLICY, DQN_POLICY}
        if unknown or not self.policies_to_train or len(set(self.policies_to_train)) != len(self.policies_to_train):
            raise ConfigError(
                f"policies_to_train: expected distinct names among {PPO_POLICY!r}, {DQN_POLICY!r}; "
                f"got {self.policies_to_train}"
            )


def as_mapping(config: TwoTrainerConfig) -> PPOConfig:
    """The same run as the policy mapping writes it: PPO with ``ppo``'s fields and the run's,
    and a DQN policy trained by DQN with ``dqn``'s fields (``PolicySpec(algorithm="dqn")``)."""
    own = {f.name: getattr(config.dqn, f.name) for f in dataclasses.fields(DQNConfig)
           if f.init and f.name not in (*SHARED, "multi_agent")}  # fmt: skip
    own["timesteps_per_iteration"] = config.timesteps_per_iteration
    policies = {PPO_POLICY: PolicySpec(), DQN_POLICY: PolicySpec(algorithm="dqn", config=own)}
    mapping = MultiAgent(policies, config.policy_mapping_fn, config.policies_to_train)
    shared = {name: getattr(config, name) for name in SHARED}
    return cast(PPOConfig, config.ppo.replace(**shared, multi_agent=mapping))


MAPPED = multi_agent_recipe(ppo.RECIPE)
"""PPO's recipe on a multi-agent env: what runs a two-trainer config, as ``as_mapping`` writes it."""


def two_trainer_plan(run: Run[TwoTrainerConfig, PolicyLearners, dict[str, Any]]) -> Plan:
    """The mapping's plan on the config as the mapping writes it (the module docstring)."""
    return MAPPED.plan(Run(as_mapping(run.config), run.workers, run.learner, run.resources))


def two_trainer_workers(config: TwoTrainerConfig, spaces: Mapping[str, Spaces] | None) -> MultiAgentWorkers:
    """Each worker runs both policies, each agent acting with the one it maps to."""
    return MAPPED.workers(as_mapping(config), spaces)  # type: ignore[return-value]


def two_trainer_learner(config: TwoTrainerConfig, spaces: Mapping[str, Spaces]) -> PolicyLearners:
    """PPO's learner and DQN's, each with its own config."""
    return MAPPED.learner(as_mapping(config), spaces)


def two_trainer_models(config: TwoTrainerConfig) -> Mapping[str, PolicyModel]:
    """Each policy's model, as its own algorithm would build it."""
    return MAPPED.models(as_mapping(config))


async def _open(config: TwoTrainerConfig, runtime: Runtime) -> dict[str, Any]:
    return await MAPPED.resources.open(as_mapping(config), runtime)  # type: ignore[union-attr,no-any-return]


async def _save(config: TwoTrainerConfig, opened: dict[str, Any]) -> Any:
    return await MAPPED.resources.save(as_mapping(config), opened)  # type: ignore[union-attr]


async def _load(config: TwoTrainerConfig, opened: dict[str, Any], state: Any) -> dict[str, Any]:
    if not (isinstance(state, dict) and set(state) <= {PPO_POLICY, DQN_POLICY}):
        state = {DQN_POLICY: state}  # a checkpoint of the plan before the mapping: DQN's buffer alone
    return await MAPPED.resources.load(as_mapping(config), opened, state)  # type: ignore[union-attr,no-any-return]


RECIPE: Recipe[TwoTrainerConfig, PolicyLearners, dict[str, Any]] = dataclasses.replace(
    MAPPED, name="two_trainer", config=TwoTrainerConfig, plan=two_trainer_plan,  # type: ignore[arg-type]
    workers=two_trainer_workers, learner=two_trainer_learner, models=two_trainer_models,
    resources=Resources(open=_open, save=_save, load=_load),
)  # fmt: skip


class TwoTrainer(Algorithm):
    """A PPO policy and a DQN policy in one env (the module docstring)."""

    recipe = RECIPE
