"""``EvaluationWorker``: whole episodes with given weights, apart from the training workers.

An actor of its own (``evaluation_num_workers`` of them), with its own env and
seeds, so that evaluating never takes steps from training. Every evaluation
plays the same seeds (``seed``, ``seed + 1``, ...): two evaluations differ by
their weights only. Actions are the policy's greedy ones, or sampled with
``explore=True``. Gymnasium envs and ``AsyncEnv``s both work.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ..envs.checks import EnvChecker
from ..envs.make import EnvSpec, make_async_env, make_env
from ..policy import FlatWeights, PolicyFactory
from .episodes import play_episodes
from .normalization import NormalizerState

__all__ = ["EvaluationWorker", "summarize_episodes"]


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


def summarize_episodes(played: list[tuple[list[float], list[int]]], iteration: int) -> dict[str, Any]:
    """The ``evaluation`` entry of a result, from what each evaluation worker returned."""
    returns = [r for worker_returns, _ in played for r in worker_returns]
    lengths = [n for _, worker_lengths in played for n in worker_lengths]
    return {
        "episode_return_mean": float(np.mean(returns)),
        "episode_return_min": float(np.min(returns)),
        "episode_return_max": float(np.max(returns)),
        "episode_len_mean": float(np.mean(lengths)),
        "episodes": len(returns),
        "training_iteration": iteration,  # whose weights were evaluated
    }
