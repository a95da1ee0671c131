"""``RolloutWorker``: environments plus a policy; a plain class.

The actor layer makes it remote (``await runtime.spawn(RolloutWorker, ...)``);
with ``num_workers=0`` the same class samples in the driver.

``sample()`` steps ``num_envs`` sub-environments in lock step for
``rollout_fragment_length`` steps with one batched forward pass per step. An
environment that ends is reset on the spot, so no transition ever spans two
episodes. A time-limit truncation adds ``gamma * V(final obs)`` to the last
reward (the episode did not really end), and a fragment that stops mid-episode
bootstraps from ``V`` of the next observation. GAE runs on the worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .env import EnvSpec, make_env
from .policy import FlatWeights, LossFn, TorchPolicy
from .postprocessing import compute_gae
from .sample_batch import (
    ACTIONS,
    ADVANTAGES,
    DONES,
    EPS_ID,
    LOGP,
    OBS,
    REWARDS,
    VALUE_TARGETS,
    VF_PREDS,
    SampleBatch,
)

__all__ = ["PolicyConfig", "RolloutWorker"]


@dataclass(frozen=True)
class PolicyConfig:
    hidden: tuple[int, ...] = (64, 64)
    lr: float = 3e-4
    max_grad_norm: float | None = 0.5


class RolloutWorker:
    def __init__(
        self,
        env: EnvSpec,
        *,
        num_envs: int = 1,
        rollout_fragment_length: int = 128,
        gamma: float = 0.99,
        lam: float = 0.95,
        seed: int = 0,
        worker_index: int = 0,
        policy_config: PolicyConfig = PolicyConfig(),
        loss: LossFn | None = None,
        loss_config: Any = None,
        use_critic: bool = True,
    ) -> None:
        self.use_critic = use_critic
        self.envs = [make_env(env) for _ in range(num_envs)]
        self.fragment = rollout_fragment_length
        self.gamma, self.lam = gamma, lam
        self.worker_index = worker_index
        base = seed * 10_007 + worker_index * 1_009
        self.policy = TorchPolicy(
            self.envs[0].observation_space,
            self.envs[0].action_space,
            hidden=policy_config.hidden,
            lr=policy_config.lr,
            max_grad_norm=policy_config.max_grad_norm,
            loss=loss,
            loss_config=loss_config,
            seed=base,
        )
        self.obs = np.stack([e.reset(seed=base + i)[0] for i, e in enumerate(self.envs)]).astype(np.float32)
        self._ep_return = np.zeros(num_envs)
        self._ep_len = np.zeros(num_envs, dtype=np.int64)
        self._next_eps = 0
        self._eps_ids = np.array([self._new_episode() for _ in self.envs])

    def _new_episode(self) -> int:
        self._next_eps += 1
        return self.worker_index * 1_000_000_000 + self._next_eps

    def sample(self) -> SampleBatch:
        """Collect ``rollout_fragment_length`` steps from each sub-environment."""
        n, steps = len(self.envs), self.fragment
        obs_buf = np.zeros((steps, n, *self.obs.shape[1:]), np.float32)
        rewards = np.zeros((steps, n), np.float32)
        dones = np.zeros((steps, n), bool)
        logps = np.zeros((steps, n), np.float32)
        values = np.zeros((steps, n), np.float32)
        eps = np.zeros((steps, n), np.int64)
        actions: list[np.ndarray] = []
        truncated_at: list[tuple[int, int, np.ndarray]] = []
        returns: list[float] = []
        lengths: list[int] = []
        policy = self.policy
        for t in range(steps):
            obs_buf[t] = self.obs
            eps[t] = self._eps_ids
            action, logps[t], value = policy.compute_actions(self.obs)
            if self.use_critic:
                values[t] = value
            actions.append(action)
            env_action = policy.env_actions(action)
            for i, env in enumerate(self.envs):
                next_obs, reward, terminated, truncated, _ = env.step(env_action[i])
                rewards[t, i] = reward
                self._ep_return[i] += reward
                self._ep_len[i] += 1
                if terminated or truncated:
                    dones[t, i] = True
                    if truncated and not terminated:
                        truncated_at.append((t, i, np.asarray(next_obs, np.float32)))
                    returns.append(float(self._ep_return[i]))
                    lengths.append(int(self._ep_len[i]))
                    self._ep_return[i], self._ep_len[i] = 0.0, 0
                    self._eps_ids[i] = self._new_episode()
                    next_obs, _ = env.reset()
                self.obs[i] = next_obs
        if truncated_at and self.use_critic:
            final_values = policy.values(np.stack([o for _, _, o in truncated_at]))
            for (t, i, _), v in zip(truncated_at, final_values, strict=True):
                rewards[t, i] += self.gamma * v
        last_values = policy.values(self.obs) if self.use_critic else np.zeros(n, np.float32)
        advantages, targets = compute_gae(rewards, values, dones, last_values, self.gamma, self.lam)
        action_buf = np.stack(actions)

        def flat(x: np.ndarray) -> np.ndarray:
            # (T, n, ...) -> (n * T, ...): each sub-environment's steps stay contiguous.
            return np.ascontiguousarray(np.swapaxes(x, 0, 1).reshape(n * steps, *x.shape[2:]))

        return SampleBatch(
            {
                OBS: flat(obs_buf),
                ACTIONS: flat(action_buf),
                REWARDS: flat(rewards),
                DONES: flat(dones),
                LOGP: flat(logps),
                VF_PREDS: flat(values),
                ADVANTAGES: flat(advantages),
                VALUE_TARGETS: flat(targets),
                EPS_ID: flat(eps),
            },
            episode_returns=returns,
            episode_lengths=lengths,
        )

    # -- weights and learning, delegated to the policy -------------------

    def get_weights(self) -> FlatWeights:
        return self.policy.get_weights()

    def set_weights(self, weights: FlatWeights) -> None:
        self.policy.set_weights(weights)

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], dict[str, float]]:
        return self.policy.compute_gradients(batch)

    def apply_gradients(self, grads: Sequence[np.ndarray]) -> None:
        self.policy.apply_gradients(grads)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        return self.policy.learn_on_batch(batch)

    def sample_with_gradients(self) -> tuple[list[np.ndarray], dict[str, float], SampleBatch]:
        """Sample, then compute gradients on that sample (A3C's worker step).

        The returned batch keeps only its episode records and size, so the
        driver can report metrics without receiving the data again.
        """
        batch = self.sample()
        grads, stats = self.compute_gradients(batch)
        summary = SampleBatch(
            {DONES: batch[DONES]}, episode_returns=batch.episode_returns, episode_lengths=batch.episode_lengths
        )
        return grads, stats, summary

    def close(self) -> None:
        for env in self.envs:
            env.close()
