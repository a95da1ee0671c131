"""``RolloutWorker``: environments plus a policy; a plain class.

The actor layer makes it remote (``await runtime.spawn(RolloutWorker, ...)``);
with ``num_workers=0`` the same class samples in the driver.

``sample()`` steps ``num_envs`` lanes in lock step for
``rollout_fragment_length`` steps with one batched forward pass per step: one
stepping loop, whatever the kind of env behind the lanes (``lanes.Lanes``:
gymnasium envs stepped one by one, ``env_lanes.py``; or one gymnasium vector
env with ``vector_env=True``, ``vector_lanes.py``). Each step's outputs go into
one recorder of segments (``recorder.py``). Observations are kept in the
observation space's own dtype and structure (``tree.py``) from the env to the
batch. Episode bookkeeping, seeding and postprocessing (GAE, n-step
transitions) are the shared trajectory pipeline's (``trajectory.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data.sample_batch import DONES, SampleBatch
from ..data.state import get_state, set_state
from ..data.tree import tree_assign, tree_map, tree_stack, tree_zeros
from ..envs.checks import EnvChecker
from ..envs.make import EnvSpec
from ..offline.writer import LaneSteps, Output
from ..policy import FlatWeights, PolicyFactory, StatefulPolicy
from .attributes import pickled_attributes, restore_exactly
from .env_lanes import EnvLanes
from .lanes import Lanes, LanesFactory
from .normalization import NormalizerState, WorkerNormalizer, check_normalizable
from .recorder import SegmentRecorder, segment_batch
from .trajectory import EpisodeBook, Postprocessing, PostprocessMode, new_episode_seed, worker_seed
from .vector_lanes import VectorLanes

__all__ = ["PolicyDelegation", "RolloutWorker", "default_policy"]


def default_policy(observation_space: Any, action_space: Any, *, seed: int, worker_index: int) -> Any:
    """The built-in actor-critic policy (a ``PolicyFactory``), for workers given none."""
    from ..policies.actor_critic import ActorCriticPolicy

    return ActorCriticPolicy(observation_space, action_space, seed=seed)


class PolicyDelegation:
    """A worker's weight and learning calls, delegated to its ``policy``."""

    policy: Any

    def get_weights(self) -> FlatWeights:
        """The policy's weights."""
        return self.policy.get_weights()  # type: ignore[no-any-return]

    def set_weights(self, weights: FlatWeights) -> None:
        """Load new policy weights."""
        self.policy.set_weights(weights)

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], dict[str, float]]:
        """Gradients of the policy's loss on ``batch``."""
        return self.policy.compute_gradients(batch)  # type: ignore[no-any-return]


class RolloutWorker(PolicyDelegation):
    """Environments plus a policy: ``sample()`` returns one postprocessed ``SampleBatch``.

    ``policy_factory`` builds the policy (a ``PolicyFactory``; by default the
    built-in actor-critic); ``postprocess`` and ``n_step`` say how its
    experience is postprocessed (``trajectory.Postprocessing``). ``lanes``
    builds the lanes of a kind of env of the caller's own (a ``LanesFactory``);
    by default gymnasium envs stepped one by one, or one vector env with
    ``vector_env``.
    """

    def __init__(
        self,
        env: EnvSpec,
        *,
        policy_factory: PolicyFactory | None = None,
        num_envs: int = 1,
        rollout_fragment_length: int = 128,
        gamma: float = 0.99,
        lam: float = 0.95,
        seed: int = 0,
        worker_index: int = 0,
        use_critic: bool = True,
        postprocess: PostprocessMode = "gae",
        n_step: int = 1,
        check_env_output: bool = True,
        vector_env: bool = False,
        normalize_observations: bool = False,
        normalize_rewards: bool = False,
        normalize_clip: float = 10.0,
        restart_failed_envs: bool = False,
        lanes: LanesFactory | None = None,
        output: Output | None = None,
    ) -> None:
        self.postprocessing = Postprocessing(postprocess, gamma, lam, n_step, use_critic and postprocess == "gae")
        self.num_envs = num_envs
        self.fragment = rollout_fragment_length
        self.worker_index = worker_index
        base = worker_seed(seed, worker_index)
        self.lanes: Lanes
        if lanes is not None:  # a kind of env of the caller's own
            self.lanes = lanes(env, num_envs, worker_index=worker_index, check_env_output=check_env_output)
        elif vector_env:
            self.lanes = VectorLanes(env, num_envs, worker_index=worker_index, check_env_output=check_env_output)
        else:
            self.lanes = EnvLanes(env, num_envs, worker_index=worker_index, check_env_output=check_env_output,
                                  restart_failed_envs=restart_failed_envs)  # fmt: skip
        self.observation_space = self.lanes.observation_space
        self.normalizer: WorkerNormalizer | None = None
        if normalize_observations or normalize_rewards:
            shape = check_normalizable(self.observation_space) if normalize_observations else None
            state = NormalizerState.empty(shape, normalize_rewards, normalize_clip)
            self.normalizer = WorkerNormalizer(state, num_envs, gamma)
            if normalize_observations:
                assert isinstance(self.lanes, EnvLanes), "the config refuses normalization with vector_env"
                self.lanes.normalize_observations(self.normalizer)
        factory = policy_factory or default_policy
        self.policy: Any = factory(self.observation_space, self.lanes.action_space, seed=base,
                                   worker_index=worker_index)  # fmt: skip
        self.checker = EnvChecker(env, self.observation_space, worker_index) if check_env_output else None
        """The NaN and inf checks of every segment (what each step returns, the lanes check)."""
        self.env_steps = np.zeros(num_envs, np.int64)  # each lane's env steps so far (named in env errors)
        self.obs = tree_zeros(self.observation_space, (num_envs,))
        self.lanes.reset(self.obs, base, self.env_steps)
        self.episodes = EpisodeBook(worker_index, num_envs)
        self.writer = None if output is None else output.writer("worker", worker_index, self.observation_space,
                                                                 self.lanes.action_space, num_envs)  # fmt: skip
        """Writes what is sampled as a Minari dataset of this worker's own (``output``)."""

    def sample(self) -> SampleBatch:
        """Collect ``rollout_fragment_length`` steps from each lane: the one stepping loop."""
        lanes, book, policy, first = self.lanes, self.episodes, self.policy, self.env_steps
        stateful = policy if isinstance(policy, StatefulPolicy) else None
        writer = self.writer
        sent: list[Any] = []  # the actions as the env took them, for the writer
        rec = SegmentRecorder(self.observation_space, self.fragment, self.num_envs,
                              keeps_next_obs=self.postprocessing.keeps_next_obs or writer is not None)  # fmt: skip
        tree_assign(rec.obs, 0, self.obs)
        # A value too large for float32 (a reward of 1e39) becomes inf in the buffers, which
        # the checks then name; numpy's overflow warning on the way is not the error to give.
        with np.errstate(over="ignore", invalid="ignore"):
            for t in range(self.fragment):
                rec.eps[t] = book.ids
                action, rec.logps[t], rec.values[t] = policy.compute_actions(rec.observations(t))
                rec.actions.append(action)
                row = rec.row(t, first, self.obs)
                env_action = policy.env_actions(action)
                if writer is not None:
                    sent.append(tree_map(np.array, env_action))
                lanes.step(env_action, row)
                rec.add(t, row)
                book.add(row.rewards, stepped=None if row.unstepped is None else ~row.unstepped)
                for i in row.ended:
                    book.end(i)
                if row.failed:
                    rec.abandon(t, row.failed)
                    for i in row.failed:
                        book.drop(i)  # dropped from the statistics
                if stateful is not None and (row.ended or row.failed):
                    stateful.episodes_ended(row.ended + row.failed)  # a recurrent policy forgets those lanes
            rewards = None
            if self.normalizer is not None:  # the episode book above counted the raw rewards
                rewards = self.normalizer.rewards(rec.rewards, rec.dones)
            segment = rec.segment(self.obs, rewards)
        if writer is not None:
            writer.record(LaneSteps(rec.obs, rec.next_obs, tree_stack(sent), rec.rewards, rec.terminateds, rec.dones,
                                    rec.logps, rec.eps, rec.skipped))  # fmt: skip
        self.env_steps = first + self.fragment
        return segment_batch(segment, first=first, checker=self.checker, postprocessing=self.postprocessing,
                             policy=policy, episodes=book, report=lanes.report, skipped=rec.skipped)  # fmt: skip

    def sample_with_gradients(self) -> tuple[list[np.ndarray], dict[str, float], SampleBatch]:
        """Sample, then compute gradients on that sample (A3C's worker step).

        The returned batch keeps only its episode records and size, so the
        driver can report metrics without receiving the data again.
        """
        batch = self.sample()
        grads, stats = self.compute_gradients(batch)
        summary = SampleBatch(
            {DONES: batch[DONES]},
            episode_returns=batch.episode_returns,
            episode_lengths=batch.episode_lengths,
            metrics=batch.metrics,
        )
        return grads, stats, summary

    def sync_normalizer(self, state: NormalizerState) -> NormalizerState | None:
        """Normalize with the global ``state`` from now on; return what was counted since the
        last sync (the driver merges it), or None when this worker does not normalize."""
        return None if self.normalizer is None else self.normalizer.sync(state)

    def get_state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the policy's training state (random generators, schedules),
        the episode and step counters, the normalizer's counts; and everything, environments
        mid-episode included, pickled (``exact``), which a restore uses only when trusted."""
        return {"policy": get_state(self.policy), "episodes_issued": self.episodes.issued,
                "env_steps": self.env_steps.copy(), "normalizer": self.normalizer,
                "exact": pickled_attributes(self, "the environments mid-episode")}  # fmt: skip

    def set_state(self, state: dict[str, Any] | bytes) -> None:
        """Put back what ``get_state`` returned: all of it where ``exact`` is there (a trusted
        checkpoint), else the policy and the counters, the environments starting new episodes."""
        if restore_exactly(self, state):
            return
        assert isinstance(state, dict)
        set_state(self.policy, state["policy"])
        self.episodes.issued = max(self.episodes.issued, int(state["episodes_issued"]))
        self.env_steps = np.array(state["env_steps"], np.int64).reshape(self.num_envs)
        if self.normalizer is not None and state["normalizer"] is not None:
            self.normalizer.restore(state["normalizer"])
        self.new_episodes()

    def new_episodes(self) -> None:
        """Abandon every episode in progress and reset every env, with seeds of their own
        (the same for the same counters: a run resumed twice goes on the same way twice)."""
        seed = new_episode_seed(self.worker_index, self.episodes.issued)
        self.lanes.reset(self.obs, seed, self.env_steps)
        for i in range(self.num_envs):
            self.episodes.drop(i)
        if isinstance(self.policy, StatefulPolicy):
            self.policy.episodes_ended(list(range(self.num_envs)))

    def close_envs(self) -> None:
        """Close the environments (and write the experiences not yet written, ``output``)."""
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.close()
        self.lanes.close()

    async def aclose(self) -> None:
        """Close the environments (the actor layer awaits this when the worker stops)."""
        self.close_envs()
