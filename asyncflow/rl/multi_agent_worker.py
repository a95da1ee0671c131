"""``MultiAgentRolloutWorker``: one multi-agent environment, several policies.

Each agent is mapped to a policy by ``policy_mapping_fn``; each step runs one
batched forward pass per policy over the agents it controls. Every agent's
trajectory is postprocessed on its own, the way its policy wants it (GAE for
policy-gradient policies, n-step transitions for Q-learning ones), when the
agent finishes or the fragment ends, and lands in its policy's column of a
``MultiAgentBatch``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .multi_agent import ALL, make_multi_agent_env
from .policy import FlatWeights
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
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from .state import pickle_attributes, unpickle_attributes

__all__ = ["MultiAgentRolloutWorker", "PolicySpec"]


@dataclass(frozen=True)
class PolicySpec:
    """How to build one policy in a worker and how to postprocess its experience."""

    factory: Callable[..., Any]
    """``factory(observation_space, action_space, seed=, worker_index=)``."""
    postprocess: Literal["gae", "transitions"] = "gae"
    n_step: int = 1


@dataclass
class _Trajectory:
    eps_id: int
    obs: list[np.ndarray] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    next_obs: list[np.ndarray] = field(default_factory=list)
    terminateds: list[bool] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)


class MultiAgentRolloutWorker:
    """Samples one multi-agent env with several policies; ``sample()`` returns a ``MultiAgentBatch``."""

    def __init__(
        self,
        env: Callable[[], Any],
        *,
        policies: Mapping[str, PolicySpec],
        policy_mapping_fn: Callable[[str], str],
        rollout_fragment_length: int = 200,
        gamma: float = 0.99,
        lam: float = 0.95,
        seed: int = 0,
        worker_index: int = 0,
    ) -> None:
        self.env = make_multi_agent_env(env)
        self.specs = dict(policies)
        self.mapping = policy_mapping_fn
        self.fragment = rollout_fragment_length
        self.gamma, self.lam = gamma, lam
        self.worker_index = worker_index
        base = seed * 10_007 + worker_index * 1_009
        self.policies: dict[str, Any] = {}
        for agent in self.env.possible_agents:
            pid = self.mapping(agent)
            if pid not in self.specs:
                raise ValueError(f"policy_mapping_fn mapped {agent!r} to {pid!r}, which is not a policy")
            if pid not in self.policies:
                self.policies[pid] = self.specs[pid].factory(
                    self.env.observation_spaces[agent],
                    self.env.action_spaces[agent],
                    seed=base + len(self.policies),
                    worker_index=worker_index,
                )
        self.obs, _ = self.env.reset(seed=base)
        self._next_eps = 0
        self._eps_id = self._new_episode()
        self._open: dict[str, _Trajectory] = {}
        self._agent_return: dict[str, float] = defaultdict(float)
        self._finished_returns: list[float] = []  # agents of this episode that finished
        self._episode_len = 0

    def _new_episode(self) -> int:
        self._next_eps += 1
        return self.worker_index * 1_000_000_000 + self._next_eps

    def sample(self) -> MultiAgentBatch:
        """Step the environment ``rollout_fragment_length`` times."""
        pieces: dict[str, list[SampleBatch]] = defaultdict(list)
        returns: list[float] = []
        lengths: list[int] = []
        policy_returns: dict[str, list[float]] = defaultdict(list)
        for _ in range(self.fragment):
            actions = self._act()
            obs, rewards, terminateds, truncateds, _ = self.env.step(actions)
            self._episode_len += 1
            over = terminateds.get(ALL, False) or truncateds.get(ALL, False)
            for agent in actions:
                traj = self._open[agent]
                reward = float(rewards.get(agent, 0.0))
                terminated = bool(terminateds.get(agent, False))
                done = terminated or bool(truncateds.get(agent, False)) or over
                traj.rewards.append(reward)
                traj.next_obs.append(np.asarray(obs.get(agent, traj.obs[-1]), np.float32))
                traj.terminateds.append(terminated)
                traj.dones.append(done)
                self._agent_return[agent] += reward
                if done:
                    pid = self.mapping(agent)
                    pieces[pid].append(self._postprocess(self._open.pop(agent), pid))
                    agent_return = self._agent_return.pop(agent)
                    policy_returns[pid].append(agent_return)
                    self._finished_returns.append(agent_return)
            if over:
                returns.append(sum(self._finished_returns))
                lengths.append(self._episode_len)
                self._finished_returns, self._episode_len = [], 0
                self.obs, _ = self.env.reset()
                self._eps_id = self._new_episode()
            else:
                self.obs = {a: o for a, o in obs.items() if not (terminateds.get(a) or truncateds.get(a))}
        for agent in list(self._open):  # the fragment ends mid-episode
            pid = self.mapping(agent)
            pieces[pid].append(self._postprocess(self._open.pop(agent), pid))
        return MultiAgentBatch(
            {pid: concat_samples(parts) for pid, parts in pieces.items()},
            self.fragment,
            episode_returns=returns,
            episode_lengths=lengths,
            policy_returns=policy_returns,
        )

    def _act(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = defaultdict(list)
        for agent in self.obs:
            groups[self.mapping(agent)].append(agent)
        actions: dict[str, Any] = {}
        for pid, agents in groups.items():
            policy = self.policies[pid]
            x = np.stack([np.asarray(self.obs[a], np.float32) for a in agents])
            act, logp, value = policy.compute_actions(x)
            env_act = policy.env_actions(act)
            for j, agent in enumerate(agents):
                traj = self._open.setdefault(agent, _Trajectory(self._eps_id))
                traj.obs.append(x[j])
                traj.actions.append(act[j])
                traj.logps.append(float(logp[j]))
                traj.values.append(float(value[j]))
                actions[agent] = env_act[j]
        return actions

    def _postprocess(self, traj: _Trajectory, pid: str) -> SampleBatch:
        spec, policy = self.specs[pid], self.policies[pid]
        steps = len(traj.rewards)

        def col(x: list[Any], dtype: Any = np.float32) -> np.ndarray:  # (T, 1, ...)
            return np.asarray(x, dtype)[:, None]

        rewards, dones, terminateds = col(traj.rewards), col(traj.dones, bool), col(traj.terminateds, bool)
        next_obs = np.stack(traj.next_obs)[:, None]
        columns: dict[str, np.ndarray] = {OBS: np.stack(traj.obs), ACTIONS: np.asarray(traj.actions),
                                          LOGP: col(traj.logps)[:, 0], EPS_ID: np.full(steps, traj.eps_id)}  # fmt: skip
        if spec.postprocess == "gae":
            values = col(traj.values)
            if dones[-1, 0] and not terminateds[-1, 0]:  # a truncation: the episode did not really end
                rewards[-1] += self.gamma * policy.values(next_obs[-1])
            last = np.zeros(1, np.float32) if dones[-1, 0] else policy.values(next_obs[-1])
            advantages, targets = compute_gae(rewards, values, dones, last, self.gamma, self.lam)
            columns |= {REWARDS: rewards[:, 0], DONES: dones[:, 0], VF_PREDS: values[:, 0],
                        ADVANTAGES: advantages[:, 0], VALUE_TARGETS: targets[:, 0]}  # fmt: skip
        else:
            if spec.n_step > 1:
                returns, nxt, discounts = compute_nstep(rewards, next_obs, terminateds, dones, self.gamma, spec.n_step)
            else:
                returns, nxt = rewards, next_obs
                discounts = (self.gamma * (1.0 - terminateds)).astype(np.float32)
            columns |= {REWARDS: returns[:, 0], NEXT_OBS: nxt[:, 0], DISCOUNTS: discounts[:, 0],
                        TERMINATEDS: terminateds[:, 0], DONES: dones[:, 0]}  # fmt: skip
        return SampleBatch(columns)

    # -- weights ---------------------------------------------------------

    def get_weights(self) -> dict[str, FlatWeights]:
        """Every policy's weights, by policy id."""
        return {pid: p.get_weights() for pid, p in self.policies.items()}

    def set_weights(self, weights: Mapping[str, FlatWeights]) -> None:
        """Load the given policies' weights (a subset is fine)."""
        for pid, w in weights.items():
            self.policies[pid].set_weights(w)

    def get_state(self) -> bytes:
        """Everything: the env mid-episode, policies, open trajectories, episode trackers."""
        return pickle_attributes(self)

    def set_state(self, state: bytes) -> None:
        """Replace everything with what ``get_state`` returned."""
        self.close()
        unpickle_attributes(self, state)

    def close(self) -> None:
        """Close the environment."""
        self.env.close()
