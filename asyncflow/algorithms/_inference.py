"""Whether an algorithm's rollout workers run their policy in numpy (``rollouts.inference``).

A worker that runs the built-in MLP in numpy (``rl/policies/numpy_policy.py``) never
imports torch; when every worker of a run is such, the fork server is
restarted without torch too (``prefer_torch_free_fork_server``), and the run
costs the machine two torch images fewer (``benchmarks/footprint.py``).
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..rl.envs.action_mask import has_action_mask
from ..rl.models import build_model
from ..rl.models.numpy_export import numpy_net
from ..rl.policies.numpy_policy import NumpyNet
from ._config import AlgorithmConfig, OnPolicyConfig
from ._recipe import Recipe, Spaces

__all__ = ["worker_numpy_net"]


def worker_numpy_net(recipe: Recipe[Any, Any, Any], config: AlgorithmConfig, spaces: Any, name: str) -> NumpyNet | None:
    """The ``NumpyNet`` the workers of ``recipe`` run, or None for torch inference; a
    ConfigError when ``rollouts.inference="numpy"`` asks for what numpy cannot run."""
    if config.rollouts.inference == "torch":
        return None
    reason = _torch_reason(recipe, config, spaces, name)
    net = None
    if reason is None:
        assert isinstance(spaces, Spaces)
        model = build_model(config.model, spaces.observation, spaces.action, "actor_critic",
                            hidden=type(config).vector_hidden)  # fmt: skip
        net = numpy_net(model, spaces.observation, spaces.action)
        if net is None:
            reason = (f"the built-in model on {spaces.observation} with {spaces.action} actions "
                      "(numpy runs dense MLPs on Box observations, with Discrete or Box actions)")  # fmt: skip
    if net is None and config.rollouts.inference == "numpy":
        raise ConfigError(f"worker_inference: numpy cannot run {reason}; use 'auto' or 'torch'")
    return net


def _torch_reason(recipe: Recipe[Any, Any, Any], config: AlgorithmConfig, spaces: Any, name: str) -> str | None:
    """What keeps the workers on torch, or None."""
    if recipe.capabilities.multi_agent:
        return "a multi-agent plan's policies"
    if not recipe.capabilities.numpy_inference:
        return f"{name}'s {recipe.capabilities.numpy_inference_reason}"
    if config.model.custom is not None:
        return "a model of your own"
    if config.model.use_lstm:
        return "the LSTM core (use_lstm)"
    if isinstance(config, OnPolicyConfig) and config.use_sde:
        return "gSDE's noise (use_sde)"
    if config.rollouts.device != "cpu":
        return f"a policy on worker_device={config.rollouts.device!r}"
    if has_action_mask(spaces.observation, spaces.action):
        return "an action mask"
    return None
