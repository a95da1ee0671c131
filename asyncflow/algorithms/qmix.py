"""QMIX (Rashid et al. 2018) and VDN (Sunehag et al. 2018): a team's joint action value from
each agent's own, learned from the team's reward.

Each agent acts greedily (epsilon-greedy while exploring) in its own Q-values, from one network
the agents share (its input: the agent's observation and a one-hot of its index). The team's
value mixes the agents' chosen values: QMIX with a network whose weights a hypernetwork makes
from the global state and keeps non-negative (so the team's argmax is each agent's own argmax),
VDN by their sum. The target is ``r + discount * Q_tot_target(s', each agent's argmax)``.

The env is a multi-agent env; QMIX plays it as one team (``rl/envs/team.py``: observations
``(n_agents, obs_dim)``, the global state, one ``Discrete`` action per agent, the team's
reward). Plan: the replay plan of ``_off_policy.py`` (as DQN's), with its target updates.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ..errors import ConfigError
from ..rl.data.replay_buffer import WEIGHTS, ReplayBuffer
from ..rl.data.sample_batch import ACTIONS, DISCOUNTS, NEXT_OBS, OBS, REWARDS, SampleBatch
from ..rl.data.tree import Tree, tree_len
from ..rl.envs.make import EnvSpec
from ..rl.envs.team import TeamEnv, agent_spaces, check_team
from ..rl.learners.device import resolve_device, to_numpy, to_tensors
from ..rl.learners.optim import Adam, UpdateGuard
from ..rl.models import ModelSpec, build_model
from ..rl.models.nets import mlp, seeded
from ..rl.policies.epsilon_greedy import EpsilonSpec, epsilon_at
from ..rl.policy import FlatWeights, ModelWeights, ReplayUpdate
from ..session import Algorithm
from ._config import algorithm_config, check_epsilon, field
from ._off_policy import REPLAY_BUFFER, ReplayConfig, replay_plan
from ._recipe import Capabilities, PolicyModel, Recipe, Spaces, Workers

__all__ = ["QMIX", "QMIXConfig", "QMIXLearner", "QMixer", "TeamQPolicy", "greedy_return"]

MIXERS = ("qmix", "vdn")


def _agent_net(model: ModelSpec, observation_space: gym.Space[Any], action_space: gym.Space[Any],
               hidden: Sequence[int], seed: int) -> nn.Module:  # fmt: skip
    obs, act = agent_spaces(observation_space, action_space)
    with seeded(seed):
        return build_model(model, obs, act, "q", hidden=hidden, dueling=False)


def _agent_q(net: nn.Module, obs: torch.Tensor) -> torch.Tensor:
    """Every agent's Q-values ``(B, n, actions)`` from the team's observations ``(B, n, dim)``."""
    b, n, _ = obs.shape
    ids = torch.eye(n, device=obs.device, dtype=obs.dtype).expand(b, n, n)
    return net(torch.cat([obs, ids], dim=-1).reshape(b * n, -1)).reshape(b, n, -1)  # type: ignore[no-any-return]


class QMixer(nn.Module):
    """Mixes the agents' values into the team's with weights made from the state and kept
    non-negative (monotonic): ``elu(q @ |W1(s)| + b1(s)) @ |W2(s)| + V(s)``."""

    def __init__(self, num_agents: int, state_dim: int, embed: int = 32, hyper_hidden: int = 64) -> None:
        super().__init__()
        self.num_agents, self.embed = num_agents, embed
        self.w1 = mlp([state_dim, hyper_hidden, num_agents * embed])
        self.b1 = nn.Linear(state_dim, embed)
        self.w2 = mlp([state_dim, hyper_hidden, embed])
        self.v = mlp([state_dim, embed, 1])

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        w1 = self.w1(state).abs().view(-1, self.num_agents, self.embed)
        hidden = nn.functional.elu(torch.bmm(q.unsqueeze(1), w1).squeeze(1) + self.b1(state))
        w2 = self.w2(state).abs()
        return (hidden * w2).sum(-1) + self.v(state).squeeze(-1)  # type: ignore[no-any-return]


class VDNMixer(nn.Module):
    """The team's value as the sum of the agents' (Sunehag et al. 2018)."""

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return q.sum(-1)


class TeamQPolicy(ModelWeights):
    """What a QMIX worker runs: each agent epsilon-greedy in its own Q-values."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], *, seed: int = 0,
                 worker_index: int = 0, model: ModelSpec = None, hidden: Sequence[int] = (64,),
                 epsilon: EpsilonSpec = (1.0, 0.05, 10_000)) -> None:  # fmt: skip
        self.model = _agent_net(model, observation_space, action_space, hidden, seed)
        self.num_actions = int(action_space.nvec[0])  # type: ignore[attr-defined]
        self.epsilon_spec, self.steps, self.version = epsilon, 0, 0
        self.rng = np.random.default_rng(seed)

    @property
    def epsilon(self) -> float:
        return epsilon_at(self.epsilon_spec, self.steps)

    @torch.no_grad()
    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """Each agent's argmax, ``(B, n_agents)``."""
        return _agent_q(self.model, torch.as_tensor(obs["obs"])).argmax(-1).numpy()  # type: ignore[no-any-return,index]

    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Epsilon-greedy per agent (log-probs and values are zeros)."""
        actions = self.greedy_actions(obs)
        explore = self.rng.random(actions.shape) < self.epsilon
        actions[explore] = self.rng.integers(0, self.num_actions, int(explore.sum()))
        n = tree_len(obs)
        self.steps += n
        zeros = np.zeros(n, np.float32)
        return actions, zeros, zeros

    def values(self, obs: Tree) -> np.ndarray:
        return np.zeros(tree_len(obs), np.float32)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        return actions


def greedy_return(weights: FlatWeights, env: TeamEnv, seed: int | None = None) -> float:
    """The return of one episode of ``env`` with every agent greedy in ``weights`` (a
    learner's, ``get_weights()``)."""
    policy = TeamQPolicy(env.observation_space, env.action_space, epsilon=0.0)
    policy.set_weights(weights)
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action = policy.greedy_actions({k: v[None] for k, v in obs.items()})[0]
        obs, reward, terminated, truncated, _ = env.step(action)
        total, done = total + float(reward), terminated or truncated
    return total


class QMIXLearner(ModelWeights):
    """The shared agent network and the mixer, each with its target copy (the module docstring)."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], *, model: ModelSpec = None,
                 hidden: Sequence[int] = (64,), mixer: str = "qmix", mixing_embed_dim: int = 32, double_q: bool = True,
                 lr: float = 5e-4, max_grad_norm: float | None = 10.0, seed: int = 0, device: str = "cpu",
                 max_nonfinite_updates: int = 10) -> None:  # fmt: skip
        self.device = resolve_device(device)
        n = int(action_space.shape[0])  # type: ignore[index]
        state_dim = int(observation_space["state"].shape[0])  # type: ignore[index]
        self.model = _agent_net(model, observation_space, action_space, hidden, seed).to(self.device)
        with seeded(seed + 1):
            self.mixer = (QMixer(n, state_dim, mixing_embed_dim) if mixer == "qmix" else VDNMixer()).to(self.device)
        self.target = copy.deepcopy(self.model).requires_grad_(False)
        self.target_mixer = copy.deepcopy(self.mixer).requires_grad_(False)
        self._params = [*self.model.parameters(), *self.mixer.parameters()]
        self.optimizer = Adam(self._params, lr=lr)
        self.guard = UpdateGuard(max_nonfinite_updates, type(self).__name__)
        self.max_grad_norm, self.double_q = max_grad_norm, double_q
        self.version = 0
        self.target_updates = 0

    def learn_on_batch(self, batch: SampleBatch) -> ReplayUpdate | dict[str, float]:
        """One step of the team's TD error (squared, weighted by replay's importance weights)."""
        t = to_tensors({k: batch[k] for k in (OBS, ACTIONS, REWARDS, NEXT_OBS, DISCOUNTS)}, self.device)
        obs, next_obs, actions = t[OBS], t[NEXT_OBS], t[ACTIONS].long()
        weights = torch.as_tensor(batch[WEIGHTS]).to(self.device) if WEIGHTS in batch else 1.0
        chosen = _agent_q(self.model, obs["obs"].float()).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        q_tot = self.mixer(chosen, obs["state"].float())
        with torch.no_grad():
            next_q = _agent_q(self.target, next_obs["obs"].float())
            pick = _agent_q(self.model, next_obs["obs"].float()) if self.double_q else next_q
            best = next_q.gather(-1, pick.argmax(-1, keepdim=True)).squeeze(-1)
            targets = t[REWARDS] + t[DISCOUNTS] * self.target_mixer(best, next_obs["state"].float())
        td = q_tot - targets
        loss = (weights * td**2).mean()
        self.optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        norm = self.guard.step(self.optimizer, loss, self._params, self.max_grad_norm)
        stats = {"skipped_updates": float(self.guard.skipped)}
        if norm is None:
            return stats
        self.version += 1
        stats |= {"loss": float(loss.detach()), "mean_q_tot": float(q_tot.detach().mean()),
                  "mean_td_error": float(td.detach().abs().mean()), "grad_norm": norm}  # fmt: skip
        return ReplayUpdate(stats, to_numpy(td.detach().abs()))

    def update_target(self) -> None:
        """Copy the agent network and the mixer into their targets."""
        self.target.load_state_dict(self.model.state_dict())
        self.target_mixer.load_state_dict(self.mixer.state_dict())
        self.target_updates += 1


@algorithm_config(defaults={"lr": 5e-4, "num_workers": 1, "rollout_fragment_length": 4, "n_step": 1,
                            "buffer_size": 5_000, "train_batch_size": 32, "training_intensity": 8.0,
                            "learning_starts": 200, "timesteps_per_iteration": 200, "gamma": 0.99})  # fmt: skip
class QMIXConfig(ReplayConfig):
    """The env is a multi-agent env whose agents act together (``rl/envs/team.py``)."""

    vector_hidden = (64,)

    mixer: str = "qmix"
    """``"qmix"`` (monotonic mixing from the state) or ``"vdn"`` (the sum)."""
    mixing_embed_dim: int = field(default=32, min=1)
    """Width of QMIX's mixing network."""
    double_q: bool = True
    """Pick each agent's next action with the online network, value it with the target."""
    target_network_update_freq: int = field(default=2_000, min=1)
    """Rows trained between target updates."""
    epsilon: tuple[float, ...] = (1.0, 0.05)
    """Exploration: (initial, final) epsilon of a linear schedule, per agent."""
    epsilon_timesteps: int = field(default=2_000, min=0)
    """Env steps (over all workers) over which epsilon decays."""
    team_reward: str = "mean"
    """The team's reward: the ``"mean"`` of the agents' (each gets the team's) or their ``"sum"``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_epsilon("epsilon", self.epsilon)
        if self.mixer not in MIXERS:
            raise ConfigError(f"mixer: must be 'qmix' or 'vdn', got {self.mixer!r}")
        check_team("QMIX", self.env, self.team_reward)

    def target_update_freq(self) -> int | None:
        return self.target_network_update_freq

    def worker_env(self, *, training: bool = True) -> EnvSpec:
        """The env's agents as one team."""
        return functools.partial(TeamEnv, self.env, reward=self.team_reward)


def qmix_workers(config: QMIXConfig, spaces: Spaces) -> Workers:
    c = config
    initial, final = c.epsilon
    per_worker = c.epsilon_timesteps // max(c.rollouts.num_workers, 1)
    policy = functools.partial(TeamQPolicy, model=c.model, hidden=c.vector_hidden, epsilon=(initial, final, per_worker))
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


def qmix_learner(config: QMIXConfig, spaces: Spaces) -> QMIXLearner:
    c, part = config, config.learner
    return QMIXLearner(spaces.observation, spaces.action, model=c.model, hidden=c.vector_hidden, mixer=c.mixer,
                       mixing_embed_dim=c.mixing_embed_dim, double_q=c.double_q, lr=part.lr,
                       max_grad_norm=part.max_grad_norm, seed=c.seed, device=part.device,
                       max_nonfinite_updates=part.max_nonfinite_updates)  # fmt: skip


def qmix_models(config: QMIXConfig) -> dict[str, PolicyModel]:
    """The agents' shared Q network (checked against one agent's spaces: ``agent_spaces``)."""
    return {"default": PolicyModel(config.model, "q", {"hidden": config.vector_hidden, "dueling": False})}


RECIPE: Recipe[QMIXConfig, QMIXLearner, ReplayBuffer] = Recipe(
    name="qmix", config=QMIXConfig, family="q", plan=replay_plan, models=qmix_models, workers=qmix_workers,
    learner=qmix_learner, resources=REPLAY_BUFFER, model_spaces=agent_spaces,
    capabilities=Capabilities(team=True, policy_mapping=False, async_env=False,
                              policy_mapping_reason="it learns one team's value: its env's agents are the team (set "
                              "env to the multi-agent env itself)"),
)  # fmt: skip


class QMIX(Algorithm):
    """QMIX and VDN (the module docstring)."""

    recipe = RECIPE
