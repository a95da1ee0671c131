"""A frozen worker (SIGSTOP: ``docker pause``, a cgroup freezer, a process stuck on a network
file system) never hangs a run. Frozen at a random moment of each phase (sampling, a weight
broadcast, a save, an evaluation), it misses the deadline of the call it was given
(``worker_timeout_s``), is killed and replaced, and the run goes on. Only ``sample()`` had a
deadline before: PPO hung for as long as a worker stayed frozen in a broadcast."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from pathlib import Path
from typing import Any

import pytest

from asyncflow.actors import ActorHandle
from asyncflow.algorithms import ALGORITHMS, Algorithm
from asyncflow.rl.sampling.worker_set import WorkerTimeoutWarning

DEADLINE = 3.0
SETTINGS: dict[str, dict[str, Any]] = {
    "ppo": {"num_envs_per_worker": 2, "rollout_fragment_length": 32, "train_batch_size": 128, "minibatch_size": 64},
    "impala": {"num_envs_per_worker": 2, "rollout_fragment_length": 16, "timesteps_per_iteration": 64},
    "dqn": {"num_envs_per_worker": 2, "learning_starts": 64, "timesteps_per_iteration": 64},
    "apex": {"num_envs_per_worker": 2, "learning_starts": 64, "timesteps_per_iteration": 64},
    "sac": {"learning_starts": 64, "timesteps_per_iteration": 64, "training_intensity": 16.0},
}


def _freeze(worker: ActorHandle, frozen: list[int]) -> None:
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGSTOP)
    frozen.append(worker.pid)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def _train_until(algo: Algorithm, done: Any) -> None:
    """Iterate until ``done()``; a generous bound (20 deadlines) turns a hang into a failure."""
    async with asyncio.timeout(20 * DEADLINE):
        while not done():
            async for _ in algo.train():
                break


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", sorted(SETTINGS))
async def test_a_worker_frozen_in_any_phase_is_replaced_and_the_run_goes_on(name: str, tmp_path: Path) -> None:
    rng = random.Random(name)
    cls = ALGORITHMS[name]
    config = cls.config_class(**SETTINGS[name], num_workers=2, worker_timeout_s=DEADLINE, max_worker_restarts=10,
                              evaluation_interval=10**6, evaluation_episodes=1, seed=0)  # fmt: skip
    frozen: list[int] = []
    loop = asyncio.get_running_loop()
    with pytest.warns(WorkerTimeoutWarning, match=r"did not answer .* within 3 s \(worker_timeout_s\): killed"):
        async with cls(config) as algo:
            async for _ in algo.train():
                break
            workers = algo.workers.workers

            # Sampling: frozen a random moment into the next iteration.
            victim = rng.choice(workers)
            before = victim.restarts
            loop.call_later(rng.uniform(0.0, 0.05), _freeze, victim, frozen)
            await _train_until(algo, lambda: victim.restarts > before)

            # A weight broadcast: frozen just as the weights are sent to it.
            broadcast = algo.workers.broadcast
            chosen: list[ActorHandle] = []

            async def freezing(weights: Any, to: Any = None) -> None:
                del algo.workers.broadcast  # once: the method itself again
                chosen.append(rng.choice(list(to or workers)))
                _freeze(chosen[0], frozen)
                await broadcast(weights, to)

            algo.workers.broadcast = freezing  # type: ignore[method-assign]
            await _train_until(algo, lambda: bool(chosen) and chosen[0].pid != frozen[-1])
            assert _gone(frozen[-1])

            # A save: the frozen worker's state is that of its replacement; the file loads.
            victim = rng.choice(workers)
            before = victim.restarts
            _freeze(victim, frozen)
            saved = await algo.save(tmp_path / "c.ckpt")
            assert victim.restarts == before + 1
            assert isinstance(Algorithm.restore(saved), cls)

            # An evaluation.
            assert algo.evaluation_workers is not None
            (evaluator,) = algo.evaluation_workers.workers
            _freeze(evaluator, frozen)
            evaluation = await algo.evaluate()
            assert evaluator.restarts == 1 and evaluation["episodes"] == 1

            after = await anext(algo.train())  # and the run goes on
    assert after["num_workers_restarted"] >= 3
    assert len(frozen) == 4 and all(_gone(pid) for pid in frozen)
