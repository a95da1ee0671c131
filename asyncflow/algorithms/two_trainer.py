"""Two trainers, one environment: a PPO policy and a DQN policy learn side by
side from the same multi-agent rollouts (RLlib Flow, Fig. 9: the composition
that a user of a monolithic trainer could not write).

Plan::

    rollouts = parallel_rollouts(bulk_sync)                      # MultiAgentBatch
    ppo_rollouts, dqn_rollouts = duplicate(rollouts, 2)          # one branch per policy to train
    ppo: select_experiences(ppo_policy) -> concat_batches -> standardize_fields -> train_one_step
    dqn store: select_experiences(dqn_policy) -> store_to_replay_buffer
    dqn train: replay(rate-limited) -> learn_on_batches -> update_priorities -> sync_weights -> update_target_network
    concurrently([ppo, dqn store, dqn train], async) -> once_per_steps -> report_metrics

With ``policies_to_train`` naming one policy, only its branch is built; the
other policy keeps acting with the weights it has.

Each policy's experiences reach only its own learner; each learner sends
its weights to the workers under its own policy id. The replay branch is
rate-limited (``dqn_training_intensity`` rows replayed per row stored), so
the three branches can run freely without one starving the others.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from .._fields import part
from ..actors import Runtime
from ..errors import ConfigError
from ..flow import (
    concat_batches,
    concurrently,
    duplicate,
    once_per_steps,
    parallel_rollouts,
    report_metrics,
    select_policy,
    standardize_fields,
    train_one_step,
)
from ..flow.learner import learn_on_batches, sync_weights, update_priorities, update_target_network
from ..flow.replay import replay, store_to_replay_buffer
from ..rl.data.replay_buffer import ReplayBuffer
from ..rl.data.sample_batch import MultiAgentBatch, SampleBatch
from ..rl.data.state import get_state, set_state
from ..rl.envs.multi_agent import MultiAgentCartPole
from ..rl.policies.actor_critic import ActorCriticPolicy
from ..rl.policies.epsilon_greedy import EpsilonGreedyPolicy
from ..rl.policy import FlatWeights
from ..rl.sampling.multi_agent_worker import MappedPolicy
from ..session import Algorithm
from . import ppo
from ._actor_critic import ActorCriticLearner
from ._config import AlgorithmConfig, algorithm_config, field
from ._off_policy import REPLAY_BUFFER
from ._recipe import Capabilities, MultiAgentWorkers, Plan, PolicyModel, Recipe, Resources, Run, Spaces
from .dqn import DQN_MODELS, DQNConfig, dqn_learner
from .ppo import PPOConfig, ppo_loss

__all__ = ["DQN_POLICY", "PPO_POLICY", "TwoTrainer", "TwoTrainerConfig", "two_agent_cartpole"]

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
_SHARED = ("env", "environment", "rollouts", "evaluation", "gamma", "seed", "metrics_smoothing_episodes")
"""What the two policies share: the run's own, not their configs' (which must be left as they are)."""


@algorithm_config(
    defaults={"env": two_agent_cartpole, "rollout_fragment_length": 256, "ppo.learner.lr": 3e-3,
              "ppo.train_batch_size": 1024, "ppo.minibatch_size": 128, "ppo.num_epochs": 5, "dqn.learner.lr": 1e-3},
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
    """The DQN policy: its learner, model, replay and DQN's own fields (``dqn.training_intensity``
    rate-limits its replay against its sampling, so the branches run freely)."""
    policy_mapping_fn: Callable[[str], str] = alternate_ppo_dqn
    """Agent id -> "ppo_policy" or "dqn_policy" (a module-level function: it is sent to workers)."""
    policies_to_train: tuple[str, ...] = (PPO_POLICY, DQN_POLICY)
    """The policies that learn; the others keep acting with their current weights."""
    timesteps_per_iteration: int = field(default=2_048, min=1)
    """Env steps sampled between two results."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("learner", "model"):
            if getattr(self, name) != getattr(AlgorithmConfig(), name):
                raise ConfigError(f"{name}: the two policies have one each; set ppo.{name} and dqn.{name}")
        for policy in ("ppo", "dqn"):
            sub = getattr(self, policy)
            fresh = type(sub)()
            for name in _SHARED:
                if getattr(sub, name) != getattr(fresh, name):
                    raise ConfigError(f"{policy}.{name}: the two policies share the run's {name}; set {name}")
        unknown = set(self.policies_to_train) - {PPO_POLICY, DQN_POLICY}
        if unknown or not self.policies_to_train or len(set(self.policies_to_train)) != len(self.policies_to_train):
            raise ConfigError(
                f"policies_to_train: expected distinct names among {PPO_POLICY!r}, {DQN_POLICY!r}; "
                f"got {self.policies_to_train}"
            )


class _PolicyLearner:
    """A learner whose weights go to one policy id of multi-agent workers."""

    def __init__(self, policy_id: str, learner: Any) -> None:
        self.policy_id, self.learner = policy_id, learner

    def learn_on_batch(self, *args: Any, **kwargs: Any) -> Any:
        return self.learner.learn_on_batch(*args, **kwargs)

    def get_weights(self) -> dict[str, FlatWeights]:
        return {self.policy_id: self.learner.get_weights()}

    def update_target(self) -> None:
        self.learner.update_target()


class _Learners:
    def __init__(self, *learners: _PolicyLearner) -> None:
        self.by_id = {learner.policy_id: learner for learner in learners}

    def get_state(self) -> dict[str, Any]:
        return {pid: get_state(learner.learner) for pid, learner in self.by_id.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        for pid, learner_state in state.items():
            set_state(self.by_id[pid].learner, learner_state)

    def get_weights(self) -> dict[str, FlatWeights]:
        return {pid: learner.learner.get_weights() for pid, learner in self.by_id.items()}


def two_trainer_workers(config: TwoTrainerConfig, spaces: Any) -> MultiAgentWorkers:
    """Each worker runs both policies, each agent acting with the one it maps to."""
    ppo, dqn = config.ppo, config.dqn
    initial, final = dqn.epsilon
    ppo_policy = functools.partial(ActorCriticPolicy, model=ppo.model, hidden=ppo.vector_hidden,
                                   device=config.rollouts.device)  # fmt: skip
    per_worker = dqn.epsilon_timesteps // max(config.rollouts.num_workers, 1)
    dqn_policy = functools.partial(EpsilonGreedyPolicy, model=dqn.model, hidden=dqn.vector_hidden, dueling=dqn.dueling,
                                   epsilon=(initial, final, per_worker), device=config.rollouts.device)  # fmt: skip
    policies = {PPO_POLICY: MappedPolicy(ppo_policy, "gae"),  # type: ignore[arg-type]
                DQN_POLICY: MappedPolicy(dqn_policy, "transitions", dqn.n_step)}  # type: ignore[arg-type]  # fmt: skip
    return MultiAgentWorkers(policies, config.policy_mapping_fn, lam=ppo.lam)


def two_trainer_learner(config: TwoTrainerConfig, spaces: dict[str, Spaces]) -> _Learners:
    """PPO's learner and DQN's, each with its own config."""
    ppo = ActorCriticLearner(ppo_loss, ActorCriticPolicy)(config.ppo.replace(seed=config.seed), spaces[PPO_POLICY])
    dqn = dqn_learner(config.dqn.replace(seed=config.seed), spaces[DQN_POLICY])
    return _Learners(_PolicyLearner(PPO_POLICY, ppo), _PolicyLearner(DQN_POLICY, dqn))


def two_trainer_models(config: TwoTrainerConfig) -> dict[str, PolicyModel]:
    """Each policy's model, as its own algorithm would build it."""
    return {PPO_POLICY: ppo.RECIPE.models(config.ppo)["default"], DQN_POLICY: DQN_MODELS(config.dqn)["default"]}


async def _open_buffer(config: TwoTrainerConfig, runtime: Runtime) -> ReplayBuffer:
    return await REPLAY_BUFFER.open(config.dqn, runtime)


async def _save_buffer(config: TwoTrainerConfig, buffer: ReplayBuffer) -> Any:
    return await REPLAY_BUFFER.save(config.dqn, buffer)


async def _load_buffer(config: TwoTrainerConfig, buffer: ReplayBuffer, state: Any) -> ReplayBuffer:
    return await REPLAY_BUFFER.load(config.dqn, buffer, state)


TwoTrainerRun = Run[TwoTrainerConfig, _Learners, ReplayBuffer]


def two_trainer_plan(run: TwoTrainerRun) -> Plan:
    """One stream of multi-agent rollouts, a branch per policy to train (the module docstring)."""
    rollouts = cast(AsyncIterator[MultiAgentBatch], parallel_rollouts(run.workers, mode="bulk_sync"))
    branches = duplicate(rollouts, len(run.config.policies_to_train))
    ops: list[AsyncIterator[Any]] = []
    for policy_id, branch in zip(run.config.policies_to_train, branches, strict=True):
        experiences = select_policy(branch, policy_id)
        ops += _train_ppo(run, experiences) if policy_id == PPO_POLICY else _train_dqn(run, experiences)
    return report_metrics(once_per_steps(concurrently(ops, "async"), run.config.timesteps_per_iteration))


def _train_ppo(run: TwoTrainerRun, experiences: AsyncIterator[SampleBatch]) -> list[Any]:
    c, learner = run.config.ppo, run.learner.by_id[PPO_POLICY]
    batches = standardize_fields(concat_batches(experiences, c.train_batch_size), ["advantages"])
    return [train_one_step(batches, learner, run.workers, num_epochs=c.num_epochs, minibatch_size=c.minibatch_size,
                           seed=run.config.seed)]  # fmt: skip


def _train_dqn(run: TwoTrainerRun, experiences: AsyncIterator[SampleBatch]) -> list[Any]:
    c, learner, buffer = run.config.dqn, run.learner.by_id[DQN_POLICY], run.resources
    ratio, starts = c.training_intensity, c.learning_starts
    store_op = store_to_replay_buffer(experiences, buffer, learning_starts=starts, min_replay_ratio=ratio)
    replayed = replay(buffer, c.train_batch_size, min_size=starts, max_replay_ratio=ratio)
    trained = sync_weights(update_priorities(learn_on_batches(replayed, learner)), learner, run.workers, every=8)
    return [store_op, update_target_network(trained, learner, c.target_network_update_freq)]


RECIPE: Recipe[TwoTrainerConfig, _Learners, ReplayBuffer] = Recipe(
    name="two_trainer", config=TwoTrainerConfig, family="actor_critic", plan=two_trainer_plan,
    workers=two_trainer_workers, learner=two_trainer_learner, models=two_trainer_models,
    resources=Resources(open=_open_buffer, save=_save_buffer, load=_load_buffer),
    learners=lambda learners: [learner.learner for learner in learners.by_id.values()],
    capabilities=Capabilities(multi_agent=True, vector_env=False, async_env=False,
                              vector_env_reason="multi-agent envs are stepped one by one"),
)  # fmt: skip


class TwoTrainer(Algorithm):
    """A PPO policy and a DQN policy in one env (the module docstring)."""

    recipe = RECIPE
