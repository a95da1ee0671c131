"""``EvaluationWorker``: whole episodes with given weights, apart from the training workers.

An actor of its own (``evaluation_num_workers`` of them), with its own env and
seeds, so that evaluating never takes steps from training. Every evaluation
plays the same seeds (``seed``, ``seed + 1``, ...): two evaluations differ by
their weights only. Actions are the policy's greedy ones, or sampled with
``explore=True``. Gymnasium envs and ``AsyncEnv``s both work; a multi-agent env takes
``MultiAgentEvaluationWorker`` (a policy per id, the run's mapping; each agent's return by
its policy beside the episodes' returns summed over the agents).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from ..envs.checks import EnvChecker
from ..envs.make import EnvSpec, make_async_env, make_env
from ..envs.multi_agent import make_multi_agent_env
from ..policy import FlatWeights, PolicyFactory
from .episodes import play_episodes, play_multi_agent_episodes
from .multi_agent_worker import EpisodeMapping
from .normalization import NormalizerState

__all__ = ["EvaluationWorker", "MultiAgentEvaluationWorker", "summarize_episodes"]


class EvaluationWorker:
    def __init__(
        self,
        env: EnvSpec,
        *,
        policy_factory: PolicyFactory,
        seed: int,
        worker_index: int,
        explore: bool = False,
        async_env: bool = False,
    ) -> None:
        self.env: Any = make_async_env(env) if async_env else make_env(env)
        self.policy: Any = policy_factory(self.env.observation_space, self.env.action_space, seed=seed,
                                          worker_index=worker_index)  # fmt: skip
        self.seed, self.explore, self.async_env = seed, explore, async_env
        self.check = EnvChecker(env, self.env.observation_space, worker_index)

    async def evaluate(
        self, weights: FlatWeights, episodes: int, normalizer: NormalizerState | None = None
    ) -> tuple[list[float], list[int]]:
        """Play ``episodes`` whole episodes with ``weights`` (observations normalized with the
        training's statistics, frozen): their raw returns and lengths (``episodes.py``)."""
        self.policy.set_weights(weights)
        return await play_episodes(self.env, self.policy, episodes, seed=self.seed, explore=self.explore,
                                   normalizer=normalizer, check=self.check)  # fmt: skip

    async def aclose(self) -> None:
        out = self.env.close()
        if inspect.isawaitable(out):
            await out


class MultiAgentEvaluationWorker:
    """Whole episodes of a multi-agent env, each agent acting with its policy (the mapping's)."""

    def __init__(
        self,
        env: Callable[[], Any],
        *,
        policy_factories: Mapping[str, PolicyFactory],
        spaces: Mapping[str, tuple[gym.Space[Any], gym.Space[Any]]],
        policy_mapping_fn: Callable[..., str],
        seed: int,
        worker_index: int,
        explore: bool = False,
    ) -> None:
        self.env = make_multi_agent_env(env)
        self.policies = {pid: factory(*spaces[pid], seed=seed, worker_index=worker_index)
                         for pid, factory in policy_factories.items()}  # fmt: skip
        self.mapping = EpisodeMapping(policy_mapping_fn)
        self.seed, self.explore = seed, explore

    async def evaluate(
        self, weights: Mapping[str, FlatWeights], episodes: int, normalizer: NormalizerState | None = None
    ) -> tuple[list[float], list[int], dict[str, list[float]]]:
        """Play ``episodes`` whole episodes with each policy's ``weights``: their returns (summed
        over the agents), lengths, and each agent's own return by its policy."""
        for pid, policy_weights in weights.items():
            self.policies[pid].set_weights(policy_weights)
        return play_multi_agent_episodes(self.env, self.policies, self.mapping, episodes, seed=self.seed,
                                         explore=self.explore)  # fmt: skip

    async def aclose(self) -> None:
        self.env.close()


def summarize_episodes(played: list[tuple[Any, ...]], iteration: int) -> dict[str, Any]:
    """The ``evaluation`` entry of a result, from what each evaluation worker returned (a
    multi-agent run's: ``policy_return_mean`` too, each policy's agents' mean return)."""
    returns = [r for worker_returns, *_ in played for r in worker_returns]
    lengths = [n for _, worker_lengths, *_ in played for n in worker_lengths]
    by_policy: dict[str, list[float]] = {}
    for _, _, *rest in played:
        for pid, values in (rest[0] if rest else {}).items():
            by_policy.setdefault(pid, []).extend(values)
    extra = {"policy_return_mean": {pid: float(np.mean(v)) for pid, v in by_policy.items() if v}} if by_policy else {}
    return {
        "episode_return_mean": float(np.mean(returns)),
        "episode_return_min": float(np.min(returns)),
        "episode_return_max": float(np.max(returns)),
        "episode_len_mean": float(np.mean(lengths)),
        "episodes": len(returns),
        "training_iteration": iteration,  # whose weights were evaluated
        **extra,
    }
