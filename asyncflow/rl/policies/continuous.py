"""The policies of SAC, DDPG and TD3 on ``Box`` actions, and the model they share with their learners.

Every network works in a normalized action space ``[-1, 1]^d`` (``d`` the
size of the flattened ``Box``); the workers' policies map actions to the
environment's bounds and shape in ``env_actions``, and the replay buffer
stores the normalized actions, so the critics never see the scale of a
particular environment.

The model is any module honouring ``ContinuousModel`` (the built-in
``ContinuousNet`` by default): an ``actor`` and a ``critic`` with one column
per Q function.

- ``squashed_gaussian``: a tanh-squashed Gaussian sample (SAC), with the
  change-of-variables correction in its log-probability.
- ``SquashedGaussianPolicy``, ``DeterministicPolicy``: what workers run
  (DDPG and TD3: ``tanh(actor(obs))`` plus Gaussian noise).
- ``box_space``, ``build_continuous_model``: the action space checked, the model built.

The learners, each with its loss, live with their algorithms (``SACLearner`` in
``algorithms/sac.py``, ``TD3Learner`` in ``algorithms/td3.py``), on the base they share
(``rl/learners/continuous.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ...errors import ConfigError
from ..data.tree import Tree, tree_len
from ..learners.device import resolve_device, to_tensors
from ..models import ModelSpec, build_model
from ..models.builtin import SDEActor
from ..models.nets import seeded
from ..policy import FlatWeights, flat_weights, load_flat_weights

__all__ = [
    "DeterministicPolicy",
    "SquashedGaussianPolicy",
    "box_space",
    "build_continuous_model",
    "SDENoise",
    "sde_noise_matrices",
    "sde_sample",
    "squashed_gaussian",
]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def box_space(action_space: gym.Space[Any]) -> gym.spaces.Box:
    if not isinstance(action_space, gym.spaces.Box):
        raise ConfigError(f"continuous control needs a Box action space, not {action_space}")
    if not np.all(np.isfinite(action_space.low)) or not np.all(np.isfinite(action_space.high)):
        raise ConfigError(f"continuous control needs finite action bounds, not {action_space}")
    return action_space


def squashed_gaussian(
    params: torch.Tensor,
    deterministic: bool = False,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Actions in [-1, 1] from ``(B, 2d)`` means and log-stds (reparameterized, so gradients
    flow) and their log-probabilities; the noise is drawn from ``generator``, or given
    (``noise``: the deviation from the mean, gSDE's ``latent @ W``)."""
    mean, log_std = params.chunk(2, dim=-1)
    log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
    std = log_std.exp()
    if deterministic:
        u = mean
    elif noise is not None:
        u = mean + noise
    else:
        u = mean + std * torch.randn(mean.shape, generator=generator, device=mean.device)
    gaussian_logp = (-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    # log |d tanh(u)/du| = log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|.
    correction = (2 * (math.log(2) - u - nn.functional.softplus(-2 * u))).sum(-1)
    return torch.tanh(u), gaussian_logp - correction


def build_continuous_model(
    spec: ModelSpec,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    hidden: Sequence[int],
    gaussian: bool,
    num_q: int,
    sde: bool = False,
    log_std_init: float = -3.0,
) -> nn.Module:
    return build_model(spec, observation_space, action_space, "continuous", hidden=hidden, gaussian=gaussian,
                       num_q=num_q, sde=sde, log_std_init=log_std_init)  # fmt: skip


def sde_noise_matrices(actor: nn.Module, n: int, generator: torch.Generator | None) -> torch.Tensor:
    """``n`` draws of gSDE's ``(features, d)`` matrix from ``N(0, exp(log_std)^2)``, ``(n, features, d)``
    (reparameterized: the learner's draw trains ``log_std``). ``actor`` is a module whose ``log_std``
    is that matrix: SAC's ``SDEActor``, or the actor-critic's ``ActorCriticNet`` with ``sde``."""
    std = cast(SDEActor, actor).log_std.exp()
    return std * torch.randn((n, *std.shape), generator=generator, device=std.device)


class SDENoise:
    """A worker's gSDE matrices: each env's, kept for ``every`` draws, then drawn again (and
    drawn anew when the number of envs changes). Not training state: a checkpoint does not keep
    them, and a resumed run draws new ones."""

    def __init__(self, every: int) -> None:
        self.every = every
        self._matrices: torch.Tensor | None = None
        self._draws = 0

    def matrices(self, actor: nn.Module, n: int, generator: torch.Generator | None) -> torch.Tensor:
        """The ``(n, features, d)`` matrices for this step (``sde_noise_matrices``)."""
        kept = self._matrices
        if kept is None or len(kept) != n or self._draws >= self.every:
            kept = self._matrices = sde_noise_matrices(actor, n, generator)
            self._draws = 0
        self._draws += 1
        return kept


def sde_sample(actor: nn.Module, obs: Any, matrices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """gSDE's squashed actions and log-probabilities at ``obs``: the noise ``latent @ W``, one
    ``W`` (``matrices`` of shape (1, f, d)) for the whole batch or one per row ((B, f, d))."""
    params, latent = cast(SDEActor, actor).with_latent(obs)
    noise = (latent.unsqueeze(1) @ matrices).squeeze(1)
    return squashed_gaussian(params, noise=noise)


class _BoxPolicy:
    """Worker side: the model's actor, uniform random actions for the first
    ``random_steps`` steps of this worker, and scaling to the env's bounds."""

    gaussian: bool

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        seed: int = 0,
        worker_index: int = 0,
        model: ModelSpec = None,
        hidden: Sequence[int] = (256, 256),
        random_steps: int = 0,
        num_q: int = 2,
        device: str | torch.device = "cpu",
    ) -> None:
        box = box_space(action_space)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.shape = tuple(box.shape)
        self.low = np.asarray(box.low, np.float32).reshape(-1)
        self.high = np.asarray(box.high, np.float32).reshape(-1)
        self.dtype = box.dtype
        self.random_steps = random_steps
        self.steps = 0
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.version = 0
        with seeded(seed):
            self.model = self.build_model(model, observation_space, action_space, hidden, num_q).to(self.device)

    def build_model(self, model: ModelSpec, observation_space: gym.Space[Any], action_space: gym.Space[Any],
                    hidden: Sequence[int], num_q: int) -> nn.Module:  # fmt: skip
        """The model whose actor acts here (its critic stays unused)."""
        return build_continuous_model(model, observation_space, action_space, hidden, self.gaussian, num_q)

    @property
    def actor(self) -> nn.Module:
        """The model's actor (its weights are the ones that travel)."""
        return cast(nn.Module, self.model.actor)

    def _act(self, obs: Tree) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover

    @torch.no_grad()
    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exploring actions in [-1, 1] (log-probs and values are zeros)."""
        n = tree_len(obs)
        if self.steps < self.random_steps:
            actions = self.rng.uniform(-1, 1, (n, len(self.low))).astype(np.float32)
        else:
            actions = self._act(to_tensors(obs, self.device)).cpu().numpy()
        self.steps += n
        zeros = np.zeros(n, np.float32)
        return actions, zeros, zeros

    def values(self, obs: Tree) -> np.ndarray:
        """Zeros: these workers need no state values."""
        return np.zeros(tree_len(obs), np.float32)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Normalized actions scaled to the env's bounds and shaped like its space."""
        scaled = self.low + (np.clip(actions, -1, 1) + 1) * 0.5 * (self.high - self.low)
        return scaled.reshape(-1, *self.shape).astype(self.dtype, copy=False)  # type: ignore[no-any-return]

    def get_weights(self) -> FlatWeights:
        """The actor's weights."""
        return flat_weights(self.actor, self.version)

    def set_weights(self, weights: FlatWeights) -> None:
        """Load the learner's actor weights."""
        load_flat_weights(self.actor, weights.vector)
        self.version = weights.version


class SquashedGaussianPolicy(_BoxPolicy):
    """SAC's worker policy: samples from the squashed Gaussian, with noise independent at each
    step, or with gSDE's (``sde_sample_freq``: each env keeps its noise matrix for that many
    steps, then draws another; ``SDEActor``)."""

    gaussian = True

    def __init__(self, *args: Any, sde_sample_freq: int | None = None, log_std_init: float = -3.0,
                 **kwargs: Any) -> None:  # fmt: skip
        self.sde_sample_freq = sde_sample_freq
        self.log_std_init = log_std_init
        super().__init__(*args, **kwargs)
        self.sde_noise = None if sde_sample_freq is None else SDENoise(sde_sample_freq)

    def build_model(self, model: ModelSpec, observation_space: gym.Space[Any], action_space: gym.Space[Any],
                    hidden: Sequence[int], num_q: int) -> nn.Module:  # fmt: skip
        return build_continuous_model(model, observation_space, action_space, hidden, True, num_q,
                                      sde=self.sde_sample_freq is not None, log_std_init=self.log_std_init)  # fmt: skip

    def _act(self, obs: Tree) -> torch.Tensor:
        if self.sde_noise is None:
            return squashed_gaussian(self.actor(obs), generator=self.generator)[0]
        return sde_sample(self.actor, obs, self.sde_noise.matrices(self.actor, tree_len(obs), self.generator))[0]

    @torch.no_grad()
    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """tanh of the Gaussian's mean."""
        return squashed_gaussian(self.actor(to_tensors(obs, self.device)), True)[0].cpu().numpy()  # type: ignore[no-any-return]


class DeterministicPolicy(_BoxPolicy):
    """DDPG's and TD3's worker policy: the actor's action plus exploration noise, Gaussian
    (independent at each step, std ``exploration_noise``) or Ornstein-Uhlenbeck (``"ou"``:
    correlated in time within an episode, ``x += theta (0 - x) dt + sigma sqrt(dt) N(0, 1)``
    with ``sigma = exploration_noise``, ``theta = 0.15``, ``dt = 0.01``, as Stable-Baselines3's
    ``OrnsteinUhlenbeckActionNoise`` and the DDPG paper; each env's process starts from 0 at
    each episode)."""

    gaussian = False
    OU_THETA, OU_DT = 0.15, 1e-2

    def __init__(self, *args: Any, exploration_noise: float = 0.1, noise_type: str = "gaussian", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sigma = exploration_noise
        self.noise_type = noise_type
        self.noise: dict[str, torch.Tensor] = {}
        """``"ou"``: each env's Ornstein-Uhlenbeck process, (envs, action size); missing: all at 0
        (a checkpoint does not keep it: a resumed run's processes start from 0)."""

    def _act(self, obs: Tree) -> torch.Tensor:
        a = torch.tanh(self.actor(obs))
        noise = torch.randn(a.shape, generator=self.generator, device=self.device)
        if self.noise_type == "ou":
            last = self.noise.get("ou")
            x: torch.Tensor = last if last is not None and last.shape == a.shape else torch.zeros_like(a)
            x = x + self.OU_THETA * (0 - x) * self.OU_DT + self.sigma * self.OU_DT**0.5 * noise
            self.noise["ou"] = x
            return (a + x).clamp(-1, 1)
        return (a + self.sigma * noise).clamp(-1, 1)

    def episodes_ended(self, lanes: Sequence[int]) -> None:
        """Those envs' noise starts again from 0 (``StatefulPolicy``)."""
        if (x := self.noise.get("ou")) is not None:
            x[list(lanes)] = 0.0

    def take_columns(self) -> dict[str, np.ndarray]:
        """No per-step columns: the noise is the worker's alone."""
        return {}

    def reset_state(self) -> None:
        """Every env's noise from 0."""
        self.noise.clear()

    @torch.no_grad()
    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """The actor's action, without noise."""
        return torch.tanh(self.actor(to_tensors(obs, self.device))).cpu().numpy()  # type: ignore[no-any-return]
