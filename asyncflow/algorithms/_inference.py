"""Whether an algorithm's rollout workers run their policy in numpy (``worker_inference``).

A worker that runs the built-in MLP in numpy (``rl/numpy_policy.py``) never
imports torch; when every worker of a run is such, the fork server is
restarted without torch too (``prefer_torch_free_fork_server``), and the run
costs the machine two torch images fewer (``benchmarks/footprint.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..rl.action_mask import has_action_mask
from ..rl.models import build_model
from ..rl.models.config import ModelConfig
from ..rl.models.numpy_export import numpy_net
from ..rl.numpy_policy import NumpyNet

if TYPE_CHECKING:
    from ._base import Algorithm

__all__ = ["worker_numpy_net"]


def worker_numpy_net(algo: Algorithm) -> NumpyNet | None:
    """The ``NumpyNet`` the workers of ``algo`` run, or None for torch inference; a
    ConfigError when ``worker_inference="numpy"`` asks for what numpy cannot run."""
    c = algo.config
    if c.worker_inference == "torch":
        return None
    reason = _torch_reason(algo)
    net = None
    if reason is None:
        model = build_model(c.model, algo.observation_space, algo.action_space, "actor_critic", hidden=c.hidden)
        net = numpy_net(model, algo.observation_space, algo.action_space)
        if net is None:
            reason = (f"the built-in model on {algo.observation_space} with {algo.action_space} actions "
                      "(numpy runs dense MLPs on Box observations, with Discrete or Box actions)")  # fmt: skip
    if net is None and c.worker_inference == "numpy":
        raise ConfigError(f"worker_inference: numpy cannot run {reason}; use 'auto' or 'torch'")
    return net


def _torch_reason(algo: Algorithm) -> str | None:
    """What keeps ``algo``'s workers on torch, or None."""
    from ._base import Algorithm

    c = algo.config
    name = type(algo).__name__
    if type(algo).policy_factory is not Algorithm.policy_factory or algo.family != "actor_critic":
        return f"{name}'s worker policy (only actor-critic workers run in numpy)"
    if algo.workers_learn:
        return f"{name}'s workers, which compute gradients"
    if not hasattr(algo, "action_space"):
        return "a multi-agent plan's policies"
    if c.model is not None and not isinstance(c.model, ModelConfig):
        return "a model of your own"
    if getattr(c, "use_lstm", False):
        return "the LSTM core (use_lstm)"
    if c.worker_device != "cpu":
        return f"a policy on worker_device={c.worker_device!r}"
    if has_action_mask(algo.observation_space, algo.action_space):
        return "an action mask"
    return None
