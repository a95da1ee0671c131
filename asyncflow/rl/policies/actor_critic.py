"""The actor-critic policy: inference in workers, minibatch SGD in the learner.

``ActorCriticPolicy`` is what both a rollout worker (actions, values, A3C
gradients) and a learner (training) hold. Its network is any module that
honours ``ActorCriticModel`` (the built-in one by default); ``ActorCritic``
pairs it with the action distribution of the action space, and that pair is
what a loss function sees. Losses are plain functions supplied by each
algorithm module, so this file knows no algorithm.

The learner's copy may live on a GPU (``device``); batches become tensors
there in their own dtype, and the model casts. Weights leave as one CPU
vector.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ..data.sample_batch import OBS, SampleBatch
from ..data.tree import Tree, tree_map
from ..envs.action_mask import has_action_mask, masked
from ..learners.device import resolve_device, to_numpy, to_tensors
from ..learners.optim import FlatOptimizer, UpdateGuard, make_optimizer
from ..learners.precision import autocast, resolve_precision, to_float32
from ..models import ActionDistribution, ActionHead, ModelSpec, build_model
from ..models.builtin import ActorCriticNet
from ..models.distributions import DiagGaussian
from ..models.nets import seeded
from ..policy import ModelWeights
from .continuous import SDENoise

__all__ = ["ActorCritic", "ActorCriticPolicy", "LossFn"]


def _rows(index: torch.Tensor, column: Any) -> Any:
    """The minibatch rows of a tensor column (channels-last frames stay channels-last), or of a
    numpy object column (a user model's ``Text``)."""
    if not isinstance(column, torch.Tensor):
        return column[index.cpu().numpy()]
    if column.dim() == 4 and not column.is_contiguous() and column.is_contiguous(memory_format=torch.channels_last):
        return torch.index_select(column.permute(0, 2, 3, 1), 0, index).permute(0, 3, 1, 2)
    # index_select, not column[index]: 256 rows of a 1,024-frame Atari batch in 0.4 ms against 5.5 (dev CPU)
    return torch.index_select(column, 0, index)


class ActorCritic:
    """A model honouring ``ActorCriticModel`` with the distribution its action space implies.

    ``dist, values = ac(obs)``: one forward pass gives both.
    """

    def __init__(self, model: nn.Module, action_space: gym.Space[Any], masked: bool = False) -> None:
        self.model = model
        self.head = ActionHead(action_space)
        self.masked = masked
        """Observations carry an ``action_mask`` (``action_mask.py``): invalid actions get no probability."""

    def __call__(self, obs: Tree) -> tuple[ActionDistribution, torch.Tensor]:
        inputs, values = to_float32(self.model(obs))  # float32 again after a bfloat16 forward
        if self.masked:
            inputs = masked(inputs, obs)
        return self.head.distribution(inputs), values.reshape(-1)


LossFn = Callable[[ActorCritic, Mapping[str, Any], Any], tuple[torch.Tensor, dict[str, float]]]
"""``loss(ac, tensors, config) -> (loss, stats)``: ``tensors`` are the batch's columns on the learner's device."""


class ActorCriticPolicy(ModelWeights):
    """An actor-critic model with inference (batched actions, values) and learning
    (minibatch SGD on a loss function, gradients, flat weights).

    Its constructor is a ``PolicyFactory``: ``worker_index`` is accepted and unused.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        model: ModelSpec = None,
        hidden: Sequence[int] = (64, 64),
        lr: float = 3e-4,
        max_grad_norm: float | None = 0.5,
        loss: LossFn | None = None,
        loss_config: Any = None,
        seed: int = 0,
        worker_index: int = 0,
        device: str | torch.device = "cpu",
        max_nonfinite_updates: int = 10,
        precision: str = "float32",
        optimizer: str = "adam",
        sde: bool = False,
        sde_sample_freq: int = 1,
        log_std_init: float | None = None,
    ) -> None:
        self.sde = sde
        """gSDE (``ActorCriticNet``): a Box action's noise is ``latent(s) @ W``, each env's ``W``
        kept for ``sde_sample_freq`` calls of ``compute_actions`` (steps), then drawn again."""
        self.log_std_init = log_std_init
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.autocast_dtype = resolve_precision(precision, self.device)
        """The losses' forward passes run in this dtype under autocast (None: float32); ``precision.py``."""
        self.action_space = action_space
        self.masked = has_action_mask(observation_space, action_space)
        with seeded(seed):
            self.model = self.build_network(model, observation_space, action_space, hidden).to(self.device)
        self.ac = self.actor_critic(self.model)
        self._params = list(self.model.parameters())
        self.guard = UpdateGuard(max_nonfinite_updates, type(self).__name__)
        self.lr = lr
        self.optimizer_kind = optimizer
        """``learner.optimizer``: "adam" (eps 1e-5) or "rmsprop" (``optim.make_optimizer``)."""
        self._optimizer: FlatOptimizer | None = None
        self.max_grad_norm = max_grad_norm
        self.loss = loss
        self.loss_config = loss_config
        self.version = 0
        self._generator = torch.Generator(device=self.device).manual_seed(seed)
        self._sde_noise = SDENoise(sde_sample_freq)

    def build_network(
        self, model: ModelSpec, observation_space: gym.Space[Any], action_space: gym.Space[Any], hidden: Sequence[int]
    ) -> nn.Module:
        """The network (the built-in model for the spaces, or ``model``'s)."""
        return build_model(model, observation_space, action_space, "actor_critic", hidden=hidden, sde=self.sde,
                           log_std_init=self.log_std_init)  # fmt: skip

    def actor_critic(self, model: nn.Module) -> ActorCritic:
        """``model`` paired with this policy's action distribution (what a loss calls)."""
        return ActorCritic(model, self.action_space, self.masked)

    @property
    def optimizer(self) -> FlatOptimizer:
        """Built on first use: a sampling-only worker never needs one."""
        if self._optimizer is None:
            self._optimizer = make_optimizer(self.optimizer_kind, self.model.parameters(), self.lr, adam_eps=1e-5)
        return self._optimizer

    def tensors(self, obs: Tree) -> Tree:
        """Numpy observations (or columns) as tensors on this policy's device."""
        return to_tensors(obs, self.device)

    # -- inference -------------------------------------------------------

    @torch.no_grad()
    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample actions for a batch of observations: (actions, log-probs, values)."""
        if self.sde:
            return self._sde_actions(self.tensors(obs))
        dist, values = self.ac(self.tensors(obs))
        actions = dist.sample(self._generator)
        return actions.cpu().numpy(), dist.log_prob(actions).cpu().numpy(), values.cpu().numpy()

    def _sde_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """gSDE's actions: the mean plus ``latent(s) @ W``, with the log-probability of the
        state's Gaussian, whose variance is that noise's (``ActorCriticNet.with_latent``)."""
        inputs, values, latent = to_float32(cast(ActorCriticNet, self.model).with_latent(obs))
        noise = self._sde_noise.matrices(self.model, len(latent), self._generator)
        dist = cast(DiagGaussian, self.ac.head.distribution(inputs))
        actions = (dist.mean + (latent.unsqueeze(1) @ noise).squeeze(1)).reshape(-1, *dist.shape)
        return actions.cpu().numpy(), dist.log_prob(actions).cpu().numpy(), values.reshape(-1).cpu().numpy()

    @torch.no_grad()
    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """Deterministic actions: the most likely (discrete) or the mean (continuous)."""
        dist, _ = self.ac(self.tensors(obs))
        return dist.mode().cpu().numpy()  # type: ignore[no-any-return]

    @torch.no_grad()
    def values(self, obs: Tree) -> np.ndarray:
        """State values (numpy in, numpy out)."""
        return self.ac(self.tensors(obs))[1].cpu().numpy()  # type: ignore[no-any-return]

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Actions as the environment takes them (Gaussian samples clipped to bounds)."""
        return self.ac.head.to_env(actions)

    # -- learning --------------------------------------------------------

    def _loss(self, tensors: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        if self.loss is None:
            raise RuntimeError("this policy was built without a loss function")
        with autocast(self.device, self.autocast_dtype):
            return self.loss(self.ac, tensors, self.loss_config)

    def _clip(self) -> float:
        """Clip the global gradient norm (if configured); return the norm before clipping."""
        if self.max_grad_norm is None:
            return 0.0
        return float(nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm))

    def _step(self, loss: torch.Tensor | None, clip: bool = True) -> float | None:
        """Clip (unless told not to), check and apply the gradients; None if they were not finite
        (then skipped)."""
        norm = self.guard.step(self.optimizer, loss, self._params, self.max_grad_norm if clip else None)
        if norm is not None:
            self.version += 1
        return norm

    def learn_on_batch(
        self,
        batch: SampleBatch,
        num_epochs: int = 1,
        minibatch_size: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
    ) -> dict[str, float]:
        """Epochs of shuffled minibatch SGD; returns the mean of the loss stats.

        The batch becomes tensors on the device once, its observations laid
        out by the model's ``training_layout`` where it has one (the built-in
        models' CNN: channels-last); minibatches are rows selected from them.
        ``shuffle=False`` keeps rows in order (losses over sequences,
        V-trace). A minibatch whose loss or gradient is not finite
        is skipped (``UpdateGuard``); ``skipped_updates`` counts them over the run.
        """
        rng = np.random.default_rng(seed)
        tensors = self.tensors(dict(batch))
        layout = getattr(self.model, "training_layout", None)  # the built-in models' (encoders.py), or a user's
        if layout is not None and OBS in tensors:
            tensors[OBS] = layout(tensors[OBS])
        n = len(batch)
        size = minibatch_size or n
        totals: dict[str, float] = {}
        steps = 0
        for _ in range(num_epochs):
            order = torch.from_numpy(self.order(rng, n, shuffle)).to(self.device)
            for start in range(0, n, size):
                index = order[start : start + size]
                loss, stats = self._loss(tree_map(functools.partial(_rows, index), tensors))
                self.optimizer.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                norm = self._step(loss)
                if norm is None:
                    continue  # its stats are NaN: kept out of the means
                stats["grad_norm"] = norm
                for k, v in stats.items():
                    totals[k] = totals.get(k, 0.0) + v
                steps += 1
        means = {k: v / steps for k, v in totals.items()} if steps else {}
        means["skipped_updates"] = self.guard.skipped
        return means

    def order(self, rng: np.random.Generator, n: int, shuffle: bool) -> np.ndarray:
        """The order of the batch's ``n`` rows for one epoch."""
        return rng.permutation(n) if shuffle else np.arange(n)

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], dict[str, float]]:
        """Gradients of the loss on ``batch`` (CPU numpy arrays, one per parameter) and the loss stats."""
        loss, stats = self._loss(self.tensors(dict(batch)))
        self.model.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        stats["grad_norm"] = self._clip()
        grads = [to_numpy(p.grad if p.grad is not None else torch.zeros_like(p)) for p in self.model.parameters()]
        return grads, stats

    def apply_gradients(self, grads: Sequence[np.ndarray]) -> None:
        """One optimizer step with the given gradients, as they are: ``compute_gradients``
        clipped them where they were computed (A3C's workers, A2C's microbatches)."""
        for p, g in zip(self._params, grads, strict=True):
            p.grad = torch.as_tensor(g).to(p.device)
        self._step(None, clip=False)  # checked, not clipped again: compute_gradients clipped them

    # -- weights ---------------------------------------------------------
