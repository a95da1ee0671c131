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

from .env import EnvSpec, make_async_env, make_env
from .env_checks import EnvChecker
from .normalization import NormalizerState
from .policy import FlatWeights, PolicyFactory, StatefulPolicy
from .tree import tree_map

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
        self.normalizer: NormalizerState | None = None
        self.check = EnvChecker(env, self.env.observation_space, worker_index)

    async def evaluate(
        self, weights: FlatWeights, episodes: int, normalizer: NormalizerState | None = None
    ) -> tuple[list[float], list[int]]:
        """Play ``episodes`` whole episodes with ``weights`` (observations normalized with the
        training's statistics, frozen): their raw returns and lengths."""
        self.policy.set_weights(weights)
        self.normalizer = normalizer
        returns: list[float] = []
        lengths: list[int] = []
        check = self.check
        for episode in range(episodes):
            obs = check.reset_output(await self._call(self.env.reset, seed=self.seed + episode), 0, 0)
            check.observation(obs, 0, 0)
            if isinstance(self.policy, StatefulPolicy):  # a recurrent policy's memory
                self.policy.reset_state()
            total, steps, done = 0.0, 0, False
            while not done:
                out = await self._call(self.env.step, self._act(obs))
                obs, reward, terminated, truncated, _ = check.step_output(out, 0, steps + 1)
                check.observation(obs, 0, steps + 1)
                total, steps, done = total + reward, steps + 1, bool(terminated or truncated)
            returns.append(total)
            lengths.append(steps)
        return returns, lengths

    def _act(self, obs: Any) -> Any:
        if self.normalizer is not None:
            obs = self.normalizer.normalize(obs)
        batch = tree_map(lambda x: np.asarray(x)[None], obs)  # one row, in the space's own dtype
        actions = self.policy.compute_actions(batch)[0] if self.explore else self.policy.greedy_actions(batch)
        return self.policy.env_actions(actions)[0]

    async def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(*args, **kwargs)
        return await out if inspect.isawaitable(out) else out

    async def aclose(self) -> None:
        await self._call(self.env.close)


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
