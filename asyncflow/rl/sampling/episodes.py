"""Whole episodes played with a policy, one after another, on one env: the one episode loop of
evaluation during training (``EvaluationWorker``) and of ``asyncflow evaluate``
(``asyncflow/evaluate.py``), for a gymnasium env and an ``AsyncEnv`` alike; and its
multi-agent twin (``play_multi_agent_episodes``: every agent acting with the policy the mapping
gives it). Episode ``k`` starts from ``seed + k``: two evaluations with the same seed differ
by their weights only."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..data.tree import tree_map
from ..envs.checks import EnvChecker
from ..offline.writer import ExperienceWriter
from ..policy import StatefulPolicy, WorkerPolicy
from .normalization import NormalizerState

__all__ = ["act_once", "play_episodes", "play_multi_agent_episodes"]


async def _call(method: Any, *args: Any, **kwargs: Any) -> Any:
    out = method(*args, **kwargs)
    return await out if inspect.isawaitable(out) else out


def act_once(
    policy: WorkerPolicy, obs: Any, *, explore: bool = False, normalizer: NormalizerState | None = None
) -> Any:
    """The policy's action for one observation (greedy, or sampled with ``explore``), as the env
    takes it; the observation normalized with ``normalizer``'s frozen statistics first."""
    return _act(policy, obs, explore, normalizer)[0]


def _act(policy: WorkerPolicy, obs: Any, explore: bool, normalizer: NormalizerState | None) -> tuple[Any, float]:
    """``act_once``, and the log-probability of the action: the policy's when it samples; a greedy
    policy is deterministic, which is 0 for a discrete action and NaN (no density) otherwise."""
    if normalizer is not None:
        obs = normalizer.normalize(obs)
    batch = tree_map(lambda x: np.asarray(x)[None], obs)  # one row, in the space's own dtype
    if explore:
        actions, logp, _ = policy.compute_actions(batch)
        return policy.env_actions(actions)[0], float(logp[0])
    actions = policy.greedy_actions(batch)
    discrete = isinstance(actions, np.ndarray) and actions.dtype.kind in "iu" and actions.ndim == 1
    return policy.env_actions(actions)[0], 0.0 if discrete else float("nan")


async def play_episodes(
    env: Any,
    policy: WorkerPolicy,
    episodes: int,
    *,
    seed: int,
    explore: bool = False,
    normalizer: NormalizerState | None = None,
    check: EnvChecker | None = None,
    before_step: Callable[[int], None] | None = None,
    writer: ExperienceWriter | None = None,
) -> tuple[list[float], list[int]]:
    """Play ``episodes`` whole episodes: their returns and lengths. ``check`` checks what the
    env returns (``EnvOutputError`` naming the step); ``before_step(episode)`` runs before each
    step (a recorder of frames); ``writer`` writes each episode (``output``, observations as the
    env gave them)."""
    returns: list[float] = []
    lengths: list[int] = []
    for episode in range(episodes):
        out = await _call(env.reset, seed=seed + episode)
        obs = out[0] if check is None else check.reset_output(out, 0, 0)
        if check is not None:
            check.observation(obs, 0, 0)
        if isinstance(policy, StatefulPolicy):  # a recurrent policy's memory
            policy.reset_state()
        total, steps, done, terminated = 0.0, 0, False, False
        record: tuple[list[Any], list[Any], list[float], list[float]] = ([obs], [], [], [])
        while not done:
            if before_step is not None:
                before_step(episode)
            action, logp = _act(policy, obs, explore, normalizer)
            out = await _call(env.step, action)
            obs, reward, terminated, truncated, _ = out if check is None else check.step_output(out, 0, steps + 1)
            if check is not None:
                check.observation(obs, 0, steps + 1)
            total, steps, done = total + float(reward), steps + 1, bool(terminated or truncated)
            if writer is not None:
                for column, value in zip(record, (obs, action, float(reward), logp), strict=True):
                    column.append(value)
        if writer is not None:
            writer.add_episode(*record, terminated=bool(terminated), seed=seed + episode)
        returns.append(total)
        lengths.append(steps)
    return returns, lengths


def play_multi_agent_episodes(
    env: Any, policies: Mapping[str, WorkerPolicy], mapping: Callable[[str, int], str], episodes: int, *, seed: int,
    explore: bool = False,
) -> tuple[list[float], list[int], dict[str, list[float]]]:  # fmt: skip
    """Play ``episodes`` whole episodes of a multi-agent env (``MultiAgentEnv``), each agent
    acting with ``policies[mapping(agent, episode)]``: each episode's return summed over the
    agents, its length (env steps), and each agent's own return by its policy."""
    from ..envs.multi_agent import ALL

    returns, lengths, by_policy = [], [], {pid: [] for pid in policies}  # type: ignore[var-annotated]
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        assignment = {agent: mapping(agent, episode) for agent in env.possible_agents}
        own = dict.fromkeys(env.possible_agents, 0.0)
        steps, over = 0, False
        while not over:
            actions = {a: act_once(policies[assignment[a]], o, explore=explore) for a, o in obs.items()}
            obs, rewards, terminateds, truncateds, _ = env.step(actions)
            for agent, reward in rewards.items():
                own[agent] += float(reward)
            over = bool(terminateds.get(ALL) or truncateds.get(ALL))
            obs = {a: o for a, o in obs.items() if not (terminateds.get(a) or truncateds.get(a))}
            steps += 1
        returns.append(sum(own.values()))
        lengths.append(steps)
        for agent, value in own.items():
            by_policy[assignment[agent]].append(value)
    return returns, lengths, by_policy
