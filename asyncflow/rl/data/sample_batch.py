"""``SampleBatch``: a dict of equal-length numpy columns, and ``MultiAgentBatch``.

A column is an array or, for ``Dict`` and ``Tuple`` observations, a tree of
arrays (``tree.py``): each leaf keeps its own dtype and the batch dimension
first.

A batch also carries the episodes that *completed* while it was sampled
(``episode_returns``, ``episode_lengths``), and whatever else its sampler measured
(``metrics``), so metrics travel with the data instead of living in a global.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .tree import Tree, tree_concat, tree_len, tree_map

__all__ = ["BatchMetrics", "MultiAgentBatch", "SampleBatch", "concat_samples", "merge_metrics"]

BatchMetrics = dict[str, int | list[float]]
"""What a sampler measured beside the episodes, by name: a count (an int, summed over batches
and over the run: ``num_env_errors``) or values (a list of floats, of which results report the
mean over the latest ``metrics_smoothing_episodes``: ``training_return``, an Atari life's
clipped return). A new measure is one more name; nothing on the way needs to know it."""


def merge_metrics(parts: Sequence[Mapping[str, int | list[float]]]) -> BatchMetrics:
    """The metrics of several batches as one: counts summed, values concatenated."""
    merged: BatchMetrics = {}
    for metrics in parts:
        for name, value in metrics.items():
            if isinstance(value, list):
                before = merged.get(name, [])
                merged[name] = [*before, *value] if isinstance(before, list) else value
            else:
                before = merged.get(name, 0)
                merged[name] = (before if isinstance(before, int) else 0) + value
    return merged


OBS = "obs"
ACTIONS = "actions"
REWARDS = "rewards"
DONES = "dones"
LOGP = "action_logp"
VF_PREDS = "vf_preds"
ADVANTAGES = "advantages"
VALUE_TARGETS = "value_targets"
EPS_ID = "eps_id"
NEXT_OBS = "next_obs"
TERMINATEDS = "terminateds"
DISCOUNTS = "discounts"


def _column(value: Any) -> Tree:
    if isinstance(value, dict | tuple):
        return tree_map(np.asarray, value)
    return np.asarray(value)


class SampleBatch(dict[str, Tree]):
    """Columns of equal length; ``len(batch)`` is the number of rows."""

    def __init__(
        self,
        columns: Mapping[str, Tree] | None = None,
        *,
        episode_returns: Sequence[float] = (),
        episode_lengths: Sequence[int] = (),
        metrics: Mapping[str, int | list[float]] | None = None,
    ) -> None:
        super().__init__({k: _column(v) for k, v in (columns or {}).items()})
        lengths = {tree_len(v) for v in self.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns have different lengths: { {k: tree_len(v) for k, v in self.items()} }")
        self.episode_returns = list(episode_returns)
        self.episode_lengths = list(episode_lengths)
        self.metrics: BatchMetrics = dict(metrics or {})
        """What the sampler measured beside the episodes (``BatchMetrics``)."""
        # The worker a batch came from, set by async operators (never pickled).
        self.source: Any = None

    def __len__(self) -> int:  # type: ignore[override]
        for column in self.values():
            return tree_len(column)
        return 0

    def __reduce__(self) -> Any:
        return _rebuild, (dict(self), self.episode_returns, self.episode_lengths, self.metrics)

    def slice(self, start: int, stop: int) -> SampleBatch:
        """Rows ``start:stop`` (views, not copies)."""
        return SampleBatch({k: tree_map(lambda x: x[start:stop], v) for k, v in self.items()})

    def take(self, index: np.ndarray) -> SampleBatch:
        """The rows at ``index``, in that order."""
        return SampleBatch({k: tree_map(lambda x: x[index], v) for k, v in self.items()})

    def minibatches(self, size: int, rng: np.random.Generator | None = None) -> Iterator[SampleBatch]:
        """Shuffled (when ``rng`` is given) minibatches; the last may be smaller."""
        order = rng.permutation(len(self)) if rng is not None else np.arange(len(self))
        for start in range(0, len(self), size):
            yield self.take(order[start : start + size])

    def split_by_episode(self) -> list[SampleBatch]:
        """Pieces that each hold one episode (needs ``eps_id``)."""
        ids = self[EPS_ID]
        cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        bounds = [0, *cuts.tolist(), len(self)]
        return [self.slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _rebuild(
    columns: dict[str, Tree], returns: list[float], lengths: list[int], metrics: BatchMetrics | None = None
) -> SampleBatch:
    return SampleBatch(columns, episode_returns=returns, episode_lengths=lengths, metrics=metrics)


def concat_samples(batches: Sequence[SampleBatch]) -> SampleBatch:
    """Concatenate rows (and the completed-episode records) of several batches.

    A single batch is returned as it is, not copied: a plan that concatenates
    at two stages copies each sample once.
    """
    batches = [b for b in batches if len(b) or b.episode_returns or b.metrics]
    if not batches:
        return SampleBatch()
    if len(batches) == 1:
        return batches[0]
    keys = batches[0].keys()
    for b in batches[1:]:
        if b.keys() != keys:
            raise ValueError(f"cannot concat batches with columns {sorted(keys)} and {sorted(b.keys())}")
    return SampleBatch(
        {k: tree_concat([b[k] for b in batches]) for k in keys},
        episode_returns=[r for b in batches for r in b.episode_returns],
        episode_lengths=[n for b in batches for n in b.episode_lengths],
        metrics=merge_metrics([b.metrics for b in batches]),
    )


class MultiAgentBatch:
    """One ``SampleBatch`` per policy id, plus the env steps they came from.

    Episode records: ``episode_returns`` sums every agent's reward per
    episode; ``policy_returns[pid]`` holds each agent's own return, grouped
    by the policy that controlled it.
    """

    def __init__(
        self,
        policy_batches: Mapping[str, SampleBatch],
        env_steps: int,
        *,
        episode_returns: Sequence[float] = (),
        episode_lengths: Sequence[int] = (),
        policy_returns: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        self.policy_batches = dict(policy_batches)
        self.env_steps = env_steps
        self.episode_returns = list(episode_returns)
        self.episode_lengths = list(episode_lengths)
        self.policy_returns = {p: list(r) for p, r in (policy_returns or {}).items()}
        self.source: Any = None

    def __len__(self) -> int:
        return self.env_steps

    def __reduce__(self) -> Any:
        return _rebuild_multi, (
            self.policy_batches,
            self.env_steps,
            self.episode_returns,
            self.episode_lengths,
            self.policy_returns,
        )

    @property
    def agent_steps(self) -> int:
        return sum(len(b) for b in self.policy_batches.values())

    def select(self, policy_ids: Sequence[str]) -> MultiAgentBatch:
        """Only the given policies' batches (episode records kept)."""
        return MultiAgentBatch(
            {p: b for p, b in self.policy_batches.items() if p in policy_ids},
            self.env_steps,
            episode_returns=self.episode_returns,
            episode_lengths=self.episode_lengths,
            policy_returns={p: r for p, r in self.policy_returns.items() if p in policy_ids},
        )

    @staticmethod
    def concat(batches: Sequence[MultiAgentBatch]) -> MultiAgentBatch:
        ids = sorted({p for b in batches for p in b.policy_batches})
        returns: dict[str, list[float]] = {}
        for b in batches:
            for p, r in b.policy_returns.items():
                returns.setdefault(p, []).extend(r)
        return MultiAgentBatch(
            {p: concat_samples([b.policy_batches[p] for b in batches if p in b.policy_batches]) for p in ids},
            sum(b.env_steps for b in batches),
            episode_returns=[r for b in batches for r in b.episode_returns],
            episode_lengths=[n for b in batches for n in b.episode_lengths],
            policy_returns=returns,
        )


def _rebuild_multi(
    policy_batches: dict[str, SampleBatch],
    env_steps: int,
    returns: list[float],
    lengths: list[int],
    policy_returns: dict[str, list[float]],
) -> MultiAgentBatch:
    return MultiAgentBatch(
        policy_batches, env_steps, episode_returns=returns, episode_lengths=lengths, policy_returns=policy_returns
    )
