"""What the algorithms that learn from a dataset share: their config fields, the dataset
(``Recipe.dataset``), and the reader actors their plans replay from (``Recipe.resources``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ..errors import ConfigError
from ..flow._context import current_context
from ..flow.metrics import Result
from ..rl.data.sample_batch import ACTIONS, OBS, SampleBatch
from ..rl.data.tree import tree_leaves, tree_map
from ..rl.envs.make import EnvSpec
from ..rl.offline.dataset import Dataset, open_dataset, read_transitions
from ..rl.offline.estimators import ESTIMATORS, Probabilities, fitted_q_evaluation, importance_sampling
from ..rl.offline.reader import DatasetShard
from ..rl.sampling.worker_set import WorkerSet
from ._config import AlgorithmConfig, algorithm_config, field
from ._recipe import Resources, Run

__all__ = [
    "READERS",
    "SCALED_READERS",
    "OfflineConfig",
    "check_estimators",
    "dataset",
    "open_readers",
    "with_estimates",
]


@algorithm_config(defaults={"learner.lr": 1e-3, "learner.max_grad_norm": None, "evaluation.episodes": 10})
class OfflineConfig(AlgorithmConfig):
    """What every algorithm that learns from a dataset holds."""

    env: EnvSpec | None = None  # type: ignore[assignment]
    """An env to evaluate in (its spaces must be the dataset's); None: the env the data's
    ``env_spec`` names, by its id and only where gymnasium has it registered, else no evaluation."""

    input: str | None = None
    """The dataset: a Minari dataset folder, or a folder of them (what ``output`` writes)."""
    input_memory_rows: int | None = field(default=None, min=1)
    """Rows each reader holds at once; a larger share streams in windows of whole episodes
    (None: every reader reads its share once)."""
    estimators: tuple[str, ...] = ()
    """Off-policy estimates of the learned policy to report (``"is"``, ``"wis"``, ``"fqe"``:
    ``rl/offline/estimators.py``), on ``estimation_input``; discrete actions."""
    estimation_input: str | None = None
    """Held-out episodes to estimate on (None: ``input`` itself)."""
    estimation_interval: int = field(default=10, min=1)
    """Training iterations between two estimates."""
    train_batch_size: int = field(default=256, min=1)
    """Rows per update."""
    updates_per_iteration: int = field(default=100, min=1)
    """Updates per training iteration (one result)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.input is None:
            raise ConfigError("input: an offline algorithm needs a dataset (input=FOLDER, --input FOLDER)")
        if self.output is not None:
            raise ConfigError("output: an offline algorithm samples nothing to write")
        unknown = sorted(set(self.estimators) - set(ESTIMATORS))
        if unknown:
            raise ConfigError(f"estimators: {unknown} unknown; expected some of {list(ESTIMATORS)}")


def dataset(config: OfflineConfig) -> Dataset:
    """``Recipe.dataset``: the config's ``input`` (and its ``estimators``' needs), checked."""
    assert config.input is not None
    data = open_dataset(config.input)
    check_estimators(config, data)
    return data


async def open_readers(config: OfflineConfig, runtime: Any, *, scale_actions: bool = False) -> WorkerSet:
    """The reader actors, each with a share of the dataset's shards (``rollouts.num_workers``
    of them, at most one per shard; one in the driver with 0); ``scale_actions``: a ``Box``
    action space's actions served in ``[-1, 1]``."""
    data = dataset(config)
    space = data.action_space
    bounds = (space.low, space.high) if scale_actions and isinstance(space, gym.spaces.Box) else None
    count = max(1, min(config.rollouts.num_workers, len(data.shards)))
    shares = [[str(s) for s in data.shards[i::count]] for i in range(count)]
    handles = [
        await runtime.spawn(
            DatasetShard,
            share,
            gamma=config.gamma,
            seed=config.seed * 131 + i,
            memory_rows=config.input_memory_rows,
            action_bounds=bounds,
            name=f"reader-{i + 1}",
        )
        for i, share in enumerate(shares)
    ]
    return WorkerSet(handles, timeout_s=config.rollouts.timeout_s, env=f"dataset {config.input}")


async def _nothing(config: Any, readers: WorkerSet) -> None:
    return None  # the dataset is on disk: a checkpoint does not copy it


async def _same(config: Any, readers: WorkerSet, state: None) -> WorkerSet:
    return readers


async def _scaled(config: Any, runtime: Any) -> WorkerSet:
    return await open_readers(config, runtime, scale_actions=True)


READERS: Resources[Any, WorkerSet] = Resources(open=open_readers, save=_nothing, load=_same)
SCALED_READERS: Resources[Any, WorkerSet] = Resources(open=_scaled, save=_nothing, load=_same)
"""Readers that serve a ``Box`` action space's actions in ``[-1, 1]`` (for the SAC-family learners)."""


def check_estimators(config: OfflineConfig, data: Dataset) -> None:
    """``estimators``: what their maths needs, before any process starts."""
    if not config.estimators:
        return
    if not isinstance(data.action_space, gym.spaces.Discrete):
        raise ConfigError(f"estimators: discrete actions only, not {data.action_space}")
    held_out = data if config.estimation_input is None else open_dataset(config.estimation_input)
    if held_out is not data:
        held_out.check_fits(data.observation_space, data.action_space, f"input {data.path}")
    if {"is", "wis"} & set(config.estimators):
        held_out.require_logp("importance sampling (estimators 'is' and 'wis')")


def target_probabilities(learner: Any, num_actions: int) -> Probabilities:
    """The learned policy's action probabilities: the actor-critic policy's own distribution,
    or a Q learner's greedy choice (probability 1 on the argmax)."""
    device = learner.device

    def probabilities(obs: Any) -> np.ndarray:
        with torch.no_grad():
            x = tree_map(lambda a: torch.as_tensor(np.asarray(a)).to(device), obs)
            if hasattr(learner, "ac"):
                dist, _ = learner.ac(x)
                n = len(next(iter(tree_leaves(obs))))
                logp = [dist.log_prob(torch.full((n,), a, device=device)) for a in range(num_actions)]
                return torch.stack(logp, -1).exp().cpu().numpy()  # type: ignore[no-any-return]
            greedy = learner.model(x).argmax(-1).cpu().numpy()
            return np.eye(num_actions, dtype=np.float32)[greedy]  # type: ignore[no-any-return]

    return probabilities


def estimate(config: OfflineConfig, learner: Any, rows: SampleBatch, num_actions: int) -> dict[str, dict[str, float]]:
    """Each of ``config.estimators`` on ``rows``, for the learner's policy now."""
    probabilities = target_probabilities(learner, num_actions)
    out: dict[str, dict[str, float]] = {}
    if {"is", "wis"} & set(config.estimators):
        p = probabilities(rows[OBS])[np.arange(len(rows)), np.asarray(rows[ACTIONS], np.int64)]
        logp = np.log(np.maximum(p, 1e-30))
        for name in ("is", "wis"):
            if name in config.estimators:
                out[name] = importance_sampling(rows, logp, config.gamma, weighted=name == "wis")
    if "fqe" in config.estimators:
        out["fqe"] = fitted_q_evaluation(rows, probabilities, num_actions, config.gamma, seed=config.seed)
    return out


async def with_estimates(results: AsyncIterator[Result], run: Run[OfflineConfig, Any, Any]) -> AsyncIterator[Result]:
    """``results``, every ``estimation_interval``-th with ``off_policy_estimation`` (each
    estimator's ``v_behavior``, ``v_target``, ``v_gain``), computed in the learner thread."""
    c = run.config
    if not c.estimators:
        async for result in results:
            yield result
        return
    source = open_dataset(c.estimation_input or c.input or "")
    rows = read_transitions(source.shards, c.gamma)
    space = source.action_space
    assert isinstance(space, gym.spaces.Discrete)  # check_estimators
    num_actions = int(space.n)
    ctx = current_context()
    async for result in results:
        if result["training_iteration"] % c.estimation_interval == 0:
            result["off_policy_estimation"] = await ctx.learner_thread.run(estimate, c, run.learner, rows, num_actions)
        yield result
