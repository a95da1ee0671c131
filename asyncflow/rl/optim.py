"""Adam (Kingma and Ba, 2015) in a few tensor operations.

Why not ``torch.optim.Adam``: the first torch optimizer a process builds
imports ``torch._dynamo`` (about 800 modules, 1.6-2.9 s on the 2-core dev VM),
which sat on the critical path of every training start. The update below is
the same arithmetic as torch's single-tensor Adam without weight decay or
amsgrad (tested against it in tests/rl/test_optim.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["Adam"]


class Adam:
    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = list(params)
        self.lr, self.betas, self.eps = lr, betas, eps
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        beta1, beta2 = self.betas
        step_size = self.lr / (1 - beta1**self.steps)
        correction2 = math.sqrt(1 - beta2**self.steps)
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        params: list[torch.Tensor] = [self.params[i] for i in live]
        grads: list[torch.Tensor] = [p.grad for p in params]  # type: ignore[misc]
        m = [self.exp_avg[i] for i in live]
        v = [self.exp_avg_sq[i] for i in live]
        # One kernel call per operation for all tensors (torch's "foreach"
        # ops): the per-tensor Python loop cost more than the arithmetic.
        torch._foreach_mul_(m, beta1)
        torch._foreach_add_(m, grads, alpha=1 - beta1)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, correction2)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, m, denom, value=-step_size)

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq, "lr": self.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps, self.lr = int(state["steps"]), float(state["lr"])
        for mine, theirs in ((self.exp_avg, state["exp_avg"]), (self.exp_avg_sq, state["exp_avg_sq"])):
            for a, b in zip(mine, theirs, strict=True):
                a.copy_(torch.as_tensor(b))
