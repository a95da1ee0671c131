"""A hanging env.step() never hangs the run: the worker is killed and restarted,
and with no restart left the run fails with WorkerTimeoutError."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from asyncflow import WorkerTimeoutError
from asyncflow.algorithms import IMPALA, PPO, IMPALAConfig, PPOConfig
from asyncflow.rl.sampling.worker_set import WorkerTimeoutWarning

from ..conftest import actor_children, our_segments


class HangOnce(gym.Wrapper):  # type: ignore[type-arg]
    """CartPole whose step hangs (for an hour) at its 100th step, in the one worker that
    creates ``marker`` first (an atomic claim), so the restarted worker steps normally;
    with no marker, in every worker."""

    def __init__(self, marker: str | None) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.marker, self.steps = marker, 0

    def _claim(self) -> bool:
        if self.marker is None:
            return True
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            return True
        except FileExistsError:
            return False

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == 100 and self._claim():
            time.sleep(3600)
        return self.env.step(action)


SMALL = {"num_workers": 2, "num_envs_per_worker": 1, "rollout_fragment_length": 32, "sample_timeout_s": 5.0}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["ppo", "impala"])
async def test_a_hanging_worker_is_killed_restarted_and_training_goes_on(name: str, tmp_path: Path) -> None:
    env = functools.partial(HangOnce, str(tmp_path / "hung"))
    algo = (
        PPO(PPOConfig(env=env, train_batch_size=64, **SMALL))
        if name == "ppo"
        else IMPALA(IMPALAConfig(env=env, timesteps_per_iteration=64, **SMALL))
    )
    with pytest.warns(WorkerTimeoutWarning, match=r"worker '.*-worker-\d' \(pid \d+\) did not answer sample\(\)"):
        async with algo:
            async for result in algo.train():
                if result["num_env_steps_sampled"] >= 600:
                    break
    assert (tmp_path / "hung").exists()  # it did hang
    assert result["num_workers_restarted"] == 1 and algo.workers.timeouts == 1
    assert actor_children() == [] and our_segments(os.getpid()) == []


@pytest.mark.timeout(60)
async def test_a_worker_that_keeps_hanging_with_no_restart_left_is_a_clear_error() -> None:
    config = PPOConfig(env=functools.partial(HangOnce, None), train_batch_size=64, max_worker_restarts=0, **SMALL)
    started = time.monotonic()
    timed_out = pytest.raises(WorkerTimeoutError, match=r"sample\(\) on env 'HangOnce' took over 5 s")
    with pytest.warns(WorkerTimeoutWarning, match="it has no restart left"), timed_out as caught:
        async with PPO(config) as algo:
            async for _ in algo.train():
                pass
    assert time.monotonic() - started < 50  # seconds after the timeout, not an hour
    assert "no restart left (0 of 0 used)" in str(caught.value)
    assert actor_children() == [] and our_segments(os.getpid()) == []
