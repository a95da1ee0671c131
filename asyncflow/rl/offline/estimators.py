"""Off-policy evaluation: what a target policy would return, estimated from episodes another
policy (the behaviour policy) played, without an env.

- ``importance_sampling`` (per-decision, Precup et al. 2000): each reward weighted by the
  product of ``pi(a|s) / mu(a|s)`` up to its step; ``weighted=True`` divides each step's
  weights by their mean over the episodes instead of by the count (weighted importance
  sampling: biased, far lower variance). Both need the behaviour policy's log-probabilities
  (``action_logp``, which asyncflow writes).
- ``fitted_q_evaluation`` (Le et al. 2019): a Q network regressed onto
  ``r + gamma * sum_a' pi(a'|s') Q(s', a')`` over the data; the estimate is
  ``sum_a pi(a|s0) Q(s0, a)`` averaged over the episodes' first observations (discrete actions).

Each returns what RLlib reports for its estimators: ``v_behavior`` (the data's own
discounted return), ``v_target`` and ``v_gain`` (their ratio), averaged over episodes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ...errors import ConfigError
from ..data.sample_batch import ACTIONS, EPS_ID, LOGP, NEXT_OBS, OBS, REWARDS, TERMINATEDS, SampleBatch
from ..data.tree import tree_map

__all__ = ["ESTIMATORS", "episode_slices", "fitted_q_evaluation", "importance_sampling"]

ESTIMATORS = ("is", "wis", "fqe")
"""The names ``OfflineConfig.estimators`` takes."""

Probabilities = Callable[[Any], np.ndarray]
"""The target policy: observations ``(B, ...)`` -> action probabilities ``(B, n)``."""


def episode_slices(rows: SampleBatch) -> list[np.ndarray]:
    """The row indices of each episode, in step order (rows of one episode are contiguous)."""
    ids = rows[EPS_ID]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    return [np.arange(a, b) for a, b in zip(starts, [*starts[1:], len(ids)], strict=True)]


def _check_logp(rows: SampleBatch) -> np.ndarray:
    if LOGP not in rows or not np.isfinite(rows[LOGP]).all():
        raise ConfigError("estimators: importance sampling needs the behaviour policy's log-probabilities "
                          "(infos/action_logp, finite) in the data")  # fmt: skip
    return np.asarray(rows[LOGP], np.float64)


def _discounted(rewards: np.ndarray, gamma: float) -> float:
    return float(np.sum(rewards * gamma ** np.arange(len(rewards))))


def importance_sampling(
    rows: SampleBatch, target_logp: np.ndarray, gamma: float, *, weighted: bool = False
) -> dict[str, float]:
    """Per-decision (weighted) importance sampling of the target policy whose
    log-probabilities of the data's actions are ``target_logp`` (one per row)."""
    behaviour = _check_logp(rows)
    episodes = episode_slices(rows)
    horizon = max(len(e) for e in episodes)
    # rho_{0:t}; past its end an episode stays in an absorbing state (reward 0, where both
    # policies agree): its weight stays, which WIS's normalization over episodes needs.
    weights = np.zeros((len(episodes), horizon))
    rewards = np.zeros((len(episodes), horizon))
    for i, e in enumerate(episodes):
        log_ratio = np.cumsum(np.asarray(target_logp, np.float64)[e] - behaviour[e])
        weights[i, : len(e)] = np.exp(np.minimum(log_ratio, 50.0))  # a ratio of e^50 is already absurd
        weights[i, len(e) :] = weights[i, len(e) - 1]
        rewards[i, : len(e)] = rows[REWARDS][e]
    if weighted:
        scale = weights.mean(0)
        weights = np.divide(weights, scale, out=np.zeros_like(weights), where=scale > 0)
    discount = gamma ** np.arange(horizon)
    v_target = float((weights * rewards * discount).sum(1).mean())
    v_behavior = float(np.mean([_discounted(rows[REWARDS][e], gamma) for e in episodes]))
    return {"v_behavior": v_behavior, "v_target": v_target, "v_gain": v_target / v_behavior if v_behavior else 0.0}


def fitted_q_evaluation(
    rows: SampleBatch,
    probabilities: Probabilities,
    num_actions: int,
    gamma: float,
    *,
    updates: int = 2_000,
    batch_size: int = 256,
    hidden: Sequence[int] = (64, 64),
    lr: float = 1e-3,
    target_every: int = 100,
    seed: int = 0,
) -> dict[str, float]:
    """Fitted Q evaluation of the target policy ``probabilities`` (discrete actions)."""
    generator = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    obs, next_obs = rows[OBS], rows[NEXT_OBS]
    if not isinstance(obs, np.ndarray):
        raise ConfigError("estimators: fqe takes array observations (not Dict or Tuple)")
    flat = int(np.prod(obs.shape[1:]))
    layers: list[nn.Module] = []
    size = flat
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
        for h in hidden:
            layers += [nn.Linear(size, h), nn.ReLU()]
            size = h
        q = nn.Sequential(nn.Flatten(), *layers, nn.Linear(size, num_actions))
    target = copy.deepcopy(q).requires_grad_(False)
    optimizer = torch.optim.Adam(q.parameters(), lr=lr)
    pi_next = torch.as_tensor(probabilities(next_obs), dtype=torch.float32)
    o = torch.as_tensor(np.asarray(obs, np.float32))
    o2 = torch.as_tensor(np.asarray(next_obs, np.float32))
    a = torch.as_tensor(np.asarray(rows[ACTIONS], np.int64))
    r = torch.as_tensor(np.asarray(rows[REWARDS], np.float32))
    d = gamma * (1 - torch.as_tensor(np.asarray(rows[TERMINATEDS], np.float32)))
    for step in range(updates):
        i = torch.as_tensor(rng.integers(0, len(rows), batch_size))
        with torch.no_grad():
            y = r[i] + d[i] * (pi_next[i] * target(o2[i])).sum(-1)
        loss = nn.functional.mse_loss(q(o[i]).gather(1, a[i, None]).squeeze(1), y)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        if (step + 1) % target_every == 0:
            target.load_state_dict(q.state_dict())
    firsts = np.array([e[0] for e in episode_slices(rows)])
    start = tree_map(lambda x: x[firsts], obs)
    with torch.no_grad():
        values = (torch.as_tensor(probabilities(start), dtype=torch.float32) * q(o[firsts])).sum(-1)
    v_target = float(values.mean())
    v_behavior = float(np.mean([_discounted(rows[REWARDS][e], gamma) for e in episode_slices(rows)]))
    return {"v_behavior": v_behavior, "v_target": v_target, "v_gain": v_target / v_behavior if v_behavior else 0.0}
