"""Bad input fails before any process starts; the CLI writes a run folder."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from asyncflow import ConfigError
from asyncflow.algorithms import (
    DQN,
    PPO,
    SAC,
    A2CConfig,
    ApexDQNConfig,
    DQNConfig,
    PPOConfig,
    SACConfig,
    TwoTrainer,
    TwoTrainerConfig,
)

from ..conftest import actor_children


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"lrr": 0.1}, "unknown field 'lrr'; did you mean 'lr'"),
        ({"num_workers": -1}, "num_workers: must be >= 0"),
        ({"lr": "fast"}, "lr: expected float"),
        ({"train_batch_size": 0}, "train_batch_size: must be >= 1"),
        ({"hidden": (64, 0)}, "hidden"),
        ({"gamma": 1.5}, "gamma: must be <= 1"),
    ],
)
def test_bad_config_names_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PPOConfig(**fields)  # type: ignore[arg-type]


def test_microbatch_must_fit_the_batch() -> None:
    with pytest.raises(ConfigError, match="microbatch_size"):
        A2CConfig(train_batch_size=100, microbatch_size=200)


class TextCartPole(gym.ObservationWrapper):  # type: ignore[type-arg]
    """CartPole whose observations are strings: no built-in encoder takes them."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.observation_space = gym.spaces.Text(32)

    def observation(self, observation: object) -> str:
        return str(observation)


def test_unknown_env_and_unencodable_observations_fail_before_processes() -> None:
    with pytest.raises(ConfigError, match="unknown environment 'NoSuchEnv-v0'"):
        PPO(PPOConfig(env="NoSuchEnv-v0"))
    with pytest.raises(ConfigError, match=r"observations are Text\(.*no built-in encoder.*pass model="):
        PPO(PPOConfig(env=TextCartPole))
    assert actor_children() == []


def test_algorithms_refuse_action_spaces_they_cannot_handle() -> None:
    with pytest.raises(ConfigError, match=r"DQN takes Discrete actions, not Box"):
        DQN(DQNConfig(env="Pendulum-v1"))
    with pytest.raises(ConfigError, match="SAC takes Box actions, not Discrete"):
        SAC(SACConfig(env="CartPole-v1"))
    with pytest.raises(ConfigError, match="epsilon"):
        DQNConfig(epsilon=(1.0, 2.0))
    with pytest.raises(ConfigError, match="num_replay_shards: must be >= 1"):
        ApexDQNConfig(num_replay_shards=0)
    assert actor_children() == []


def to_nowhere(agent_id: str) -> str:
    return "sac_policy"


def only_ppo(agent_id: str) -> str:
    return "ppo_policy"


def test_two_trainer_checks_its_policy_mapping_before_processes() -> None:
    with pytest.raises(ConfigError, match="'agent_0' -> 'sac_policy'"):
        TwoTrainer(TwoTrainerConfig(policy_mapping_fn=to_nowhere))
    with pytest.raises(ConfigError, match="both policies need an agent"):
        TwoTrainer(TwoTrainerConfig(policy_mapping_fn=only_ppo))
    with pytest.raises(ConfigError, match="expected a callable"):
        TwoTrainer(TwoTrainerConfig(env="CartPole-v1"))
    assert actor_children() == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asyncflow.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    out = _cli("train", "ppo", "--env", "CartPole-v1", "--set", "lrr=1", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == "asyncflow: error: PPOConfig: unknown field 'lrr'; did you mean 'lr'?"


def test_cli_takes_an_env_factory_by_module_and_name(tmp_path: Path) -> None:
    (tmp_path / "my_envs.py").write_text(
        "import gymnasium as gym\n\ndef short_cartpole():\n    return gym.make('CartPole-v1', max_episode_steps=50)\n"
    )
    out = _cli("train", "dqn", "--env", "my_envs:short_cartpole", "--num-workers", "1", "--stop-timesteps", "1500",
               "--logdir", str(tmp_path / "runs"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "training dqn on short_cartpole" in out.stdout
    out = _cli("train", "dqn", "--env", "my_envs:nothing_here", cwd=tmp_path)
    assert out.returncode == 2 and "module 'my_envs' has no 'nothing_here'" in out.stderr


def test_cli_trains_and_writes_a_run_folder(tmp_path: Path) -> None:
    out = _cli(
        "train", "ppo", "--env", "CartPole-v1", "--num-workers", "1", "--stop-timesteps", "2000",
        "--set", "num_envs_per_worker=4", "--logdir", str(tmp_path / "runs"), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "iter    1" in out.stdout and "done: num_env_steps_sampled >= 2000" in out.stdout
    (run,) = (tmp_path / "runs").iterdir()
    params = json.loads((run / "params.json").read_text())
    assert params["num_workers"] == 1 and params["num_envs_per_worker"] == 4
    with open(run / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert int(rows[-1]["num_env_steps_sampled"]) >= 2000


def test_cli_ctrl_c_stops_cleanly_and_says_where_results_are(tmp_path: Path) -> None:
    import os
    import signal

    from ..conftest import our_segments

    proc = subprocess.Popen(
        [sys.executable, "-m", "asyncflow.cli", "train", "ppo", "--env", "CartPole-v1", "--logdir", str(tmp_path)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    with proc:  # closes the pipes and reaps the process even when an assertion fails
        for line in proc.stdout:
            if line.startswith("iter    2"):
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    (run,) = tmp_path.iterdir()
    assert f"interrupted; workers stopped. Results so far are in {run}" in err
    assert "Traceback" not in err
    assert our_segments(proc.pid) == []
    with open(run / "progress.csv") as f:
        assert len(list(csv.DictReader(f))) >= 2
    assert os.path.exists(run / "params.json")
