"""Two trainers, one environment: a PPO policy and a DQN policy learn side by
side from the same multi-agent rollouts (RLlib Flow, Fig. 9: the composition
that a user of a monolithic trainer could not write).

Plan::

    rollouts = parallel_rollouts(bulk_sync)                      # MultiAgentBatch
    ppo_rollouts, dqn_rollouts = duplicate(rollouts, 2)          # one branch per policy to train
    ppo: select_experiences(ppo_policy) -> concat_batches -> standardize_fields -> train_one_step
    dqn store: select_experiences(dqn_policy) -> store_to_replay_buffer
    dqn train: replay(rate-limited) -> learn_on_batches -> update_priorities -> sync_weights -> update_target_network
    concurrently([ppo, dqn store, dqn train], async) -> once_per_steps -> report_metrics

With ``policies_to_train`` naming one policy, only its branch is built; the
other policy keeps acting with the weights it has.

Each policy's experiences reach only its own learner; each learner sends
its weights to the workers under its own policy id. The replay branch is
rate-limited (``dqn_training_intensity`` rows replayed per row stored), so
the three branches can run freely without one starving the others.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, cast

from ..actors import ActorHandle, Runtime
from ..errors import ConfigError
from ..flow import (
    concat_batches,
    concurrently,
    duplicate,
    once_per_steps,
    parallel_rollouts,
    report_metrics,
    select_experiences,
    standardize_fields,
    train_one_step,
)
from ..flow.learner import learn_on_batches, sync_weights, update_priorities, update_target_network
from ..flow.replay import replay, store_to_replay_buffer
from ..rl.actor_critic import ActorCriticPolicy
from ..rl.models.config import model_spec
from ..rl.multi_agent import MultiAgentCartPole, make_multi_agent_env
from ..rl.multi_agent_worker import MultiAgentRolloutWorker, PolicySpec
from ..rl.policy import FlatWeights, ReplayUpdate
from ..rl.q_learning import DQNLearner, EpsilonGreedyPolicy
from ..rl.replay_buffer import PrioritizedReplayBuffer
from ..rl.sample_batch import MultiAgentBatch, SampleBatch
from ..rl.state import get_state, set_state
from ..rl.worker_set import WorkerSet
from ._base import Algorithm
from ._config import AlgorithmConfig, algorithm_config, check_epsilon, field
from .ppo import PPOConfig, ppo_loss

__all__ = ["DQN_POLICY", "PPO_POLICY", "TwoTrainer", "TwoTrainerConfig", "two_agent_cartpole"]

PPO_POLICY = "ppo_policy"
DQN_POLICY = "dqn_policy"


def two_agent_cartpole() -> MultiAgentCartPole:
    """The default env: two independent CartPoles, ``agent_0`` and ``agent_1``."""
    return MultiAgentCartPole(num_agents=2)


def alternate_ppo_dqn(agent_id: str) -> str:
    """Agents whose id ends in an even number go to PPO, the others to DQN."""
    digits = "".join(c for c in agent_id if c.isdigit())
    return PPO_POLICY if not digits or int(digits) % 2 == 0 else DQN_POLICY


@algorithm_config
class TwoTrainerConfig(AlgorithmConfig):
    env: Any = two_agent_cartpole
    """A callable returning a MultiAgentEnv or a PettingZoo ParallelEnv."""
    policy_mapping_fn: Callable[[str], str] = alternate_ppo_dqn
    """Agent id -> "ppo_policy" or "dqn_policy" (a module-level function: it is sent to workers)."""
    policies_to_train: tuple[str, ...] = (PPO_POLICY, DQN_POLICY)
    """The policies that learn; the others keep acting with their current weights."""
    rollout_fragment_length: int = field(256, min=1)
    """Env steps per worker sample."""
    ppo_model: Any = None
    """The PPO policy's network (as ``model`` is for single-agent algorithms)."""
    dqn_model: Any = None
    """The DQN policy's Q network (as ``model`` is for DQN)."""
    ppo_lr: float = field(3e-3, min=0, exclusive_min=True)
    """Learning rate of the PPO policy."""
    ppo_train_batch_size: int = field(1024, min=1)
    """PPO rows per training batch."""
    ppo_minibatch_size: int = field(128, min=1)
    """PPO SGD minibatch."""
    ppo_num_epochs: int = field(5, min=1)
    """PPO passes over each batch."""
    dqn_lr: float = field(1e-3, min=0, exclusive_min=True)
    """Learning rate of the DQN policy."""
    dqn_hidden: tuple[int, ...] = (128, 128)
    """Hidden layers of the Q network."""
    dqn_n_step: int = field(3, min=1)
    """n-step returns for DQN."""
    dqn_buffer_size: int = field(50_000, min=1)
    """DQN replay capacity."""
    dqn_train_batch_size: int = field(64, min=1)
    """Rows per DQN learner step."""
    dqn_training_intensity: float = field(16.0, min=0, exclusive_min=True)
    """Rows replayed per row stored (sampling waits for training, and training for sampling)."""
    dqn_learning_starts: int = field(1_000, min=0)
    """DQN rows stored before it trains."""
    dqn_target_network_update_freq: int = field(4_000, min=1)
    """Rows trained between DQN target updates."""
    dqn_epsilon: tuple[float, ...] = (1.0, 0.02)
    """DQN exploration: (initial, final) epsilon."""
    dqn_epsilon_timesteps: int = field(10_000, min=0)
    """Agent steps over which epsilon decays."""
    timesteps_per_iteration: int = field(2_048, min=1)
    """Env steps sampled between two results."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model is not None:
            raise ConfigError("model: the two trainers have a model each; set ppo_model and dqn_model")
        check_epsilon("dqn_epsilon", self.dqn_epsilon)
        for name in ("ppo_model", "dqn_model"):
            object.__setattr__(self, name, model_spec(getattr(self, name), name))
        unknown = set(self.policies_to_train) - {PPO_POLICY, DQN_POLICY}
        if unknown or not self.policies_to_train or len(set(self.policies_to_train)) != len(self.policies_to_train):
            raise ConfigError(
                f"policies_to_train: expected distinct names among {PPO_POLICY!r}, {DQN_POLICY!r}; "
                f"got {self.policies_to_train}"
            )


class _PolicyLearner:
    """A learner whose weights go to one policy id of multi-agent workers."""

    def __init__(self, policy_id: str, learner: Any) -> None:
        self.policy_id, self.learner = policy_id, learner

    def learn_on_batch(self, *args: Any, **kwargs: Any) -> Mapping[str, float] | ReplayUpdate:
        return self.learner.learn_on_batch(*args, **kwargs)  # type: ignore[no-any-return]

    def get_weights(self) -> dict[str, FlatWeights]:
        return {self.policy_id: self.learner.get_weights()}

    def update_target(self) -> None:
        self.learner.update_target()


class _Learners:
    def __init__(self, *learners: _PolicyLearner) -> None:
        self.by_id = {learner.policy_id: learner for learner in learners}

    def get_state(self) -> dict[str, Any]:
        return {pid: get_state(learner.learner) for pid, learner in self.by_id.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        for pid, learner_state in state.items():
            set_state(self.by_id[pid].learner, learner_state)

    def get_weights(self) -> dict[str, FlatWeights]:
        return {pid: learner.learner.get_weights() for pid, learner in self.by_id.items()}


async def _policy_batches(source: AsyncIterable[MultiAgentBatch], policy_id: str) -> AsyncIterator[SampleBatch]:
    async for batch in source:
        yield batch.policy_batches.get(policy_id, SampleBatch())


class TwoTrainer(Algorithm):
    config_class = TwoTrainerConfig
    supports_learner_precision = False
    name = "two_trainer"
    config: TwoTrainerConfig

    def check_env(self) -> None:
        if self.config.vector_env:
            raise ConfigError("vector_env: multi-agent envs are stepped one by one; leave vector_env off")
        env = make_multi_agent_env(self.config.env)
        try:
            mapped = {a: self.config.policy_mapping_fn(a) for a in env.possible_agents}
            for agent, pid in mapped.items():
                if pid not in (PPO_POLICY, DQN_POLICY):
                    raise ConfigError(
                        f"policy_mapping_fn: {agent!r} -> {pid!r}; expected {PPO_POLICY!r} or {DQN_POLICY!r}"
                    )
                spec, family, options = self._policy_model(pid)
                self.check_model(spec, env.observation_spaces[agent], env.action_spaces[agent], family=family,
                                 options=options, field=f"env ({agent})")  # fmt: skip
            if set(mapped.values()) != {PPO_POLICY, DQN_POLICY}:
                raise ConfigError(f"policy_mapping_fn: both policies need an agent, got {mapped}")
            self.spaces = {pid: (env.observation_spaces[a], env.action_spaces[a]) for a, pid in mapped.items()}
        finally:
            env.close()

    def _policy_model(self, policy_id: str) -> tuple[Any, Any, dict[str, Any]]:
        """A policy's model spec, family and built-in options."""
        c = self.config
        if policy_id == PPO_POLICY:
            return c.ppo_model, "actor_critic", {"hidden": c.hidden}
        return c.dqn_model, "q", {"hidden": c.dqn_hidden}

    def spawn_workers(self, runtime: Runtime) -> list[Awaitable[ActorHandle]]:
        c = self.config
        initial, final = c.dqn_epsilon
        specs = {
            PPO_POLICY: PolicySpec(
                functools.partial(ActorCriticPolicy, model=c.ppo_model, hidden=c.hidden, device=c.worker_device),
                "gae",
            ),
            DQN_POLICY: PolicySpec(
                functools.partial(  # type: ignore[arg-type]
                    EpsilonGreedyPolicy,
                    model=c.dqn_model,
                    hidden=c.dqn_hidden,
                    epsilon=(initial, final, c.dqn_epsilon_timesteps // max(c.num_workers, 1)),
                    device=c.worker_device,
                ),
                "transitions",
                c.dqn_n_step,
            ),
        }
        return [
            runtime.spawn(
                MultiAgentRolloutWorker,
                c.env,
                policies=specs,
                policy_mapping_fn=c.policy_mapping_fn,
                rollout_fragment_length=c.rollout_fragment_length,
                gamma=c.gamma,
                lam=c.lam,
                seed=c.seed,
                worker_index=i + 1,
                check_env_output=c.check_env_output,
                name=f"{self.name}-worker-{i + 1}",
                max_restarts=c.max_worker_restarts,
                num_cpus=c.num_cpus_per_worker,
                num_gpus=c.num_gpus_per_worker,
            )
            for i in range(max(c.num_workers, 1))
        ]

    def make_learner(self) -> _Learners:
        c = self.config
        ppo_config = PPOConfig().replace(lr=c.ppo_lr, max_grad_norm=c.max_grad_norm, hidden=c.hidden)
        ppo = ActorCriticPolicy(*self.spaces[PPO_POLICY], model=c.ppo_model, hidden=c.hidden, lr=c.ppo_lr,
                                max_grad_norm=c.max_grad_norm, loss=ppo_loss, loss_config=ppo_config, seed=c.seed,
                                device=c.learner_device, max_nonfinite_updates=c.max_nonfinite_updates)  # fmt: skip
        dqn = DQNLearner(*self.spaces[DQN_POLICY], model=c.dqn_model, hidden=c.dqn_hidden, lr=c.dqn_lr, seed=c.seed,
                         device=c.learner_device, max_nonfinite_updates=c.max_nonfinite_updates)  # fmt: skip
        return _Learners(_PolicyLearner(PPO_POLICY, ppo), _PolicyLearner(DQN_POLICY, dqn))

    def learners(self) -> list[Any]:
        return [learner.learner for learner in self.learner.by_id.values()]

    async def setup(self, runtime: Runtime) -> None:
        self.buffer = PrioritizedReplayBuffer(self.config.dqn_buffer_size, seed=self.config.seed)

    async def extra_state(self) -> Any:
        return self.buffer

    async def load_extra_state(self, state: Any) -> None:
        self.buffer = state

    def execution_plan(self, workers: WorkerSet, learner: Any, config: Any) -> AsyncIterator[dict[str, Any]]:
        rollouts = cast(AsyncIterator[MultiAgentBatch], parallel_rollouts(workers, mode="bulk_sync"))
        branches = duplicate(rollouts, len(config.policies_to_train))
        ops: list[AsyncIterator[Any]] = []
        for policy_id, branch in zip(config.policies_to_train, branches, strict=True):
            experiences = _policy_batches(select_experiences(branch, [policy_id]), policy_id)
            ops += self._train_ppo(experiences) if policy_id == PPO_POLICY else self._train_dqn(experiences)
        return report_metrics(once_per_steps(concurrently(ops, "async"), config.timesteps_per_iteration))

    def _train_ppo(self, experiences: AsyncIterator[SampleBatch]) -> list[AsyncIterator[Any]]:
        c, learner = self.config, self.learner.by_id[PPO_POLICY]
        batches = standardize_fields(concat_batches(experiences, c.ppo_train_batch_size), ["advantages"])
        return [train_one_step(batches, learner, self.workers, num_epochs=c.ppo_num_epochs,
                               minibatch_size=c.ppo_minibatch_size, seed=c.seed)]  # fmt: skip

    def _train_dqn(self, experiences: AsyncIterator[SampleBatch]) -> list[AsyncIterator[Any]]:
        c, learner = self.config, self.learner.by_id[DQN_POLICY]
        ratio, starts = c.dqn_training_intensity, c.dqn_learning_starts
        store_op = store_to_replay_buffer(experiences, self.buffer, learning_starts=starts, min_replay_ratio=ratio)
        replayed = replay(self.buffer, c.dqn_train_batch_size, min_size=starts, max_replay_ratio=ratio)
        trained = sync_weights(update_priorities(learn_on_batches(replayed, learner)), learner, self.workers, every=8)
        return [store_op, update_target_network(trained, learner, c.dqn_target_network_update_freq)]
