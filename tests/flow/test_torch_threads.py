"""How many torch threads a run's learner and its event loop's thread use."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

from asyncflow import algorithms as A
from asyncflow.flow.learner_thread import loop_thread_on_one_torch_thread
from asyncflow.session import learner_threads

CORES = min(len(os.sched_getaffinity(0)), 8)


def test_the_loop_thread_runs_one_torch_thread_until_its_last_run_closes() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with loop_thread_on_one_torch_thread():
            assert torch.get_num_threads() == 1
            with loop_thread_on_one_torch_thread():  # a second run in the same loop
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 1  # the first is still open
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def _learner(model: torch.nn.Module) -> SimpleNamespace:
    return SimpleNamespace(model=model)


def test_the_learner_takes_every_core_for_a_big_or_convolutional_model() -> None:
    small = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Linear(64, 64))
    big = torch.nn.Sequential(torch.nn.Linear(4, 400), torch.nn.Linear(400, 300))  # 122k parameters
    conv = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3))
    assert learner_threads([_learner(small)]) == 1
    assert learner_threads([_learner(big)]) == CORES
    assert learner_threads([_learner(conv)]) == CORES
    assert learner_threads([_learner(small), _learner(big)]) == CORES  # any of a run's learners


@pytest.mark.parametrize(("hidden", "threads"), [((64, 64), 1), ((400, 300), CORES)])
async def test_a_run_sets_both_counts_and_puts_the_loops_back(hidden: tuple[int, int], threads: int) -> None:
    before = torch.get_num_threads()
    config = A.TD3Config(env="Pendulum-v1", num_workers=0, hidden=hidden, learning_starts=64,
                         timesteps_per_iteration=128, train_batch_size=32, seed=0)  # fmt: skip
    async with A.TD3(config) as algo:
        assert torch.get_num_threads() == 1  # the loop's thread, while the run is open
        result = await anext(algo.train())
        seen = await algo.ctx.learner_thread.run(torch.get_num_threads)
    assert result["num_env_steps_trained"] > 0
    assert seen == threads
    assert torch.get_num_threads() == before
