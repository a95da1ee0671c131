"""V-trace (Espeholt et al. 2018, IMPALA): off-policy value targets and
policy-gradient advantages for experience sampled by an older policy.

Arrays are time-major, shaped ``(T, B)``: ``B`` sequences of ``T`` steps.
This form takes the value of each step's *next* observation explicitly
(``next_values``), so an episode that ends inside a sequence, a time-limit
truncation and the end of the sequence are all handled the same way:

    delta_s = rho_s * (r_s + discount_s * V(x'_s) - V(x_s))
    v_s - V(x_s) = delta_s + discount_s * c_s * continues_s * (v_{s+1} - V(x_{s+1}))

with ``rho_s = min(rho_bar, pi/mu)``, ``c_s = min(c_bar, pi/mu)``,
``discount_s = gamma * (1 - terminated_s)``, and ``continues_s = 0`` where
step ``s+1`` does not continue step ``s``'s episode (the episode ended, or
the sequence did). The policy-gradient advantage is
``min(pg_rho_bar, pi/mu) * (r_s + discount_s * v'_{s+1} - V(x_s))`` where
``v'_{s+1}`` is ``v_{s+1}`` if the episode continues and ``V(x'_s)`` if not.
"""

from __future__ import annotations

import torch

__all__ = ["vtrace"]


@torch.no_grad()
def vtrace(
    log_rhos: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    continues: torch.Tensor,
    *,
    clip_rho: float = 1.0,
    clip_pg_rho: float = 1.0,
    clip_c: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(vs, pg_advantages)``, both ``(T, B)``."""
    rhos = torch.exp(log_rhos)
    clipped_rhos = rhos.clamp(max=clip_rho)
    cs = rhos.clamp(max=clip_c)
    continues = continues.to(values.dtype)
    deltas = clipped_rhos * (rewards + discounts * next_values - values)
    corrections = torch.zeros_like(values)
    carry = torch.zeros_like(values[0])
    for t in reversed(range(values.shape[0])):
        carry = deltas[t] + discounts[t] * cs[t] * continues[t] * carry
        corrections[t] = carry
    vs = values + corrections
    # v'_{s+1}: the next step's target inside an episode, else V of the next observation.
    vs_next = torch.cat([vs[1:], torch.zeros_like(vs[:1])])
    bootstrap = torch.where(continues > 0, vs_next, next_values)
    pg_advantages = rhos.clamp(max=clip_pg_rho) * (rewards + discounts * bootstrap - values)
    return vs, pg_advantages
