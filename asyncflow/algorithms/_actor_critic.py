"""What the actor-critic algorithms' recipes share (PG, A2C, A3C, PPO, IMPALA, APPO):
workers that run the actor-critic policy (or its numpy twin, chosen by the session), and a
learner that trains it on the algorithm's loss; an LSTM core behind both with ``use_lstm``."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..rl.policies.actor_critic import ActorCriticPolicy, LossFn
from ..rl.policies.recurrent import recurrent_policy
from ..rl.sampling.trajectory import PostprocessMode
from ._config import AlgorithmConfig, OnPolicyConfig
from ._recipe import Spaces, Workers, single_model

__all__ = ["ON_POLICY_MODELS", "ActorCriticLearner", "ActorCriticWorkers"]

P = TypeVar("P", bound=ActorCriticPolicy)


def _policy_class(base: type[ActorCriticPolicy], config: AlgorithmConfig) -> type[ActorCriticPolicy]:
    return recurrent_policy(base) if config.model.use_lstm else base


def _recurrent(config: AlgorithmConfig) -> dict[str, Any]:
    model = config.model
    return {"lstm_size": model.lstm_size, "max_seq_len": model.max_seq_len} if model.use_lstm else {}


ON_POLICY_MODELS = single_model("actor_critic", sde=lambda c: c.use_sde, log_std_init=lambda c: c.log_std_init)
"""``Recipe.models`` of PG, A2C, A3C and PPO: the built-in actor-critic, with gSDE if asked."""


def _options(config: AlgorithmConfig) -> dict[str, Any]:
    """gSDE and the Gaussian's initial log-std, where the config has them (PG, A2C, A3C, PPO)."""
    return config.actor_critic_options() if isinstance(config, OnPolicyConfig) else {}


@dataclass(frozen=True)
class ActorCriticWorkers:
    """``Recipe.workers``: the actor-critic policy with ``loss`` (A3C's workers differentiate
    it), postprocessed by ``postprocess`` (GAE with the config's ``lam``)."""

    loss: LossFn
    postprocess: PostprocessMode = "gae"
    use_critic: bool = True

    def __call__(self, config: AlgorithmConfig, spaces: Spaces) -> Workers:
        c = config
        policy = functools.partial(  # type: ignore[call-arg]
            _policy_class(ActorCriticPolicy, c), model=c.model, hidden=c.vector_hidden, lr=c.learner.lr,
            max_grad_norm=c.learner.max_grad_norm, loss=self.loss, loss_config=c, device=c.rollouts.device,
            **_recurrent(c), **_options(c),
        )  # fmt: skip
        lam = c.lam if isinstance(c, OnPolicyConfig) else 1.0
        return Workers(policy, self.postprocess, use_critic=self.use_critic, lam=lam)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ActorCriticLearner(Generic[P]):
    """``Recipe.learner``: a ``policy_class`` (an actor-critic policy) that trains on ``loss``,
    on ``learner.device``."""

    loss: LossFn
    policy_class: type[P]

    def __call__(self, config: AlgorithmConfig, spaces: Spaces) -> P:
        c, part = config, config.learner
        return _policy_class(self.policy_class, c)(  # type: ignore[return-value]
            spaces.observation, spaces.action, model=c.model, hidden=c.vector_hidden, lr=part.lr,
            max_grad_norm=part.max_grad_norm, loss=self.loss, loss_config=c, seed=c.seed, device=part.device,
            max_nonfinite_updates=part.max_nonfinite_updates, precision=part.precision, optimizer=part.optimizer,
            **_recurrent(c), **_options(c),
        )  # fmt: skip
