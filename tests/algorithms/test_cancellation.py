"""A host application cancels the loop that trains (``asyncio.timeout`` around it, a pause):
training goes on where it stopped at the next ``train()``. An algorithm runs once: a second
``async with`` is refused, never a silent restart from fresh weights."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from asyncflow import ClosedError
from asyncflow.algorithms import DQN, IMPALA, PPO, DQNConfig, IMPALAConfig, PPOConfig

SMALL = dict(num_envs_per_worker=2, rollout_fragment_length=32)


def _configs(backend: str) -> list[object]:
    workers = 0 if backend == "local" else 2
    return [
        PPOConfig(**SMALL, num_workers=workers, train_batch_size=64 * max(workers, 1), minibatch_size=32),
        DQNConfig(**SMALL, num_workers=workers, learning_starts=64, timesteps_per_iteration=64),
        IMPALAConfig(**SMALL, num_workers=workers, timesteps_per_iteration=128),
    ]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", ["local", "process"])
async def test_training_goes_on_after_the_loop_was_cancelled(backend: str) -> None:
    for config in _configs(backend):
        cls = {PPOConfig: PPO, DQNConfig: DQN, IMPALAConfig: IMPALA}[type(config)]
        async with cls(config) as algo:  # type: ignore[abstract]
            seen: list[int] = []
            cancelled = 0
            for timeout in (0.05, 0.2, 0.5, 1.0, 2.0, 4.0):  # cancelled at different points of a step
                try:
                    async with asyncio.timeout(timeout):
                        async for result in algo.train():
                            seen.append(result["training_iteration"])
                except TimeoutError:
                    cancelled += 1
            async for result in algo.train():  # and once more, to the end of an iteration
                seen.append(result["training_iteration"])
                break
            assert cancelled == 6
            assert seen == list(range(1, len(seen) + 1)), (cls.__name__, seen)  # no iteration lost or repeated
            assert len(seen) >= 2, (cls.__name__, seen)
            learner = algo.learner.get_weights().vector
            for worker in algo.workers.workers:  # the workers have the learner's weights again
                assert np.array_equal((await worker.get_weights()).vector, learner) or cls is not PPO


async def test_an_algorithm_runs_once() -> None:
    algo = PPO(PPOConfig(num_workers=0, **SMALL, train_batch_size=64, minibatch_size=32))
    async with algo:
        async for _ in algo.train():
            break
    with pytest.raises(ClosedError, match=r"has run once already.*PPO\.restore"):
        async with algo:
            pass
