"""Advantage estimation: GAE (Schulman et al. 2016), computed per environment."""

from __future__ import annotations

import numpy as np

from ...errors import ConfigError
from ..data.tree import Tree, tree_map

__all__ = ["compute_gae", "compute_nstep"]


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    dones: np.ndarray,
    last_values: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and value targets for arrays shaped ``(T, num_envs)``.

    ``dones[t]`` ends the episode after step ``t`` (terminated or truncated).
    A truncated step is expected to have ``gamma * V(final obs)`` already added
    to its reward, so both kinds of ending stop the recursion here; a fragment
    that ends mid-episode bootstraps from ``last_values`` (``V`` of the next obs).
    """
    steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    last = np.zeros(rewards.shape[1:], dtype=np.float32)
    next_values = last_values.astype(np.float32)
    for t in reversed(range(steps)):
        alive = 1.0 - dones[t].astype(np.float32)
        delta = rewards[t] + gamma * next_values * alive - values[t]
        last = delta + gamma * lam * alive * last
        advantages[t] = last
        next_values = values[t]
    return advantages, (advantages + values).astype(np.float32)


def compute_nstep(
    rewards: np.ndarray,
    next_obs: Tree,
    terminateds: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    n: int,
) -> tuple[np.ndarray, Tree, np.ndarray]:
    """n-step returns for arrays shaped ``(T, num_envs, ...)`` (``next_obs`` may be a tree).

    For each step ``t`` the return sums ``gamma**k * r[t+k]`` for ``k < n``,
    stopping early at the end of an episode (``dones``) or of the fragment.
    Returns ``(returns, next_obs, discounts)``: the observation to bootstrap
    from, and ``gamma**k_used * (1 - terminated)``, so a target is always
    ``returns + discounts * Q(next_obs)``: exact also for shortened horizons,
    and zero bootstrap only for a real termination (not a time limit).
    """
    if n < 1:
        raise ConfigError(f"compute_nstep(): n must be >= 1, not {n}")
    steps, num_envs = rewards.shape[:2]
    returns = np.zeros((steps, num_envs), np.float32)
    end = np.zeros((steps, num_envs), np.int64)
    for t in range(steps):
        alive = np.ones(num_envs, bool)
        last = np.full(num_envs, t)
        for k in range(n):
            if t + k >= steps:
                break
            returns[t] += np.where(alive, gamma**k * rewards[t + k], 0.0)
            last = np.where(alive, t + k, last)
            alive &= ~dones[t + k]
        end[t] = last
    envs = np.arange(num_envs)[None, :]
    horizon = (end - np.arange(steps)[:, None] + 1).astype(np.float32)
    discounts = (gamma**horizon) * (1.0 - terminateds[end, envs].astype(np.float32))
    return returns, tree_map(lambda x: x[end, envs], next_obs), discounts.astype(np.float32)
