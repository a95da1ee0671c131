"""``MultiAgentRolloutWorker``: one multi-agent environment, several policies.

Each agent is mapped to a policy by ``policy_mapping_fn``; each step runs one
batched forward pass per policy over the agents it controls. Every agent's
trajectory goes through the shared trajectory pipeline (``trajectory.py``),
postprocessed the way its policy wants (GAE for policy-gradient policies,
n-step transitions for Q-learning ones), when the agent finishes or the
fragment ends, and lands in its policy's column of a ``MultiAgentBatch``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from ..data.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from ..data.state import get_state, set_state
from ..data.tree import Tree, tree_map, tree_stack
from ..envs.checks import EnvChecker
from ..envs.multi_agent import ALL, make_multi_agent_env
from ..policy import FlatWeights, PolicyFactory
from .attributes import pickled_attributes, restore_exactly
from .trajectory import EpisodeBook, Postprocessing, PostprocessMode, Segment, new_episode_seed, worker_seed

__all__ = ["MultiAgentRolloutWorker", "PolicySpec"]


@dataclass(frozen=True)
class PolicySpec:
    """How to build one policy in a worker and how to postprocess its experience."""

    factory: PolicyFactory
    """``factory(observation_space, action_space, seed=, worker_index=)``."""
    postprocess: PostprocessMode = "gae"
    n_step: int = 1


@dataclass
class _Trajectory:
    eps_id: int
    obs: list[Tree] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    next_obs: list[Tree] = field(default_factory=list)
    terminateds: list[bool] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)

    def segment(self) -> Segment:
        """This agent's steps as a one-lane segment."""

        def col(x: list[Any], dtype: Any = np.float32) -> np.ndarray:  # (T, 1)
            return np.asarray(x, dtype)[:, None]

        next_obs = tree_map(lambda x: x[:, None], tree_stack(self.next_obs))
        dones, terminateds = col(self.dones, bool), col(self.terminateds, bool)
        truncated = bool(dones[-1, 0] and not terminateds[-1, 0])  # only the last step can end it
        last = tree_map(lambda x: x[-1], next_obs)
        return Segment(
            obs=tree_map(lambda x: x[:, None], tree_stack(self.obs)),
            actions=np.asarray(self.actions)[:, None],
            rewards=col(self.rewards),
            dones=dones,
            terminateds=terminateds,
            logps=col(self.logps),
            values=col(self.values),
            eps_ids=np.full((len(self.rewards), 1), self.eps_id, np.int64),
            last_obs=last,
            next_obs=next_obs,
            truncations=[(len(self.rewards) - 1, 0, tree_map(lambda x: x[0], last))] if truncated else [],
        )


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
        check_env_output: bool = True,
    ) -> None:
        self.env = make_multi_agent_env(env)
        self.specs = dict(policies)
        self.postprocessing = {
            pid: Postprocessing(spec.postprocess, gamma, lam, spec.n_step) for pid, spec in self.specs.items()
        }
        self.mapping = policy_mapping_fn
        self.fragment = rollout_fragment_length
        self.worker_index = worker_index
        base = worker_seed(seed, worker_index)
        self.policies: dict[str, Any] = {}
        for agent in self.env.possible_agents:
            pid = self.mapping(agent)
            if pid not in self.specs:
                raise ConfigError(f"policy_mapping_fn mapped {agent!r} to {pid!r}, which is not a policy")
            if pid not in self.policies:
                self.policies[pid] = self.specs[pid].factory(
                    self.env.observation_spaces[agent],
                    self.env.action_spaces[agent],
                    seed=base + len(self.policies),
                    worker_index=worker_index,
                )
        self.checkers = (
            {a: EnvChecker(env, self.env.observation_spaces[a], worker_index) for a in self.env.possible_agents}
            if check_env_output
            else None
        )
        self.episodes = EpisodeBook(worker_index, 1)  # one lane: the env's episode, all agents together
        self.obs = self._reset(seed=base)
        self._open: dict[str, _Trajectory] = {}
        self._agent_return: dict[str, float] = defaultdict(float)

    def sample(self) -> MultiAgentBatch:
        """Step the environment ``rollout_fragment_length`` times."""
        pieces: dict[str, list[SampleBatch]] = defaultdict(list)
        policy_returns: dict[str, list[float]] = defaultdict(list)
        for _ in range(self.fragment):
            actions = self._act()
            obs, rewards, terminateds, truncateds, _ = self.env.step(actions)
            over = terminateds.get(ALL, False) or truncateds.get(ALL, False)
            step_reward = 0.0
            step = int(self.episodes.lengths[0]) + 1
            for agent in actions:
                traj = self._open[agent]
                reward: Any = rewards.get(agent, 0.0)
                terminated, truncated = terminateds.get(agent, False), truncateds.get(agent, False)
                if self.checkers is not None:
                    check = self.checkers[agent]
                    reward = check.reward(reward, agent, step)
                    check.flags(terminated, truncated, {}, agent, step)
                    if agent in obs:
                        check.observation(obs[agent], agent, step)
                        check.finite(obs[agent], reward, agent, step)
                reward, terminated = float(reward), bool(terminated)
                done = terminated or bool(truncated) or over
                traj.rewards.append(reward)
                traj.next_obs.append(tree_map(np.asarray, obs[agent]) if agent in obs else traj.obs[-1])
                traj.terminateds.append(terminated)
                traj.dones.append(done)
                self._agent_return[agent] += reward
                step_reward += reward
                if done:
                    pid = self.mapping(agent)
                    pieces[pid].append(self._postprocess(self._open.pop(agent), pid))
                    policy_returns[pid].append(self._agent_return.pop(agent))
            self.episodes.add(np.array([step_reward]))
            if over:
                self.episodes.end(0)
                self.obs = self._reset()
            else:
                self.obs = {a: o for a, o in obs.items() if not (terminateds.get(a) or truncateds.get(a))}
        for agent in list(self._open):  # the fragment ends mid-episode
            pid = self.mapping(agent)
            pieces[pid].append(self._postprocess(self._open.pop(agent), pid))
        returns, lengths = self.episodes.take()
        return MultiAgentBatch(
            {pid: concat_samples(parts) for pid, parts in pieces.items()},
            self.fragment,
            episode_returns=returns,
            episode_lengths=lengths,
            policy_returns=policy_returns,
        )

    def _reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, _ = self.env.reset(seed=seed)
        if self.checkers is not None:
            for agent, o in obs.items():
                self.checkers[agent].observation(o, agent, 0)
                self.checkers[agent].finite(o, 0.0, agent, 0)
        return dict(obs)

    def _act(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = defaultdict(list)
        for agent in self.obs:
            groups[self.mapping(agent)].append(agent)
        actions: dict[str, Any] = {}
        eps_id = int(self.episodes.ids[0])
        for pid, agents in groups.items():
            policy = self.policies[pid]
            rows = [tree_map(np.asarray, self.obs[a]) for a in agents]
            act, logp, value = policy.compute_actions(tree_stack(rows))
            env_act = policy.env_actions(act)
            for j, agent in enumerate(agents):
                traj = self._open.setdefault(agent, _Trajectory(eps_id))
                traj.obs.append(rows[j])
                traj.actions.append(act[j])
                traj.logps.append(float(logp[j]))
                traj.values.append(float(value[j]))
                actions[agent] = env_act[j]
        return actions

    def _postprocess(self, traj: _Trajectory, pid: str) -> SampleBatch:
        return SampleBatch(self.postprocessing[pid](traj.segment(), self.policies[pid].values))

    # -- weights ---------------------------------------------------------

    def get_weights(self) -> dict[str, FlatWeights]:
        """Every policy's weights, by policy id."""
        return {pid: p.get_weights() for pid, p in self.policies.items()}

    def set_weights(self, weights: Mapping[str, FlatWeights]) -> None:
        """Load the given policies' weights (a subset is fine)."""
        for pid, w in weights.items():
            self.policies[pid].set_weights(w)

    def get_state(self) -> dict[str, Any]:
        """What a checkpoint keeps: each policy's training state and the episode counter; and
        everything, the env mid-episode included, pickled (``exact``), used only when trusted."""
        return {"policies": {pid: get_state(p) for pid, p in self.policies.items()},
                "episodes_issued": self.episodes.issued,
                "exact": pickled_attributes(self, "the environment mid-episode")}  # fmt: skip

    def set_state(self, state: dict[str, Any] | bytes) -> None:
        """Put back what ``get_state`` returned: all of it where ``exact`` is there (a trusted
        checkpoint), else the policies and the counter, the env starting a new episode."""
        if restore_exactly(self, state):
            return
        assert isinstance(state, dict)
        for pid, policy_state in state["policies"].items():
            set_state(self.policies[pid], policy_state)
        self.episodes.issued = max(self.episodes.issued, int(state["episodes_issued"]))
        self.episodes.drop(0)
        self._open.clear()
        self._agent_return.clear()
        self.obs = self._reset(seed=new_episode_seed(self.worker_index, self.episodes.issued))

    def close_envs(self) -> None:
        """Close the environment."""
        self.env.close()

    async def aclose(self) -> None:
        """Close the environment (the actor layer awaits this when the worker stops)."""
        self.close_envs()
