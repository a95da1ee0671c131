"""CQL (Kumar et al. 2020, "Conservative Q-Learning for Offline Reinforcement Learning"),
learning from a dataset: for discrete actions on the DQN learner, for continuous ones on
the SAC learner.

Q-learning from a fixed dataset overestimates the actions the data never takes, and the
greedy policy goes exactly there. CQL(H) adds to each Q function's loss
``weight * (logsumexp_a Q(s, a) - Q(s, a_data))``: it pushes down the soft maximum over all
actions and up the data's. With discrete actions the log-sum-exp is exact
(``DQNLearner(cql_weight=...)``, ``dqn.py``); with continuous ones it is estimated from
``cql_samples`` actions drawn uniformly, from the policy at ``s`` and at ``s'``
(``SACLearner(cql_weight=...)``, ``sac.py``), as the paper's code and d3rlpy do. The
weight is fixed (the paper's CQL(H) with a constant alpha; its Lagrangian variant is not
here).

Plan: reader actors (``rl/offline/reader.py``) -> ``replay`` -> one update per batch -> for
DQN, a copy of the online network into the target every ``target_network_update_freq``
updates -> a result every ``updates_per_iteration`` updates. No rollout worker starts; with
an env, evaluation plays the greedy policy in it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from ..flow import batch, learn_on_batches, replay, report_metrics, update_target_network
from ..rl.policies.continuous import SquashedGaussianPolicy
from ..rl.policies.epsilon_greedy import EpsilonGreedyPolicy
from ..rl.sampling.worker_set import WorkerSet
from ..session import Algorithm
from ._config import algorithm_config, field
from ._offline import SCALED_READERS, OfflineConfig, dataset, with_estimates
from ._recipe import Plan, PolicyModel, Recipe, Run, Spaces, Workers
from .dqn import DQNLearner
from .sac import SACLearner

__all__ = ["CQL", "CQLConfig", "cql_learner"]


@algorithm_config(defaults={"learner.lr": 3e-4, "train_batch_size": 256})
class CQLConfig(OfflineConfig):
    """``learner.lr``: the rate of every optimizer (Q, actor, temperature)."""

    vector_hidden = (256, 256)

    cql_weight: float | None = field(default=None, min=0)
    """The conservative term's weight (None: 1.0 for discrete actions, d3rlpy's DiscreteCQL
    default, and 5.0 for continuous ones, d3rlpy's CQL default)."""
    cql_samples: int = field(default=10, min=1)
    """Continuous actions: the actions drawn from each of the three sources per state."""
    tau: float = field(default=0.005, min=0, max=1)
    """Continuous actions: the critics' soft target update rate."""
    initial_alpha: float = field(default=1.0, min=0, exclusive_min=True)
    """Continuous actions: SAC's starting entropy temperature."""
    target_network_update_freq: int = field(default=500, min=1)
    """Discrete actions: learner updates between copies of the Q network into the target (a
    copy every few dozen updates, as online DQN's rows-trained count would give, lets CartPole's
    Q-values run away from a fixed dataset: 31 updates of 256 rows, 9.4 return; 300: 385)."""
    double_q: bool = True
    """Discrete actions: double Q-learning."""
    dueling: bool = False
    """Discrete actions: dueling heads."""


def _discrete(spaces: Spaces) -> bool:
    return isinstance(spaces.action, gym.spaces.Discrete)


def cql_learner(config: CQLConfig, spaces: Spaces) -> DQNLearner | SACLearner:
    """The DQN learner for discrete actions, the SAC learner for continuous ones, each with
    its conservative term."""
    c, part = config, config.learner
    common: dict[str, Any] = {"model": c.model, "device": part.device, "hidden": c.vector_hidden, "seed": c.seed,
                              "max_nonfinite_updates": part.max_nonfinite_updates,
                              "max_grad_norm": part.max_grad_norm}  # fmt: skip
    if _discrete(spaces):
        weight = 1.0 if c.cql_weight is None else c.cql_weight
        return DQNLearner(spaces.observation, spaces.action, lr=part.lr, dueling=c.dueling, double_q=c.double_q,
                          precision=part.precision, cql_weight=weight, **common)  # fmt: skip
    weight = 5.0 if c.cql_weight is None else c.cql_weight
    return SACLearner(spaces.observation, spaces.action, actor_lr=part.lr, critic_lr=part.lr, alpha_lr=part.lr,
                      initial_alpha=c.initial_alpha, tau=c.tau, cql_weight=weight, cql_samples=c.cql_samples,
                      **common)  # fmt: skip


def cql_workers(config: CQLConfig, spaces: Spaces) -> Workers:
    """The greedy policy that evaluation plays: Q's argmax, or the squashed Gaussian's mean."""
    c = config
    if _discrete(spaces):
        policy: Any = functools.partial(EpsilonGreedyPolicy, model=c.model, hidden=c.vector_hidden,
                                        dueling=c.dueling, epsilon=0.0)  # fmt: skip
        return Workers(policy, "transitions")
    policy = functools.partial(SquashedGaussianPolicy, model=c.model, hidden=c.vector_hidden)
    return Workers(policy, "transitions")


def cql_models(config: CQLConfig) -> Mapping[str, PolicyModel]:
    """The Q network (discrete) or the actor and twin critics (continuous), by the dataset's actions."""
    hidden = type(config).vector_hidden
    if isinstance(dataset(config).action_space, gym.spaces.Discrete):
        return {"default": PolicyModel(config.model, "q", {"hidden": hidden, "dueling": config.dueling})}
    return {"default": PolicyModel(config.model, "continuous", {"hidden": hidden, "gaussian": True, "num_q": 2})}


def cql_plan(run: Run[CQLConfig, Any, WorkerSet]) -> Plan:
    """Rows from the readers -> one update each [-> target copies] -> a result every
    ``updates_per_iteration`` updates."""
    c = run.config
    trained = learn_on_batches(replay(run.resources, c.train_batch_size), run.learner)
    if isinstance(run.learner, DQNLearner):
        trained = update_target_network(trained, run.learner, c.target_network_update_freq, by_steps_trained=False)
    return with_estimates(report_metrics(batch(trained, c.updates_per_iteration)), run)


RECIPE: Recipe[CQLConfig, Any, WorkerSet] = Recipe(
    name="cql", config=CQLConfig, family="q", plan=cql_plan, models=cql_models, workers=cql_workers,
    learner=cql_learner, resources=SCALED_READERS, samples=False, dataset=dataset,
)  # fmt: skip


class CQL(Algorithm):
    """CQL (the module docstring)."""

    recipe = RECIPE
