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

from ..errors import NonFiniteError

__all__ = ["Adam", "UpdateGuard"]


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


class UpdateGuard:
    """Skips optimizer steps whose loss or gradient is not finite, and gives up after
    ``max_in_a_row`` of them in a row with ``NonFiniteError``.

    A skipped step leaves the weights and the optimizer's moments untouched
    (the gradients are dropped); ``skipped`` counts them over the run and is
    reported with the learner's stats. One NaN batch (a reward spike, an
    unlucky minibatch) costs one update; a run that has diverged stops with a
    message instead of training on NaN until the end.
    """

    def __init__(self, max_in_a_row: int = 10, name: str = "learner") -> None:
        self.max_in_a_row = max_in_a_row
        self.name = name
        self.skipped = 0
        self.in_a_row = 0

    def step(
        self,
        optimizer: Adam,
        loss: torch.Tensor | None,
        params: list[torch.nn.Parameter],
        max_norm: float | None = None,
    ) -> float | None:
        """After ``loss.backward()``: clip the gradients to ``max_norm`` (if given) and step,
        returning the gradient norm before clipping; or, if the loss or the norm is NaN or
        inf, drop the gradients and return None."""
        grads = [p.grad for p in params if p.grad is not None]
        if max_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        else:
            norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros(())
        value, loss_value = float(norm), 0.0 if loss is None else float(loss.detach())
        if math.isfinite(value) and math.isfinite(loss_value):
            self.in_a_row = 0
            optimizer.step()
            return value
        optimizer.zero_grad()
        self.skipped += 1
        self.in_a_row += 1
        if self.in_a_row >= self.max_in_a_row:
            raise NonFiniteError(
                f"{self.name}: {self.in_a_row} updates in a row had a non-finite loss ({loss_value}) or gradient "
                f"norm ({value}); each was skipped, {self.skipped} in all. Lower lr, clip gradients "
                "(max_grad_norm), or look for NaN in the data (max_nonfinite_updates sets how many to allow)"
            )
        return None
