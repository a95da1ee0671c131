"""``RolloutWorker``: environments plus a policy; a plain class.

The actor layer makes it remote (``await runtime.spawn(RolloutWorker, ...)``);
with ``num_workers=0`` the same class samples in the driver.

``sample()`` steps ``num_envs`` sub-environments in lock step for
``rollout_fragment_length`` steps with one batched forward pass per step. An
environment that ends is reset on the spot, so no transition ever spans two
episodes. A time-limit truncation adds ``gamma * V(final obs)`` to the last
reward (the episode did not really end), and a fragment that stops mid-episode
bootstraps from ``V`` of the next observation. GAE runs on the worker.

``postprocess="transitions"`` is for off-policy learners (DQN, SAC, TD3,
IMPALA): no GAE; each row keeps its ``next_obs`` (the real final observation
at an episode end, before the reset) and whether the episode ``terminated``,
and with ``n_step > 1`` rewards become n-step returns with a ``discounts``
column to bootstrap with. ``policy_factory`` swaps the actor-critic for any
policy with the same inference methods (a Q network, a squashed Gaussian).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .env import EnvSpec, make_env
from .policy import FlatWeights, LossFn, TorchPolicy
from .postprocessing import compute_gae, compute_nstep
from .sample_batch import (
    ACTIONS,
    ADVANTAGES,
    DISCOUNTS,
    DONES,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    VALUE_TARGETS,
    VF_PREDS,
    SampleBatch,
)
from .state import pickle_attributes, unpickle_attributes

__all__ = ["PolicyConfig", "RolloutWorker"]


@dataclass(frozen=True)
class PolicyConfig:
    hidden: tuple[int, ...] = (64, 64)
    lr: float = 3e-4
    max_grad_norm: float | None = 0.5


class RolloutWorker:
    """Environments plus a policy: ``sample()`` returns one postprocessed ``SampleBatch``."""

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
        policy_factory: Callable[..., Any] | None = None,
        postprocess: Literal["gae", "transitions"] = "gae",
        n_step: int = 1,
    ) -> None:
        if postprocess not in ("gae", "transitions"):
            raise ValueError(f"postprocess must be 'gae' or 'transitions', not {postprocess!r}")
        self.postprocess = postprocess
        self.n_step = n_step
        self.use_critic = use_critic and postprocess == "gae"
        self.envs = [make_env(env) for _ in range(num_envs)]
        self.fragment = rollout_fragment_length
        self.gamma, self.lam = gamma, lam
        self.worker_index = worker_index
        base = seed * 10_007 + worker_index * 1_009
        spaces = (self.envs[0].observation_space, self.envs[0].action_space)
        self.policy: Any
        if policy_factory is not None:
            self.policy = policy_factory(*spaces, seed=base, worker_index=worker_index)
        else:
            self.policy = TorchPolicy(
                *spaces,
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
        transitions = self.postprocess == "transitions"
        next_buf = np.zeros_like(obs_buf) if transitions else obs_buf
        terminateds = np.zeros((steps, n), bool)
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
                if transitions:
                    next_buf[t, i] = next_obs
                    terminateds[t, i] = terminated
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
        if transitions:
            return self._transitions(obs_buf, np.stack(actions), rewards, next_buf, terminateds, dones, logps, eps,
                                     returns, lengths)  # fmt: skip
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

    def _transitions(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminateds: np.ndarray,
        dones: np.ndarray,
        logps: np.ndarray,
        eps: np.ndarray,
        returns: list[float],
        lengths: list[int],
    ) -> SampleBatch:
        n, steps = obs.shape[1], obs.shape[0]
        columns = {OBS: obs, ACTIONS: actions, NEXT_OBS: next_obs, TERMINATEDS: terminateds, DONES: dones,
                   LOGP: logps, EPS_ID: eps}  # fmt: skip
        if self.n_step > 1:
            rewards, columns[NEXT_OBS], columns[DISCOUNTS] = compute_nstep(
                rewards, next_obs, terminateds, dones, self.gamma, self.n_step
            )
        else:
            columns[DISCOUNTS] = (self.gamma * (1.0 - terminateds)).astype(np.float32)
        columns[REWARDS] = rewards
        return SampleBatch(
            {
                k: np.ascontiguousarray(np.swapaxes(v, 0, 1).reshape(n * steps, *v.shape[2:]))
                for k, v in columns.items()
            },
            episode_returns=returns,
            episode_lengths=lengths,
        )

    # -- weights and learning, delegated to the policy -------------------

    def get_weights(self) -> FlatWeights:
        """The policy's weights."""
        return self.policy.get_weights()  # type: ignore[no-any-return]

    def set_weights(self, weights: FlatWeights) -> None:
        """Load new policy weights."""
        self.policy.set_weights(weights)

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], dict[str, float]]:
        """Gradients of the policy's loss on ``batch``."""
        return self.policy.compute_gradients(batch)  # type: ignore[no-any-return]

    def apply_gradients(self, grads: Sequence[np.ndarray]) -> None:
        """Apply gradients to the local policy."""
        self.policy.apply_gradients(grads)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One local training pass on ``batch``."""
        return self.policy.learn_on_batch(batch)  # type: ignore[no-any-return]

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

    def get_state(self) -> bytes:
        """Everything: environments mid-episode, policy and its random state, episode trackers."""
        return pickle_attributes(self)

    def set_state(self, state: bytes) -> None:
        """Replace everything with what ``get_state`` returned."""
        self.close()
        unpickle_attributes(self, state)

    def close(self) -> None:
        """Close the environments."""
        for env in self.envs:
            env.close()
