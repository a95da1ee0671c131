"""Advantage estimation: GAE (Schulman et al. 2016), computed per environment."""

from __future__ import annotations

import numpy as np

__all__ = ["compute_gae", "discount_cumsum"]


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


def discount_cumsum(x: np.ndarray, gamma: float) -> np.ndarray:
    """``y[t] = sum_k gamma**k * x[t+k]`` along the first axis."""
    out = np.zeros_like(x, dtype=np.float32)
    running = np.zeros(x.shape[1:], dtype=np.float32)
    for t in reversed(range(len(x))):
        running = x[t] + gamma * running
        out[t] = running
    return out
