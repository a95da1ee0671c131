"""Advantage standardization: PPO's per training batch (RLlib), per minibatch (SB3, CleanRL), or
none; A2C's per batch or none (SB3's A2C)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from asyncflow import ConfigError
from asyncflow.algorithms import A2CConfig, PPOConfig
from asyncflow.algorithms.a2c import a2c_loss
from asyncflow.algorithms.ppo import ppo_loss
from asyncflow.rl import ActorCriticPolicy


def _minibatch(n: int = 64) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {
        "obs": torch.randn(n, 4, generator=gen),
        "actions": torch.randint(0, 2, (n,), generator=gen),
        "action_logp": torch.full((n,), float(np.log(0.5))),
        "advantages": 3.0 + 5.0 * torch.randn(n, generator=gen),  # far from mean 0, std 1
        "value_targets": torch.randn(n, generator=gen),
        "vf_preds": torch.zeros(n),
    }


def test_minibatch_standardization_is_the_loss_of_standardized_advantages() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    policy = ActorCriticPolicy(space, gym.spaces.Discrete(2), seed=0)
    ac = policy.ac
    batch = _minibatch()
    adv = batch["advantages"]
    by_hand = {**batch, "advantages": (adv - adv.mean()) / (adv.std() + 1e-8)}

    per_minibatch, _ = ppo_loss(ac, batch, PPOConfig(standardize_advantages="minibatch"))
    none_by_hand, _ = ppo_loss(ac, by_hand, PPOConfig(standardize_advantages="none"))
    raw, _ = ppo_loss(ac, batch, PPOConfig(standardize_advantages="none"))
    assert torch.allclose(per_minibatch, none_by_hand, atol=1e-6)
    assert not torch.allclose(per_minibatch, raw, atol=1e-3)  # the raw advantages give another loss
    # "batch" leaves the loss alone: the plan standardized the whole batch before it
    assert torch.equal(ppo_loss(ac, batch, PPOConfig(standardize_advantages="batch"))[0], raw)


def test_an_unknown_standardization_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="standardize_advantages: must be 'batch', 'minibatch' or 'none'"):
        PPOConfig(standardize_advantages="episode")


def test_a2c_standardizes_its_advantages_unless_told_not_to() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    ac = ActorCriticPolicy(space, gym.spaces.Discrete(2), seed=0).ac
    batch = _minibatch()
    adv = batch["advantages"]
    by_hand = {**batch, "advantages": (adv - adv.mean()) / (adv.std() + 1e-8)}
    standardized, _ = a2c_loss(ac, batch, A2CConfig())
    raw, _ = a2c_loss(ac, batch, A2CConfig(standardize_advantages=False))
    raw_by_hand, _ = a2c_loss(ac, by_hand, A2CConfig(standardize_advantages=False))
    assert torch.allclose(standardized, raw_by_hand, atol=1e-6)
    assert not torch.allclose(standardized, raw, atol=1e-3)  # SB3's A2C: the advantages as computed
