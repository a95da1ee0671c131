"""``MultiAgentRolloutWorker``: one multi-agent environment, several policies.

Each agent is mapped to a policy by ``policy_mapping_fn`` (``fn(agent_id)`` or
``fn(agent_id, episode_id)``, asked again at each episode's start, so that self-play can
swap sides); each step runs one batched forward pass per policy over the agents that act.
Agents need not act every step (turn-based games, agents that come and go): an agent's step
ends when it acts again or its episode ends, and every reward the env gives it in between
is credited to that step, so a player that loses on its opponent's move learns from it.
Every agent's trajectory goes through the shared trajectory pipeline (``trajectory.py``),
postprocessed the way its policy wants (GAE for policy-gradient policies, n-step
transitions for Q-learning ones), when the agent finishes or the fragment ends, and lands in
its policy's column of a ``MultiAgentBatch``.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
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

__all__ = ["EpisodeMapping", "MappedPolicy", "MultiAgentRolloutWorker"]


@dataclass(frozen=True)
class MappedPolicy:
    """How to build one policy in a worker and how to postprocess its experience."""

    factory: PolicyFactory
    """``factory(observation_space, action_space, seed=, worker_index=)``."""
    postprocess: PostprocessMode = "gae"
    n_step: int = 1
    use_critic: bool = True
    """GAE with the policy's value baseline; False: plain discounted returns (PG)."""
    lam: float | None = None
    """This policy's GAE lambda (None: the worker's ``lam``)."""


class EpisodeMapping:
    """A policy mapping called as ``(agent, episode)``: ``mapping(agent, episode)``, or
    ``mapping(agent)`` for a mapping of one argument (its signature read once, here)."""

    def __init__(self, mapping: Callable[..., str]) -> None:
        self.mapping = mapping
        try:
            self.takes_episode = len(inspect.signature(mapping).parameters) >= 2
        except (TypeError, ValueError):  # a builtin without a signature
            self.takes_episode = False

    def __call__(self, agent: str, episode: int) -> str:
        return str(self.mapping(agent, episode) if self.takes_episode else self.mapping(agent))


@dataclass
class _Trajectory:
    """One agent's steps this episode since they were last emitted; the last step is *pending*
    (its reward still growing, its next observation unknown) until the agent acts again or ends."""

    eps_id: int
    obs: list[Tree] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    next_obs: list[Tree] = field(default_factory=list)
    terminateds: list[bool] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)

    @property
    def pending(self) -> bool:
        return len(self.next_obs) < len(self.obs)

    def end_step(self, next_obs: Tree, terminated: bool, done: bool) -> None:
        """The pending step ends at ``next_obs``."""
        self.next_obs.append(next_obs)
        self.terminateds.append(terminated)
        self.dones.append(done)

    def split(self) -> tuple[_Trajectory, _Trajectory]:
        """The ended steps, and a trajectory holding only the pending one."""
        head = _Trajectory(self.eps_id, self.obs[:-1], self.actions[:-1], self.logps[:-1], self.values[:-1],
                           self.rewards[:-1], self.next_obs, self.terminateds, self.dones)  # fmt: skip
        tail = _Trajectory(self.eps_id, self.obs[-1:], self.actions[-1:], self.logps[-1:], self.values[-1:],
                           self.rewards[-1:])  # fmt: skip
        return head, tail

    def segment(self) -> Segment:
        """This agent's ended steps as a one-lane segment."""

        def col(x: list[Any], dtype: Any = np.float32) -> np.ndarray:  # (T, 1)
            return np.asarray(x, dtype)[:, None]

        n = len(self.next_obs)
        next_obs = tree_map(lambda x: x[:, None], tree_stack(self.next_obs))
        dones, terminateds = col(self.dones, bool), col(self.terminateds, bool)
        truncated = bool(dones[-1, 0] and not terminateds[-1, 0])  # only the last step can end it
        last = tree_map(lambda x: x[-1], next_obs)
        return Segment(
            obs=tree_map(lambda x: x[:, None], tree_stack(self.obs[:n])),
            actions=np.asarray(self.actions[:n])[:, None],
            rewards=col(self.rewards[:n]),
            dones=dones,
            terminateds=terminateds,
            logps=col(self.logps[:n]),
            values=col(self.values[:n]),
            eps_ids=np.full((n, 1), self.eps_id, np.int64),
            last_obs=last,
            next_obs=next_obs,
            truncations=[(n - 1, 0, tree_map(lambda x: x[0], last))] if truncated else [],
        )


Spaces = tuple[gym.Space[Any], gym.Space[Any]]


class MultiAgentRolloutWorker:
    """Samples one multi-agent env with several policies; ``sample()`` returns a ``MultiAgentBatch``."""

    def __init__(
        self,
        env: Callable[[], Any],
        *,
        policies: Mapping[str, MappedPolicy],
        policy_mapping_fn: Callable[..., str],
        spaces: Mapping[str, Spaces] | None = None,
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
            pid: Postprocessing(spec.postprocess, gamma, lam if spec.lam is None else spec.lam, spec.n_step,
                                spec.use_critic)
            for pid, spec in self.specs.items()
        }  # fmt: skip
        self.mapping = EpisodeMapping(policy_mapping_fn)
        self.fragment = rollout_fragment_length
        self.worker_index = worker_index
        base = worker_seed(seed, worker_index)
        known = dict(spaces or {})
        for agent in self.env.possible_agents:  # spaces not given: those of the agents mapped at episode 0
            known.setdefault(self._policy_of(agent, 0),
                             (self.env.observation_spaces[agent], self.env.action_spaces[agent]))  # fmt: skip
        self.policies: dict[str, Any] = {}
        for i, pid in enumerate(self.specs):
            if pid not in known:
                raise ConfigError(f"policy {pid!r}: no agent maps to it at episode 0; give its spaces")
            obs_space, act_space = known[pid]
            self.policies[pid] = self.specs[pid].factory(obs_space, act_space, seed=base + i,
                                                         worker_index=worker_index)  # fmt: skip
        self.checkers = (
            {a: EnvChecker(env, self.env.observation_spaces[a], worker_index) for a in self.env.possible_agents}
            if check_env_output
            else None
        )
        self.episodes = EpisodeBook(worker_index, 1)  # one lane: the env's episode, all agents together
        self.assignment: dict[str, str] = {}
        self._open: dict[str, _Trajectory] = {}
        self._agent_return: dict[str, float] = defaultdict(float)
        self.obs = self._reset(seed=base)

    def _policy_of(self, agent: str, episode: int) -> str:
        pid = self.mapping(agent, episode)
        if pid not in self.specs:
            raise ConfigError(f"policy_mapping_fn mapped {agent!r} to {pid!r}, which is not a policy")
        return pid

    def sample(self) -> MultiAgentBatch:
        """Step the environment ``rollout_fragment_length`` times."""
        pieces: dict[str, list[SampleBatch]] = defaultdict(list)
        policy_returns: dict[str, list[float]] = defaultdict(list)
        for _ in range(self.fragment):
            actions = self._act()
            obs, rewards, terminateds, truncateds, _ = self.env.step(actions)
            over = bool(terminateds.get(ALL, False) or truncateds.get(ALL, False))
            step = int(self.episodes.lengths[0]) + 1
            step_reward = 0.0
            for agent, reward in rewards.items():  # every agent's reward, whether it acted or waited
                if self.checkers is not None:
                    reward = self.checkers[agent].reward(reward, agent, step)
                reward = float(reward)
                if agent in self._open:
                    self._open[agent].rewards[-1] += reward
                self._agent_return[agent] += reward
                step_reward += reward
            if self.checkers is not None:
                for agent, o in obs.items():
                    self.checkers[agent].observation(o, agent, step)
                    self.checkers[agent].finite(o, float(rewards.get(agent, 0.0)), agent, step)
                for agent in set(rewards) - set(obs):
                    self.checkers[agent].finite(None, float(rewards[agent]), agent, step)
                for agent in set(terminateds) - {ALL}:
                    self.checkers[agent].flags(terminateds[agent], truncateds.get(agent, False), {}, agent, step)
            for agent in list(self._open):
                terminated = bool(terminateds.get(agent, False))
                if terminated or truncateds.get(agent, False) or over:
                    traj = self._open.pop(agent)
                    final = tree_map(np.asarray, obs[agent]) if agent in obs else traj.obs[-1]
                    traj.end_step(final, terminated, done=True)
                    pid = self.assignment[agent]
                    pieces[pid].append(self._postprocess(traj, pid))
                    policy_returns[pid].append(self._agent_return.pop(agent))
            self.episodes.add(np.array([step_reward]))
            if over:
                self.episodes.end(0)
                self.obs = self._reset()
            else:
                self.obs = {a: o for a, o in obs.items() if not (terminateds.get(a) or truncateds.get(a))}
        for agent, traj in list(self._open.items()):  # the fragment ends mid-episode
            pid = self.assignment[agent]
            if agent in self.obs:  # it acts next on this observation: its pending step ends there
                traj.end_step(tree_map(np.asarray, self.obs[agent]), False, done=False)
                del self._open[agent]
            elif len(traj.obs) > 1:  # it waits for its turn: its pending step goes on into the next fragment
                traj, self._open[agent] = traj.split()
            else:
                continue
            pieces[pid].append(self._postprocess(traj, pid))
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
        eps_id = int(self.episodes.ids[0])
        self.assignment = {agent: self._policy_of(agent, eps_id) for agent in self.env.possible_agents}
        self._agent_return.clear()
        if self.checkers is not None:
            for agent, o in obs.items():
                self.checkers[agent].observation(o, agent, 0)
                self.checkers[agent].finite(o, 0.0, agent, 0)
        return dict(obs)

    def _act(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = defaultdict(list)
        for agent in self.obs:
            groups[self.assignment[agent]].append(agent)
        actions: dict[str, Any] = {}
        eps_id = int(self.episodes.ids[0])
        for pid, agents in groups.items():
            policy = self.policies[pid]
            rows = [tree_map(np.asarray, self.obs[a]) for a in agents]
            act, logp, value = policy.compute_actions(tree_stack(rows))
            env_act = policy.env_actions(act)
            for j, agent in enumerate(agents):
                traj = self._open.setdefault(agent, _Trajectory(eps_id))
                if traj.pending:  # its previous step ends at the observation it acts on now
                    traj.end_step(rows[j], False, done=False)
                traj.obs.append(rows[j])
                traj.actions.append(act[j])
                traj.logps.append(float(logp[j]))
                traj.values.append(float(value[j]))
                traj.rewards.append(0.0)
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
