"""Adam (Kingma and Ba, 2015) and RMSprop in a few tensor operations, on one flat buffer.

Why not ``torch.optim.Adam``: the first torch optimizer a process builds
imports ``torch._dynamo`` (about 800 modules, 1.6-2.9 s on the 2-core dev VM),
which sat on the critical path of every training start. The update below is
the same arithmetic as torch's single-tensor Adam without weight decay or
amsgrad (tested against it in tests/rl/test_optim.py).

**One buffer, a few operations per step.** On the CPU torch's ``_foreach``
operations loop over the tensors one by one, so an update of the 64x64
actor-critic MLP (12 tensors) cost about 100 small operations, and clipping
its gradient norm 30 more: a quarter of a PPO minibatch step on CartPole. So
``Adam`` moves the parameters into one flat buffer (each parameter's
``.data`` becomes a view of it: the module sees no difference), keeps its
moments flat too, and steps on the concatenated gradient: seven operations
whatever the number of tensors, and ``UpdateGuard`` clips that one vector.
Where that cannot hold (mixed dtypes or devices; a parameter that lives in
a larger storage, such as one that another optimizer's buffer already holds;
parameters whose data was replaced since, as ``vector_to_parameters`` does)
the step takes the per-tensor path, with the same state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from ...errors import NonFiniteError

__all__ = ["OPTIMIZERS", "Adam", "FlatOptimizer", "RMSprop", "UpdateGuard", "make_optimizer"]


class FlatOptimizer:
    """What ``Adam`` and ``RMSprop`` share: the parameters in one flat buffer (the module
    docstring), two moment buffers shaped like it (``exp_avg``, ``exp_avg_sq``, views per
    parameter), the step count and the learning rate, which a schedule or ``change_config``
    sets between steps. A subclass says how one step moves the parameters."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, eps: float) -> None:
        self.params = list(params)
        self.lr, self.eps = lr, eps
        self.steps = 0
        self._flat = _flatten(self.params)
        """Every parameter's storage, or None: the per-tensor path."""
        self._addresses = _addresses(self.params)
        if self._flat is not None:
            self._m, self._v = torch.zeros_like(self._flat), torch.zeros_like(self._flat)
            self.exp_avg, self.exp_avg_sq = _views(self._m, self.params), _views(self._v, self.params)
        else:
            self.exp_avg = [torch.zeros_like(p) for p in self.params]
            self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def flat_grad(self, params: Sequence[torch.nn.Parameter] | None = None) -> torch.Tensor | None:
        """Every gradient in one new vector, when the flat path holds: the parameters still
        live in this optimizer's buffer, each has a gradient, and ``params`` (if given) are
        this optimizer's own. None otherwise."""
        if self._flat is None or _addresses(self.params) != self._addresses:
            return None
        if params is not None and (len(params) != len(self.params) or any(
                a is not b for a, b in zip(params, self.params, strict=True))):  # fmt: skip
            return None
        grads = [p.grad for p in self.params if p.grad is not None]
        if len(grads) != len(self.params):
            return None
        return torch._C._nn.flatten_dense_tensors(grads)  # one call: 14 us for 12 tensors, 33 with cat

    @torch.no_grad()
    def step(self, flat_grad: torch.Tensor | None = None) -> None:
        """One update with the parameters' gradients, or with ``flat_grad`` (from ``flat_grad()``)."""
        if flat_grad is None:
            flat_grad = self.flat_grad()
        self.steps += 1
        if flat_grad is not None and self._flat is not None:
            self._step([self._flat], [flat_grad], [self._m], [self._v])
            return
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        params: list[torch.Tensor] = [self.params[i] for i in live]
        grads: list[torch.Tensor] = [p.grad for p in params]  # type: ignore[misc]
        self._step(params, grads, [self.exp_avg[i] for i in live], [self.exp_avg_sq[i] for i in live])

    def _step(self, params: list[torch.Tensor], grads: list[torch.Tensor], m: list[torch.Tensor],
              v: list[torch.Tensor]) -> None:  # fmt: skip
        """Move ``params`` by ``grads`` with the moments ``m`` and ``v`` (lists of tensors:
        the one flat buffer, or the parameters one by one)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq, "lr": self.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps, self.lr = int(state["steps"]), float(state["lr"])
        for mine, theirs in ((self.exp_avg, state["exp_avg"]), (self.exp_avg_sq, state["exp_avg_sq"])):
            for a, b in zip(mine, theirs, strict=True):
                a.copy_(torch.as_tensor(b))


class Adam(FlatOptimizer):
    """Adam without weight decay or amsgrad, as torch's."""

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        super().__init__(params, lr, eps)
        self.betas = betas

    def _step(self, params: list[torch.Tensor], grads: list[torch.Tensor], m: list[torch.Tensor],
              v: list[torch.Tensor]) -> None:  # fmt: skip
        beta1, beta2 = self.betas
        step_size = self.lr / (1 - beta1**self.steps)
        correction2 = math.sqrt(1 - beta2**self.steps)
        # One call per operation for all tensors (torch's "foreach" ops): the
        # per-tensor Python loop cost more than the arithmetic.
        torch._foreach_lerp_(m, grads, 1 - beta1)  # as torch's Adam: m + (1 - beta1) (g - m)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        denoms = torch._foreach_sqrt(v)
        torch._foreach_div_(denoms, correction2)
        torch._foreach_add_(denoms, self.eps)
        torch._foreach_addcdiv_(params, m, denoms, value=-step_size)


class RMSprop(FlatOptimizer):
    """RMSprop as torch's (``eps`` outside the square root; no momentum, centering or weight
    decay): ``v = alpha v + (1 - alpha) g^2``, ``p -= lr g / (sqrt(v) + eps)``. Its one moment
    is ``exp_avg_sq``; ``exp_avg`` stays zero. Stable-Baselines3's A2C steps with it
    (``alpha=0.99, eps=1e-5``), and so does the A2C of rl-baselines3-zoo's tuned settings."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, alpha: float = 0.99, eps: float = 1e-5) -> None:
        super().__init__(params, lr, eps)
        self.alpha = alpha

    def _step(self, params: list[torch.Tensor], grads: list[torch.Tensor], m: list[torch.Tensor],
              v: list[torch.Tensor]) -> None:  # fmt: skip
        torch._foreach_mul_(v, self.alpha)
        torch._foreach_addcmul_(v, grads, grads, value=1 - self.alpha)
        denoms = torch._foreach_sqrt(v)
        torch._foreach_add_(denoms, self.eps)
        torch._foreach_addcdiv_(params, grads, denoms, value=-self.lr)


OPTIMIZERS: dict[str, type[FlatOptimizer]] = {"adam": Adam, "rmsprop": RMSprop}
"""``learner.optimizer``'s values."""


def make_optimizer(kind: str, params: Iterable[torch.nn.Parameter], lr: float, adam_eps: float = 1e-8) -> FlatOptimizer:
    """``learner.optimizer``'s optimizer over ``params``: Adam with ``adam_eps``, or RMSprop
    with torch's ``alpha`` and Stable-Baselines3's ``eps`` (0.99 and 1e-5)."""
    if kind == "adam":
        return Adam(params, lr=lr, eps=adam_eps)
    if kind == "rmsprop":
        return RMSprop(params, lr=lr)
    raise ValueError(f"optimizer: expected one of {sorted(OPTIMIZERS)}, got {kind!r}")


def _flatten(params: list[torch.nn.Parameter]) -> torch.Tensor | None:
    """Move ``params`` into one new buffer (each one's ``.data`` a view of it) and return it;
    None, leaving them as they are, where one buffer cannot hold them all."""
    if not params or len({id(p) for p in params}) != len(params):
        return None
    first = params[0]
    for p in params:
        if (p.dtype != first.dtype or p.device != first.device or p.layout != torch.strided
                or not p.is_contiguous() or p.storage_offset() != 0
                or p.untyped_storage().nbytes() != p.numel() * p.element_size()):  # fmt: skip
            return None  # part of a larger storage (another optimizer's buffer), another format
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        for p, view in zip(params, _views(flat, params), strict=True):
            p.data = view
    return flat


def _views(flat: torch.Tensor, like: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """``flat`` cut into views shaped as ``like``."""
    views, offset = [], 0
    for p in like:
        views.append(flat[offset : offset + p.numel()].view(p.shape))
        offset += p.numel()
    return views


def _addresses(params: list[torch.nn.Parameter]) -> list[tuple[int, tuple[int, ...]]]:
    """Where each parameter's data lives and its shape: the flat path holds while these stay."""
    return [(p.data_ptr(), tuple(p.shape)) for p in params]


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
        optimizer: FlatOptimizer,
        loss: torch.Tensor | None,
        params: list[torch.nn.Parameter],
        max_norm: float | None = None,
    ) -> float | None:
        """After ``loss.backward()``: clip the gradients to ``max_norm`` (if given) and step,
        returning the gradient norm before clipping; or, if the loss or the norm is NaN or
        inf, drop the gradients and return None."""
        flat = optimizer.flat_grad(params)
        if flat is not None:  # one vector: one norm, one multiplication (the coefficient as a float: tensor
            norm = torch.linalg.vector_norm(flat)  # arithmetic on a 0-d tensor costs 5-10 us an operation)
            if max_norm is not None and (coef := max_norm / (float(norm) + 1e-6)) < 1.0:  # as clip_grad_norm_
                flat.mul_(coef)
        elif max_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        else:
            grads = [p.grad for p in params if p.grad is not None]
            norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros(())
        value, loss_value = float(norm), 0.0 if loss is None else float(loss.detach())
        if math.isfinite(value) and math.isfinite(loss_value):
            self.in_a_row = 0
            optimizer.step(flat)
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
