"""DQN (Mnih et al. 2015) with double Q, dueling heads, n-step returns and
prioritized replay.

Plan: the replay plan of ``_off_policy.py`` (store and train branches in a
weighted round robin), with ``update_target_network`` copying the online
network into the target every ``target_network_update_freq`` rows trained.

Defaults are tuned for CartPole-sized tasks: 2 workers x 4 envs x 4 steps
per round, 16 rows trained per row sampled (8 learner steps of 64 per
round), 3-step returns, prioritized replay. Measured on CartPole-v1 (mean
return of the last 100 episodes >= 150): seeds 0/1: 18.4k / 18.4k steps, 18-22 s.

Where each part lives: epsilon-greedy acting in the workers (``EpsilonGreedyPolicy``,
``rl/policies/epsilon_greedy.py``); n-step transitions built there too (``compute_nstep``,
``rl/sampling/postprocessing.py``, from ``rl/sampling/trajectory.py``); the replay buffers, uniform and
prioritized, with frames stored once (``rl/data/replay_buffer.py``, ``rl/data/sum_tree.py``,
``rl/data/frame_store.py``); the store and train branches (``_off_policy.py``); the double-Q
Huber loss with importance weights and the target network (``DQNLearner`` below); the
dueling head (``QNet``, ``rl/models/builtin.py``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from ..rl.data.replay_buffer import WEIGHTS, ReplayBuffer
from ..rl.data.sample_batch import ACTIONS, DISCOUNTS, NEXT_OBS, OBS, REWARDS, SampleBatch
from ..rl.data.tree import Tree
from ..rl.envs.action_mask import has_action_mask, masked
from ..rl.learners.device import resolve_device, to_numpy, to_tensors
from ..rl.learners.optim import Adam, UpdateGuard
from ..rl.learners.precision import autocast, resolve_precision, to_float32
from ..rl.models import ModelSpec, build_model
from ..rl.models.nets import polyak_update, seeded
from ..rl.policies.epsilon_greedy import EpsilonGreedyPolicy, check_discrete
from ..rl.policy import ModelWeights, ReplayUpdate
from ..session import Algorithm
from ._config import algorithm_config, check_epsilon, field
from ._off_policy import REPLAY_BUFFER, ReplayConfig, replay_plan
from ._recipe import Capabilities, Recipe, Spaces, Workers, single_model

__all__ = ["DQN", "DQN_CAPABILITIES", "DQN_MODELS", "DQNConfig", "DQNLearner", "dqn_learner"]


class DQNLearner(ModelWeights):
    """Trains a Q network from replayed transitions.

    The target is ``r_n + discount * Q_target(s', argmax_a Q(s', a))`` with
    double Q (van Hasselt et al. 2016), or ``max_a Q_target(s', a)`` without.
    ``discount`` comes with the batch (``gamma**k`` for a k-step return, 0 at
    a termination). The Huber loss is weighted by the replay's importance
    weights; ``learn_on_batch`` returns the absolute TD errors for priorities.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        model: ModelSpec = None,
        hidden: Sequence[int] = (64, 64),
        dueling: bool = True,
        double_q: bool = True,
        lr: float = 5e-4,
        max_grad_norm: float | None = 10.0,
        tau: float = 1.0,
        seed: int = 0,
        device: str | torch.device = "cpu",
        max_nonfinite_updates: int = 10,
        precision: str = "float32",
        cql_weight: float = 0.0,
    ) -> None:
        check_discrete(action_space)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.autocast_dtype = resolve_precision(precision, self.device)
        """Forward passes in this dtype under autocast (None: float32); ``precision.py``."""
        with seeded(seed):
            net = build_model(model, observation_space, action_space, "q", hidden=hidden, dueling=dueling)
        self.model = net.to(self.device)
        self.target = copy.deepcopy(self.model).requires_grad_(False)
        self.masked = has_action_mask(observation_space, action_space)
        self.double_q = double_q
        self.optimizer = Adam(self.model.parameters(), lr=lr)
        self._params = list(self.model.parameters())
        self.guard = UpdateGuard(max_nonfinite_updates, type(self).__name__)
        self.max_grad_norm = max_grad_norm
        self.tau = tau
        self.cql_weight = cql_weight
        """Conservative Q-learning's weight (Kumar et al. 2020, CQL(H)): the loss adds
        ``cql_weight * (logsumexp_a Q(s, a) - Q(s, a_data))``, pushing down the Q-values of
        actions the data does not take (0: plain DQN)."""
        self.version = 0
        self.target_updates = 0

    def _q(self, net: nn.Module, obs: Tree) -> torch.Tensor:
        """Q-values of ``net`` in float32, its forward pass in ``autocast_dtype``."""
        with autocast(self.device, self.autocast_dtype):
            return to_float32(net(obs))  # type: ignore[no-any-return]

    def learn_on_batch(self, batch: SampleBatch) -> ReplayUpdate | dict[str, float]:
        """One Huber-loss step on replayed transitions: its stats and TD errors (only the
        stats when the step was skipped, so that NaN TD errors never become priorities)."""
        t = to_tensors({k: batch[k] for k in (OBS, ACTIONS, REWARDS, NEXT_OBS, DISCOUNTS)}, self.device)
        obs, actions, rewards, next_obs, discounts = t[OBS], t[ACTIONS].long(), t[REWARDS], t[NEXT_OBS], t[DISCOUNTS]
        if WEIGHTS in batch:
            weights = torch.as_tensor(batch[WEIGHTS]).to(self.device)
        else:
            weights = torch.ones(len(batch), device=self.device)
        q_all = self._q(self.model, obs)
        q = q_all.gather(1, actions[:, None]).squeeze(1)
        with torch.no_grad():
            target_q = self._q(self.target, next_obs)
            if self.masked:  # the bootstrap's max runs over the actions valid in s'
                target_q = masked(target_q, next_obs)
            if self.double_q:
                online = self._q(self.model, next_obs)
                best = (masked(online, next_obs) if self.masked else online).argmax(-1, keepdim=True)
                next_q = target_q.gather(1, best).squeeze(1)
            else:
                next_q = target_q.max(-1).values
            targets = rewards + discounts * next_q
        td = q - targets
        loss = (weights * nn.functional.huber_loss(q, targets, reduction="none")).mean()
        conservative = None
        if self.cql_weight:
            gap = torch.logsumexp(masked(q_all, obs) if self.masked else q_all, dim=-1) - q
            conservative = gap.mean()
            loss = loss + self.cql_weight * conservative
        self.optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        norm = self.guard.step(self.optimizer, loss, self._params, self.max_grad_norm)
        stats = {"skipped_updates": float(self.guard.skipped)}
        if norm is None:  # skipped: no priorities from NaN TD errors either
            return stats
        self.version += 1
        stats |= {
            "loss": float(loss.detach()),
            "mean_q": float(q.detach().mean()),
            "mean_td_error": float(td.detach().abs().mean()),
            "grad_norm": norm,
        }
        if conservative is not None:
            stats["cql_gap"] = float(conservative.detach())
        return ReplayUpdate(stats, to_numpy(td.abs()))

    def update_target(self) -> None:
        """Move the target network toward the online one (``tau=1``: copy it)."""
        polyak_update(self.target, self.model, self.tau)
        self.target_updates += 1


@algorithm_config(defaults={"lr": 1e-3, "num_envs_per_worker": 4, "rollout_fragment_length": 4, "max_grad_norm": 10.0,
                            "n_step": 3, "buffer_size": 50_000, "prioritized_replay": True, "train_batch_size": 64,
                            "training_intensity": 16.0})  # fmt: skip
class DQNConfig(ReplayConfig):
    vector_hidden = (128, 128)

    dueling: bool = True
    """Dueling heads: Q = V + A - mean(A)."""
    double_q: bool = True
    """Pick the next action with the online network, value it with the target network."""
    target_network_update_freq: int = field(default=4_000, min=1)
    """Rows trained between target network updates."""
    epsilon: tuple[float, ...] = (1.0, 0.02)
    """Exploration: (initial, final) epsilon of a linear schedule."""
    epsilon_timesteps: int = field(default=10_000, min=0)
    """Env steps (over all workers) over which epsilon decays."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_epsilon("epsilon", self.epsilon)

    def target_update_freq(self) -> int | None:
        """``target_network_update_freq``."""
        return self.target_network_update_freq


def dqn_workers(config: DQNConfig, spaces: Spaces) -> Workers:
    """Epsilon-greedy workers (epsilon decays over each worker's share of the steps), n-step transitions."""
    c = config
    initial, final = c.epsilon
    per_worker = c.epsilon_timesteps // max(c.rollouts.num_workers, 1)
    policy = functools.partial(EpsilonGreedyPolicy, model=c.model, hidden=c.vector_hidden, dueling=c.dueling,
                               epsilon=(initial, final, per_worker), device=c.rollouts.device)  # fmt: skip
    return Workers(policy, "transitions", n_step=c.n_step)  # type: ignore[arg-type]


def dqn_learner(config: DQNConfig, spaces: Spaces) -> DQNLearner:
    """The double-Q, dueling learner with its target network."""
    c, part = config, config.learner
    return DQNLearner(spaces.observation, spaces.action, model=c.model, device=part.device,
                      max_nonfinite_updates=part.max_nonfinite_updates, precision=part.precision,
                      hidden=c.vector_hidden, dueling=c.dueling, double_q=c.double_q, lr=part.lr,
                      max_grad_norm=part.max_grad_norm, seed=c.seed)  # fmt: skip


DQN_MODELS = single_model("q", dueling=lambda c: c.dueling)
DQN_CAPABILITIES = Capabilities(learner_precision=True)

RECIPE: Recipe[DQNConfig, DQNLearner, ReplayBuffer] = Recipe(
    name="dqn", config=DQNConfig, family="q", plan=replay_plan, models=DQN_MODELS, workers=dqn_workers,
    learner=dqn_learner, resources=REPLAY_BUFFER, capabilities=DQN_CAPABILITIES,
)  # fmt: skip


class DQN(Algorithm):
    """DQN (the module docstring says where each part lives)."""

    recipe = RECIPE
