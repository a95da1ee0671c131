"""Exporting a checkpoint's greedy policy as a file that plain torch runs.

    asyncflow export runs/ppo_CartPole-v1_.../checkpoints/checkpoint_000010.ckpt -o policy.pt

``torch.jit.load("policy.pt")(obs)`` maps a batch of observations (a tensor in
the observation space's own dtype, shape ``(B, *obs_shape)``) to the actions
the env takes, exactly as ``asyncflow evaluate`` picks them: the most likely
action (discrete spaces), the mean (Gaussian), ``tanh`` of the mean (SAC) or
the actor's action (DDPG, TD3), then the env mapping that the framework does
in numpy (a ``Discrete`` start added, clipping or scaling to a ``Box``'s
bounds, the space's dtype), here in torch. Loading needs no asyncflow.

A flat ``Dict`` observation is a dict of such tensors, and an ``"action_mask"`` in
it masks as in training (``action_mask.py``). ``--format onnx`` (one array only)
writes the same module with ``torch.onnx.export`` (it needs
``onnx`` and ``onnxscript``: ``pip install 'asyncflow[export]'``); an ONNX runtime
runs it with ``{"obs": batch}`` as input.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import os
import warnings
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from .algorithms import Algorithm
from .errors import ConfigError
from .evaluate import saved_normalizer
from .rl.envs.action_mask import masked
from .rl.models.distributions import ActionHead
from .rl.policies.actor_critic import ActorCriticPolicy
from .rl.policies.continuous import DeterministicPolicy, SquashedGaussianPolicy
from .rl.policies.epsilon_greedy import EpsilonGreedyPolicy
from .rl.policies.recurrent import Recurrent
from .rl.sampling.normalization import EPS, NormalizerState

__all__ = ["example_batch", "export_policy", "greedy_module"]

Format = Literal["torchscript", "onnx"]


class _ActorCriticGreedy(nn.Module):
    start: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, model: nn.Module, space: gym.Space[Any], masked: bool) -> None:
        super().__init__()
        self.model, self.head, self.masked = model, ActionHead(space), masked
        self.box = isinstance(space, gym.spaces.Box)
        start = np.asarray(getattr(space, "start", 0))
        self.register_buffer("start", torch.as_tensor(start.astype(np.int64)))
        self.shifted = bool(np.any(start))
        if self.box:
            assert isinstance(space, gym.spaces.Box)
            self.register_buffer("low", torch.as_tensor(space.low, dtype=torch.float32))
            self.register_buffer("high", torch.as_tensor(space.high, dtype=torch.float32))
            self.dtype = _torch_dtype(space.dtype)

    def forward(self, obs: Any) -> torch.Tensor:
        return self.env_actions(self.model(obs)[0], obs)

    def env_actions(self, inputs: torch.Tensor, obs: Any) -> torch.Tensor:
        actions = self.head.distribution(masked(inputs, obs) if self.masked else inputs).mode()
        if self.box:
            return torch.clamp(actions, self.low, self.high).to(self.dtype)
        return actions + self.start if self.shifted else actions


class _RecurrentGreedy(_ActorCriticGreedy):
    """``(obs, h, c) -> (env actions, h, c)``: the caller carries the LSTM state, zeros
    (``(batch, lstm_size)`` each) at an episode start."""

    def forward(self, obs: Any, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        net: Any = self.model  # a RecurrentActorCriticNet
        inputs, _, (h, c) = net.step(obs, (h, c))
        return self.env_actions(inputs, obs), h, c


class _QGreedy(nn.Module):
    def __init__(self, model: nn.Module, start: int, masked: bool) -> None:
        super().__init__()
        self.model, self.start, self.masked = model, start, masked

    def forward(self, obs: Any) -> torch.Tensor:
        q: torch.Tensor = self.model(obs)
        return (masked(q, obs) if self.masked else q).argmax(-1) + self.start


class _BoxGreedy(nn.Module):
    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, actor: nn.Module, gaussian: bool, low: np.ndarray, high: np.ndarray, shape: tuple[int, ...],
                 dtype: Any) -> None:  # fmt: skip
        super().__init__()
        self.actor, self.gaussian, self.shape, self.dtype = actor, gaussian, shape, _torch_dtype(dtype)
        self.register_buffer("low", torch.as_tensor(low, dtype=torch.float32))
        self.register_buffer("high", torch.as_tensor(high, dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.actor(obs)
        unit = torch.tanh(out.chunk(2, dim=-1)[0] if self.gaussian else out)
        scaled = self.low + (torch.clamp(unit, -1, 1) + 1) * 0.5 * (self.high - self.low)
        return scaled.reshape((-1, *self.shape)).to(self.dtype)


class _Normalized(nn.Module):
    """``module`` behind the training's observation normalization, frozen
    (``normalize_observations``): the first input is the raw observation."""

    def __init__(self, module: nn.Module, state: NormalizerState, dtype: Any) -> None:
        super().__init__()
        assert state.obs is not None
        self.module = module
        self.register_buffer("mean", torch.as_tensor(state.obs.mean, dtype=torch.float64))
        self.register_buffer("scale", torch.as_tensor(1.0 / np.sqrt(state.obs.var + EPS), dtype=torch.float64))
        self.clip, self.dtype = float(state.clip), _torch_dtype(dtype)

    def forward(self, obs: torch.Tensor, *state: torch.Tensor) -> Any:
        mean: torch.Tensor = self.mean  # type: ignore[assignment]
        scale: torch.Tensor = self.scale  # type: ignore[assignment]
        scaled = torch.clamp((obs.to(torch.float64) - mean) * scale, -self.clip, self.clip).to(self.dtype)
        return self.module(scaled, *state)


def _torch_dtype(dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype)).dtype


def greedy_module(policy: Any, action_space: gym.Space[Any]) -> nn.Module:
    """A torch module: observations -> the env actions ``policy`` picks greedily (a copy,
    on the CPU, in eval mode, without gradients)."""
    module: nn.Module
    if isinstance(policy, Recurrent):
        module = _RecurrentGreedy(policy.net, action_space, policy.rac.masked)
    elif isinstance(policy, ActorCriticPolicy):
        module = _ActorCriticGreedy(policy.model, action_space, policy.ac.masked)
    elif isinstance(policy, EpsilonGreedyPolicy):
        module = _QGreedy(policy.model, int(policy.start), policy.masked)
    elif isinstance(policy, SquashedGaussianPolicy | DeterministicPolicy):
        gaussian = isinstance(policy, SquashedGaussianPolicy)
        module = _BoxGreedy(policy.actor, gaussian, policy.low, policy.high, policy.shape, policy.dtype)
    else:
        raise ConfigError(f"export: {type(policy).__name__} is not a built-in policy; export its model yourself")
    frozen = copy.deepcopy(module).to("cpu").eval()  # the policy's own parameters keep training
    return frozen.requires_grad_(False)


def example_batch(space: gym.Space[Any]) -> torch.Tensor | dict[str, torch.Tensor]:
    """Two observations of ``space`` as one tensor, or a dict of them for a flat ``Dict`` space
    (what the export traces with); a ConfigError for any other space."""
    arrays = gym.spaces.Box | gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary
    space.seed(0)
    if isinstance(space, gym.spaces.Dict) and all(isinstance(s, arrays) for s in space.spaces.values()):
        rows = [space.sample() for _ in range(2)]
        return {k: torch.as_tensor(np.stack([np.asarray(r[k]) for r in rows])) for k in space.spaces}
    if not isinstance(space, arrays):
        raise ConfigError(f"export: observations must be one array or a flat Dict of arrays, not {space}")
    return torch.as_tensor(np.stack([np.asarray(space.sample()) for _ in range(2)]))


def _onnx_export(module: nn.Module, example: Any, path: Path) -> None:
    """``torch.onnx.export`` (the dynamo exporter), any batch size, without its chatter: it logs
    every torchvision op it skips, and torch 2.13's own modules warn of their own deprecations."""
    batch = torch.export.Dim("batch", min=1)
    chatty = logging.getLogger("torch.onnx")
    level = chatty.level
    chatty.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(module, (example,), str(path), input_names=["obs"], output_names=["actions"],
                              dynamic_shapes={"obs": {0: batch}}, dynamo=True, verbose=False)  # fmt: skip
    finally:
        chatty.setLevel(level)


def export_policy(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    fmt: Format = "torchscript",
    *,
    trust_code: bool = False,
    policy_id: str | None = None,
) -> Path:
    """Write the checkpoint's greedy policy to ``out`` (TorchScript, or ONNX); returns the path.
    ``trust_code``: see ``Algorithm.restore``. A multi-agent checkpoint's: policy ``policy_id``'s."""
    if fmt not in ("torchscript", "onnx"):
        raise ConfigError(f"--format must be 'torchscript' or 'onnx', not {fmt!r}")
    algo = Algorithm.restore(checkpoint, trust_code=trust_code, learner_device="cpu", worker_device="cpu",
                             worker_inference="torch")  # fmt: skip
    if isinstance(algo.spaces, dict):
        policy = algo.policy_from_checkpoint(policy_id)
        observation_space, action_space = algo.spaces[policy_id].observation, algo.spaces[policy_id].action
    else:
        if policy_id is not None:
            raise ConfigError(f"--policy: {algo.name}'s checkpoint has one policy; leave --policy out")
        policy = algo.policy_from_checkpoint()
        observation_space, action_space = algo.observation_space, algo.action_space
    example = example_batch(observation_space)
    module = greedy_module(policy, action_space)
    normalizer = saved_normalizer(algo)
    if normalizer is not None:  # folded in: the file takes raw observations
        module = _Normalized(module, normalizer, observation_space.dtype).eval()
    inputs: tuple[Any, ...] = (example,)
    if isinstance(policy, Recurrent):  # the file takes and returns the state too
        if fmt == "onnx":
            raise ConfigError("export --format onnx: not for a recurrent policy (use torchscript)")
        zeros = torch.zeros(len(next(iter(example.values())) if isinstance(example, dict) else example),
                            policy.lstm_size)  # fmt: skip
        inputs = (example, zeros, zeros.clone())
    path = Path(out)
    with torch.no_grad():
        if fmt == "onnx" and isinstance(example, dict):
            raise ConfigError("export --format onnx: observations must be one array (use torchscript for a Dict)")
        if fmt == "onnx":
            if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxscript") is None:
                raise ConfigError("--format onnx needs onnx and onnxscript (pip install 'asyncflow[export]')")
            _onnx_export(module, example, path)
        else:
            with warnings.catch_warnings():
                # torch 2.13 deprecates TorchScript for torch.export (--format export); the
                # file still loads with torch.jit.load, on older torch too.
                warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
                traced = torch.jit.trace(module, inputs)  # type: ignore[no-untyped-call]
                traced.save(str(path))
    return path
