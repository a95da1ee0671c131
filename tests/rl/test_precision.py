"""learner_precision: bfloat16 mixed precision in the learners, float32 everywhere it matters."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from asyncflow import ConfigError
from asyncflow.algorithms import A3C, PPO, SAC, A3CConfig, PPOConfig, SACConfig
from asyncflow.algorithms.dqn import DQNLearner
from asyncflow.algorithms.ppo import ppo_loss
from asyncflow.rl.data.sample_batch import SampleBatch
from asyncflow.rl.learners.precision import native_bfloat16, resolve_precision
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy

CPU = torch.device("cpu")
FRAMES = gym.spaces.Box(0, 255, (4, 44, 44), np.uint8)  # the CNN encoder's input, smaller than Atari's
ACTIONS = gym.spaces.Discrete(4)


def test_the_names_and_what_they_resolve_to() -> None:
    assert resolve_precision("float32", CPU) is None
    assert resolve_precision("bfloat16", CPU) is torch.bfloat16
    assert resolve_precision("auto", CPU) is (torch.bfloat16 if native_bfloat16(CPU) else None)
    with pytest.raises(ConfigError, match="learner_precision: must be one of 'float32', 'bfloat16', 'auto'"):
        resolve_precision("half", CPU)


def test_bad_or_unsupported_precision_fails_before_any_process_starts() -> None:
    with pytest.raises(ConfigError, match="learner_precision"):
        PPOConfig(env="CartPole-v1", learner_precision="fp16")
    with pytest.raises(ConfigError, match="SAC's losses run in float32 only"):
        SAC(SACConfig(env="Pendulum-v1", learner_precision="bfloat16"))
    with pytest.raises(ConfigError, match="A3C's losses run in float32 only"):
        A3C(A3CConfig(env="CartPole-v1", learner_precision="auto"))
    PPO(PPOConfig(env="CartPole-v1", learner_precision="bfloat16"))  # accepted


def _ppo_batch(n: int, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch({
        "obs": rng.integers(0, 256, (n, *FRAMES.shape), dtype=np.uint8),
        "actions": rng.integers(0, ACTIONS.n, n),
        "action_logp": np.full(n, -np.log(ACTIONS.n), np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "value_targets": rng.standard_normal(n).astype(np.float32),
        "vf_preds": np.zeros(n, np.float32),
    })  # fmt: skip


def _policy(precision: str) -> ActorCriticPolicy:
    return ActorCriticPolicy(FRAMES, ACTIONS, hidden=(32,), loss=ppo_loss, loss_config=PPOConfig(), seed=3,
                             precision=precision)  # fmt: skip


def test_bfloat16_runs_the_layers_in_bfloat16_and_keeps_the_rest_float32() -> None:
    policy = _policy("bfloat16")
    seen: dict[str, torch.dtype] = {}
    for name, module in policy.model.named_modules():
        if isinstance(module, torch.nn.Conv2d | torch.nn.Linear):
            module.register_forward_hook(lambda m, i, out, name=name: seen.__setitem__(name, out.dtype))
    batch = _ppo_batch(16)
    loss, _ = policy._loss(policy.tensors(dict(batch)))
    assert seen and set(seen.values()) == {torch.bfloat16}  # every conv and linear layer computed in bfloat16
    assert loss.dtype == torch.float32
    loss.backward()  # type: ignore[no-untyped-call]
    assert all(p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32
               for p in policy.model.parameters())  # fmt: skip
    # Inference outside the learner's loss stays float32, as the workers run it.
    seen.clear()
    policy.compute_actions(batch["obs"][:2])
    assert set(seen.values()) == {torch.float32}


def test_bfloat16_loss_and_update_match_float32_closely() -> None:
    exact, mixed = _policy("float32"), _policy("bfloat16")
    mixed.set_weights(exact.get_weights())
    batch = _ppo_batch(64)
    a, _ = exact._loss(exact.tensors(dict(batch)))
    b, _ = mixed._loss(mixed.tensors(dict(batch)))
    assert b.item() == pytest.approx(a.item(), rel=0.02, abs=0.02)
    assert a.item() != b.item()  # it did compute in another precision
    start = exact.get_weights().vector
    stats = mixed.learn_on_batch(batch, num_epochs=2, minibatch_size=32)
    assert stats["skipped_updates"] == 0 and np.isfinite(stats["total_loss"])
    exact.learn_on_batch(batch, num_epochs=2, minibatch_size=32)
    assert mixed.get_weights().vector.dtype == np.float32
    step_exact, step_mixed = exact.get_weights().vector - start, mixed.get_weights().vector - start
    cosine = float(step_exact @ step_mixed / (np.linalg.norm(step_exact) * np.linalg.norm(step_mixed)))
    assert cosine > 0.95, cosine  # four Adam steps in the same direction


def _dqn(precision: str) -> DQNLearner:
    return DQNLearner(FRAMES, ACTIONS, hidden=(32,), seed=1, precision=precision)


def test_dqn_learner_in_bfloat16_gives_float32_td_errors_close_to_float32() -> None:
    rng = np.random.default_rng(0)
    n = 32
    batch = SampleBatch({
        "obs": rng.integers(0, 256, (n, *FRAMES.shape), dtype=np.uint8),
        "actions": rng.integers(0, ACTIONS.n, n),
        "rewards": rng.standard_normal(n).astype(np.float32),
        "next_obs": rng.integers(0, 256, (n, *FRAMES.shape), dtype=np.uint8),
        "discounts": np.full(n, 0.99, np.float32),
    })  # fmt: skip
    updates: dict[str, Any] = {}
    for precision in ("float32", "bfloat16"):
        update = _dqn(precision).learn_on_batch(batch)
        assert not isinstance(update, dict), "the step was skipped"
        assert update.td_error.dtype == np.float32 and np.isfinite(update.td_error).all()
        updates[precision] = update
    np.testing.assert_allclose(updates["bfloat16"].td_error, updates["float32"].td_error, rtol=0.05, atol=0.05)
    assert not np.array_equal(updates["bfloat16"].td_error, updates["float32"].td_error)
