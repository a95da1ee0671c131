"""Bad input fails before any process starts; the CLI writes a run folder."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

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


async def test_workers_run_at_the_configured_niceness() -> None:
    """Rollout workers are batch work: by default they yield the CPU to the driver (nice 15)."""
    own = os.nice(0)
    for fields, expected in [({}, 15), ({"worker_niceness": 4}, 4)]:
        config = PPOConfig(num_workers=2, num_envs_per_worker=1, rollout_fragment_length=8, **fields)
        async with PPO(config) as algo:
            pids = [w.pid for w in algo.workers.workers]
            assert all(p not in (None, os.getpid()) for p in pids)
            assert [os.getpriority(os.PRIO_PROCESS, p) for p in pids] == [max(expected, own)] * 2  # type: ignore[arg-type]
    assert os.nice(0) == own  # the driver itself is left alone


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
    with pytest.raises(ConfigError, match="every policy needs an agent"):
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
    out = _cli("train", "ppo", "--input", "data", cwd=tmp_path)
    assert out.stderr.strip() == ("asyncflow: error: --input: ppo learns from an env; these learn from a dataset: "
                                  "bc, cql, marwil")  # fmt: skip
    out = _cli("train", "bc", "--input", "nowhere", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == "asyncflow: error: input: nowhere does not exist"


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
    assert params["rollouts"]["num_workers"] == 1 and params["rollouts"]["num_envs_per_worker"] == 4
    with open(run / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert int(rows[-1]["num_env_steps_sampled"]) >= 2000


@pytest.mark.parametrize(("signum", "code", "said"), [(signal.SIGINT, 130, "interrupted"),
                                                     (signal.SIGTERM, 143, "terminated")])  # fmt: skip
def test_cli_ctrl_c_or_sigterm_stops_cleanly_and_says_where_results_are(
    tmp_path: Path, signum: int, code: int, said: str
) -> None:
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
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    (run,) = tmp_path.iterdir()
    assert f"{said}; workers stopped. Results so far are in {run}" in err
    assert "Traceback" not in err and "leaked" not in err  # stopped in order, not cleaned up after
    assert our_segments(proc.pid) == []
    with open(run / "progress.csv") as f:
        assert len(list(csv.DictReader(f))) >= 2
    assert os.path.exists(run / "params.json")


def _one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    return out.stderr.strip()


def test_bad_env_modules_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "broken_envs.py").write_text("raise RuntimeError('this module is broken')\n")
    (tmp_path / "raising_envs.py").write_text(textwrap.dedent(
        """
        import gymnasium as gym

        class Raises(gym.Wrapper):
            def __init__(self):
                super().__init__(gym.make("CartPole-v1"))
                self.n = 0

            def step(self, action):
                self.n += 1
                if self.n == 30:
                    raise ValueError(f"bad action {action} at step {self.n}")
                return self.env.step(action)

        def raises():
            return Raises()

        def fails_to_build():
            raise KeyError("no such level")
        """
    ))  # fmt: skip
    cases = {
        "x" * 300 + ":make": "env: no module 'xxx",
        "no_such_module_here:make": "env: no module 'no_such_module_here' on the Python path",
        "broken_envs:make": "env: importing 'broken_envs' failed: RuntimeError: this module is broken",
        "raising_envs:fails_to_build": "KeyError: 'no such level' (in fails_to_build, raising_envs.py:19)",
        "raising_envs:raises": "ValueError: bad action",
    }
    for env, expected in cases.items():
        args = ["train", "ppo", "--env", env, "--num-workers", "1", "--stop-timesteps", "5000", "--logdir", "runs"]
        line = _one_line_error(_cli(*args, cwd=tmp_path))
        assert expected in line, line
        if env == "raising_envs:raises":  # raised in a worker: the env's own frame, from the remote traceback
            assert "(in step, raising_envs.py:12)" in line and "--debug" in line, line
    debug = _cli("train", "ppo", "--env", "broken_envs:make", "--debug", cwd=tmp_path)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_a_300_character_env_function_name_still_gets_a_run_folder(tmp_path: Path) -> None:
    name = "make_" + "x" * 295
    (tmp_path / "long_envs.py").write_text(
        f"import gymnasium as gym\n\ndef {name}():\n    return gym.make('CartPole-v1')\n"
    )
    out = _cli("train", "ppo", "--env", f"long_envs:{name}", "--num-workers", "1", "--stop-timesteps", "300",
               "--logdir", "runs", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr  # the folder name is cut short, not ENAMETOOLONG
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("ppo_make_xxx") and len(run.name) < 120


def test_gymnasiums_own_module_colon_env_id_form_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "my_registry.py").write_text(
        "import gymnasium as gym\n\ngym.register('MyShortPole-v0', entry_point='gymnasium.envs.classic_control:"
        "CartPoleEnv', max_episode_steps=40)\n"
    )
    out = _cli("train", "ppo", "--env", "my_registry:MyShortPole-v0", "--num-workers", "1", "--stop-timesteps",
               "1000", "--logdir", "runs", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "training ppo on my_registry:MyShortPole-v0" in out.stdout
    out = _cli("train", "ppo", "--env", "my_registry:NotRegistered-v0", cwd=tmp_path)
    assert "module 'my_registry' has no 'NotRegistered-v0'" in _one_line_error(out)


def _private_read_only(directory: Path) -> list[str] | None:
    """A command prefix that runs in a mount namespace where ``directory`` is read-only (root only)."""
    import shutil

    if shutil.which("unshare") is None:
        return None
    mount = f"mount --bind {directory} {directory} && mount -o remount,ro,bind {directory}"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"{mount} && ! touch {directory}/probe"],
                           capture_output=True, timeout=30)  # fmt: skip
    # cd after the mount: a working directory entered before it is the writable one beneath.
    return (
        ["unshare", "-m", "sh", "-c", f'{mount} && cd {directory} && exec "$0" "$@"'] if probe.returncode == 0 else None
    )


def test_a_read_only_working_directory_is_a_one_line_error(tmp_path: Path) -> None:
    out = _cli(
        "train", "ppo", *["--num-workers", "1", "--stop-timesteps", "300", "--checkpoint-every", "1"], cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    (run,) = (tmp_path / "runs").iterdir()
    checkpoint = next((run / "checkpoints").iterdir())
    read_only = tmp_path / "ro"
    read_only.mkdir()
    prefix = _private_read_only(read_only)
    if prefix is None:
        pytest.skip("needs unshare and root to make a read-only bind mount")
    for args in (["train", "ppo", "--stop-timesteps", "300"],
                 ["evaluate", str(checkpoint), "--episodes", "1", "--video", "ep.gif"],
                 ["plot", str(run), "-o", "curve.png"]):  # fmt: skip
        out = subprocess.run([*prefix, sys.executable, "-m", "asyncflow.cli", *args], cwd=read_only,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        line = _one_line_error(out)
        assert "Read-only file system" in line, line


def _torch_loading(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as f:
        return "libtorch" in f.read()


def _fork_server_started(pid: int) -> bool:
    for child in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{child}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{child}/cmdline") as f:
                cmdline = f.read()
        except OSError:
            continue
        if parent == pid and "forkserver" in cmdline:
            return True
    return False


@pytest.mark.timeout(180)
@pytest.mark.parametrize("phase", [_torch_loading, _fork_server_started], ids=["importing_torch", "fork_server_up"])
def test_ctrl_c_in_the_first_seconds_is_one_quiet_line(tmp_path: Path, phase: Any) -> None:
    """SIGINT to the whole process group, as a terminal's Ctrl-C, at a given phase of the start
    (watched in /proc, not guessed with a sleep): the driver, the fork server and the workers
    (whichever exist by then) all get it; only the driver speaks, in one line."""
    import signal
    import time

    with subprocess.Popen([sys.executable, "-m", "asyncflow.cli", "train", "ppo", "--logdir", "runs"], cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:  # fmt: skip
        deadline = time.monotonic() + 120
        while not phase(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1].startswith("asyncflow: interrupted"), err


def test_set_and_grid_values_read_yaml_words_as_config_files_do() -> None:
    from asyncflow._fields import parse_value

    assert [parse_value(w) for w in ("true", "False", "null", "~", "True", "None")] == [
        True,
        False,
        None,
        None,
        True,
        None,
    ]
    assert (
        parse_value("1e-3") == 1e-3
        and parse_value("(64, 64)") == (64, 64)
        and parse_value("CartPole-v1") == "CartPole-v1"
    )
    config = PPOConfig(env="Pendulum-v1", use_sde=parse_value("true"), vf_clip_param=parse_value("null"))
    assert config.use_sde is True and config.vf_clip_param is None
