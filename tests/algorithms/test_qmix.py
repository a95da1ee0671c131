"""QMIX and VDN on the QMIX paper's two-step game, and the team env they play."""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow.algorithms import QMIX, QMIXConfig
from asyncflow.algorithms.qmix import QMixer, greedy_return
from asyncflow.errors import ConfigError
from asyncflow.rl.envs.matrix_games import TwoStepGame
from asyncflow.rl.envs.multi_agent import MultiAgentCartPole
from asyncflow.rl.envs.team import TeamEnv


def test_the_two_step_game_pays_as_the_paper_s_table() -> None:
    env = TeamEnv(TwoStepGame)
    assert env.observation_space["obs"].shape == (2, 3) and env.observation_space["state"].shape == (3,)
    for first, second, pays in [((0, 1), (1, 1), 7.0), ((1, 0), (0, 0), 0.0), ((1, 1), (0, 1), 1.0),
                                ((1, 0), (1, 1), 8.0)]:  # fmt: skip
        obs, _ = env.reset()
        np.testing.assert_array_equal(obs["state"], [1, 0, 0])
        obs, reward, terminated, _, _ = env.step(np.array(first))
        assert reward == 0.0 and not terminated
        _, reward, terminated, _, _ = env.step(np.array(second))
        assert reward == pays and terminated


def test_the_mixer_is_monotonic_in_every_agent_s_value() -> None:
    import torch

    mixer = QMixer(num_agents=3, state_dim=4)
    q = torch.randn(64, 3, requires_grad=True)
    mixer(q, torch.randn(64, 4)).sum().backward()
    assert (q.grad >= 0).all()  # type: ignore[operator]


@pytest.mark.slow
@pytest.mark.parametrize(("mixer", "optimum"), [("qmix", 8.0), ("vdn", 7.0)])
async def test_qmix_finds_the_optimum_of_the_two_step_game_that_vdn_misses(mixer: str, optimum: float) -> None:
    # As the paper's Table 1: uniform exploration (epsilon 1) throughout, the greedy joint policy read after.
    for seed in (0, 1):
        config = QMIXConfig(env=TwoStepGame, mixer=mixer, epsilon=(1.0, 1.0), seed=seed)
        async with QMIX(config) as algo:
            async for result in algo.train():
                if result.num_env_steps_sampled >= 4_000:
                    break
            assert greedy_return(algo.learner.get_weights(), TeamEnv(TwoStepGame)) == optimum, (mixer, seed)


def test_qmix_bad_input_is_one_line() -> None:
    with pytest.raises(ConfigError, match="mixer: must be 'qmix' or 'vdn'"):
        QMIXConfig(env=TwoStepGame, mixer="sum")
    with pytest.raises(ConfigError, match="QMIX takes a multi-agent env"):
        QMIXConfig(env="CartPole-v1")
    with pytest.raises(ConfigError, match="team's agents need Discrete actions"):
        from mpe2 import simple_spread_v3

        QMIX(QMIXConfig(env=lambda: simple_spread_v3.parallel_env(continuous_actions=True)))
    with pytest.raises(ValueError, match="finished before the others"):  # agents that finish early are not a team
        env = TeamEnv(lambda: MultiAgentCartPole(2))
        env.reset(seed=0)
        for _ in range(500):
            env.step(np.array([0, 1]))
