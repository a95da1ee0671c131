"""The one shape every algorithm takes (``algorithms/_recipe.py``): behaviour cloning, an
algorithm of a new kind (no rollout workers: it learns from a dataset), written here as one
module would be (config, loss, plan, recipe), with nothing changed in the session, the
workers or the base classes. It learns: cloned from a scripted CartPole expert's 4,000
transitions, its greedy policy balances the pole."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from asyncflow.actors import Runtime
from asyncflow.algorithms import Algorithm, AlgorithmConfig, Recipe
from asyncflow.algorithms._actor_critic import ActorCriticLearner, ActorCriticWorkers
from asyncflow.algorithms._config import algorithm_config, field
from asyncflow.algorithms._recipe import Plan, Resources, Run, single_model
from asyncflow.flow import batch, learn_on_batches, report_metrics
from asyncflow.rl.data.sample_batch import ACTIONS, OBS, SampleBatch
from asyncflow.rl.policies.actor_critic import ActorCritic, ActorCriticPolicy

# -- the module a user would write: asyncflow/algorithms/bc.py --------------------------------


@algorithm_config(defaults={"learner.lr": 3e-3, "evaluation.episodes": 5, "evaluation.explore": False})
class BCConfig(AlgorithmConfig):
    dataset: Any = None
    """A function that returns the demonstrations: a ``SampleBatch`` with ``obs`` and ``actions``."""
    train_batch_size: int = field(default=256, min=1)
    """Demonstration rows per update."""
    updates_per_iteration: int = field(default=50, min=1)
    """Updates per training iteration."""


def bc_loss(ac: ActorCritic, batch: Mapping[str, Any], config: BCConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """The negative log-likelihood of the demonstrated actions."""
    dist, _ = ac(batch[OBS])
    loss = -dist.log_prob(batch[ACTIONS]).mean()
    return loss, {"bc_loss": float(loss.detach())}


async def _open_dataset(config: BCConfig, runtime: Runtime) -> SampleBatch:
    return config.dataset()  # type: ignore[no-any-return]


async def _nothing(config: BCConfig, data: SampleBatch) -> None:
    return None  # the dataset is the user's: a checkpoint does not copy it


async def _reopen(config: BCConfig, data: SampleBatch, state: None) -> SampleBatch:
    return data


DATASET: Resources[BCConfig, SampleBatch] = Resources(open=_open_dataset, save=_nothing, load=_reopen)


async def minibatches(data: SampleBatch, size: int, seed: int) -> AsyncIterator[SampleBatch]:
    """Random rows of the dataset, forever."""
    rng = np.random.default_rng(seed)
    while True:
        yield data.take(rng.integers(0, len(data), size))


def bc_plan(run: Run[BCConfig, ActorCriticPolicy, SampleBatch]) -> Plan:
    """Minibatches of demonstrations -> one update each -> a result every ``updates_per_iteration``."""
    config = run.config
    trained = learn_on_batches(minibatches(run.resources, config.train_batch_size, config.seed), run.learner)
    return report_metrics(batch(trained, config.updates_per_iteration))


RECIPE: Recipe[BCConfig, ActorCriticPolicy, SampleBatch] = Recipe(
    name="bc", config=BCConfig, family="actor_critic", plan=bc_plan, models=single_model("actor_critic"),
    workers=ActorCriticWorkers(bc_loss), learner=ActorCriticLearner(bc_loss, ActorCriticPolicy),
    resources=DATASET, samples=False,
)  # fmt: skip


class BC(Algorithm):
    recipe = RECIPE


# -- the test ----------------------------------------------------------------------------------


def expert_demonstrations(steps: int = 4_000) -> SampleBatch:
    """A scripted CartPole expert (push toward where the pole falls; it keeps the pole up
    for all 500 steps): its observations and actions."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    observations, actions = [], []
    for _ in range(steps):
        action = int(3 * obs[2] + obs[3] + 0.1 * obs[1] > 0)
        observations.append(obs)
        actions.append(action)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    return SampleBatch({OBS: np.asarray(observations, np.float32), ACTIONS: np.asarray(actions, np.int64)})


@pytest.mark.timeout(120)
async def test_behaviour_cloning_is_one_module_on_the_one_shape() -> None:
    config = BCConfig(env="CartPole-v1", dataset=expert_demonstrations, seed=0, evaluation_interval=4)
    async with BC(config) as algo:
        assert algo.workers.workers == []  # it samples nothing: no rollout worker started
        async for result in algo.train():
            if result["training_iteration"] == 4:
                break
        evaluation = await algo.evaluate()
    assert result["num_env_steps_sampled"] == 0
    assert result["num_env_steps_trained"] == 4 * 50 * 256 and result["learner"]["bc_loss"] < 0.3
    assert evaluation["episode_return_mean"] >= 400  # the expert's 500, nearly
