"""Trust: a checkpoint runs nothing it holds unless the caller says so, a save cannot be
redirected through a symlink, and one run owns a run folder. Each test crafts what a
hostile file or a careless neighbour would, and checks that nothing happened (a marker file
that the hostile code would create stays absent)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from asyncflow import CheckpointError, CheckpointTrustError, ConfigError
from asyncflow.algorithms import PPO, Algorithm, PPOConfig
from asyncflow.algorithms import _checkpoint as checkpoint_file
from asyncflow.algorithms._checkpoint import LEGACY_MAGIC, read_checkpoint, write_checkpoint
from asyncflow.experiment import RunLock
from asyncflow.rl.data.state_tree import Pickled

PPO_LOCAL = dict(num_workers=0, num_envs_per_worker=2, rollout_fragment_length=32, train_batch_size=64,
                 minibatch_size=32, num_epochs=1, seed=3)  # fmt: skip


class _RunsACommand:
    """What a hostile pickle holds: loading it runs a shell command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (self.command,)


def _hostile(marker: Path) -> bytes:
    return pickle.dumps(_RunsACommand(f"touch {marker}"))


def _cli(*args: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None) -> Any:
    return subprocess.run([sys.executable, "-m", "asyncflow.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def _one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    return out.stderr.strip()


async def _saved_ppo(path: Path) -> Path:
    async with PPO(PPOConfig(**PPO_LOCAL)) as algo:
        async for _ in algo.train():
            break
        return await algo.save(path)


def _edit_state(path: Path, edit: Any) -> None:
    """Rewrite the JSON state of a checkpoint with ``edit(state)``, checksum included, as a
    crafter who knows the format would (the checksum is not a signature)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    metadata = header.pop("__metadata__")
    state = json.loads(metadata["state"])
    edit(state)
    metadata["state"] = json.dumps(state)
    start = 8 + length
    order = sorted(header, key=lambda n: header[n]["data_offsets"][0])
    metadata["sha256"] = checkpoint_file._digest(
        metadata["config"], metadata["state"], header,
        (memoryview(data)[start + header[n]["data_offsets"][0] : start + header[n]["data_offsets"][1]] for n in order),
    )  # fmt: skip
    new_header = json.dumps({"__metadata__": metadata, **header}, separators=(",", ":")).encode()
    new_header += b" " * (-len(new_header) % 8)
    path.write_bytes(struct.pack("<Q", len(new_header)) + new_header + data[start:])


def test_a_pickle_checkpoint_runs_nothing_unless_trusted(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    crafted = run / "checkpoints" / "checkpoint_000001.ckpt"
    body = pickle.dumps({"algorithm": "ppo", "config": _RunsACommand(f"touch {marker}")})
    crafted.write_bytes(LEGACY_MAGIC + f"2 sha256={hashlib.sha256(body).hexdigest()}\n".encode() + body)

    for load in (lambda: Algorithm.restore(crafted), lambda: PPO.restore(crafted), lambda: read_checkpoint(crafted)):
        with pytest.raises(CheckpointTrustError, match=r"trust_code=True \(--trust-code\)"):
            load()
    for command in (
        ["evaluate", str(crafted)],
        ["export", str(crafted), "-o", "p.pt"],
        ["train", "--resume", str(run)],
    ):
        message = _one_line(_cli(*command, cwd=tmp_path))
        assert "--trust-code" in message and "a pickle" in message, message
    assert not marker.exists()
    read_checkpoint(crafted, trust_code=True)  # the file really was hostile: trusted, it runs
    assert marker.exists()


async def test_code_inside_the_new_format_waits_for_trust(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    good = await _saved_ppo(tmp_path / "good.ckpt")

    # A config whose env is a pickle: refused, naming the field and the option.
    payload = read_checkpoint(good, trust_code=True)  # our own file: its pickles can be written back
    payload["config"]["env"] = Pickled(_hostile(marker), "env: a function with no import path")
    env_code = write_checkpoint(tmp_path / "env.ckpt", payload)
    with pytest.raises(CheckpointTrustError, match=r"config field env: .*--trust-code"):
        Algorithm.restore(env_code)

    # A worker's environments mid-episode that are a hostile pickle: not loaded, and the run
    # resumes from the learner, the counters and new episodes.
    payload = read_checkpoint(good, trust_code=True)  # our own file: its pickles can be written back
    payload["workers"][0]["exact"] = Pickled(_hostile(marker), "the environments mid-episode")
    worker_code = write_checkpoint(tmp_path / "worker.ckpt", payload)
    async with Algorithm.restore(worker_code) as resumed:
        async for result in resumed.train():
            assert result["training_iteration"] == 2
            break
    assert not marker.exists()

    # The standard library by import path (a model that is os.system): refused.
    payload = read_checkpoint(good, trust_code=True)  # our own file: its pickles can be written back
    payload["config"]["model"] = os.system
    with pytest.raises(CheckpointError, match="standard library"):
        Algorithm.restore(write_checkpoint(tmp_path / "stdlib.ckpt", payload))

    # The standard library by a plain string where a config takes code (a model, an env, a
    # policy mapping would be imported and called): refused as the import paths are.
    for field, value in [("model", "os:system"), ("env", "os:getcwd"), ("env", "builtins:print")]:
        payload = read_checkpoint(good, trust_code=True)  # our own file: its pickles can be written back
        payload["config"][field] = value
        with pytest.raises(CheckpointError, match=rf"config\.{field} names '{value}', in Python's standard library"):
            Algorithm.restore(write_checkpoint(tmp_path / "stdlib_string.ckpt", payload))

    # Hand-made JSON: an import path where only data belongs, and an object of a class
    # that is not on the list. Neither is followed.
    for name, edit, said in [
        ("import.ckpt", lambda s: s["ctx"].update(x={"$import": "asyncflow.cli:main"}), "where only data belongs"),
        ("object.ckpt", lambda s: s["ctx"].update(x={"$object": "Popen", "id": 99, "state": {}}), "object 'Popen'"),
    ]:
        crafted = tmp_path / name
        crafted.write_bytes(good.read_bytes())
        _edit_state(crafted, edit)
        with pytest.raises(CheckpointError, match=said):
            Algorithm.restore(crafted)
    assert not marker.exists()


def test_the_checkpoint_is_a_safetensors_file(tmp_path: Path) -> None:
    """Its arrays are readable by safetensors itself; what is not an array is JSON metadata."""
    safetensors = pytest.importorskip("safetensors.numpy")
    import asyncio

    path = asyncio.run(_saved_ppo(tmp_path / "c.ckpt"))
    arrays = safetensors.load_file(str(path))
    weights = [name for name in arrays if name.startswith("learner/")]
    assert weights and all(arrays[name].dtype.kind in "fiub" for name in arrays)
    from safetensors import safe_open

    with safe_open(str(path), "np") as f:
        metadata = f.metadata()
    assert metadata["format"] == "asyncflow-checkpoint" and json.loads(metadata["config"])["env"] == "CartPole-v1"


async def test_a_save_cannot_be_redirected_through_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    run = tmp_path / "run"
    run.mkdir()
    # The name the temporary file used to have, and the checkpoint itself, both made symlinks
    # to the victim by someone who can write to the folder.
    os.symlink(victim, run / f".c.ckpt.tmp-{os.getpid()}")
    os.symlink(victim, run / "c.ckpt")
    saved = await _saved_ppo(run / "c.ckpt")
    assert victim.read_text() == "precious"
    assert saved.is_file() and not saved.is_symlink()
    assert saved.stat().st_mode & 0o777 == 0o600
    assert isinstance(PPO.restore(saved), PPO)
    assert sorted(p.name for p in run.iterdir()) == [".c.ckpt.tmp-" + str(os.getpid()), "c.ckpt"]


_HOLD = """
import sys, time
from pathlib import Path
from asyncflow.experiment import RunLock
with RunLock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_one_run_owns_a_run_folder(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    with holder:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(ConfigError, match=rf"is in use by process {holder.pid} on .*one run writes"):
            RunLock(tmp_path).acquire()
        holder.kill()
    with RunLock(tmp_path):  # its owner died: the kernel dropped the lock
        assert f"process {os.getpid()}" in (tmp_path / ".lock").read_text()


QUICK = ["--num-workers", "1", "--set", "num_envs_per_worker=2", "--set", "rollout_fragment_length=64",
         "--set", "train_batch_size=128"]  # fmt: skip


@pytest.mark.timeout(240)
def test_two_resumes_of_one_run_folder_the_second_is_refused(tmp_path: Path) -> None:
    out = _cli("train", "ppo", *QUICK, "--stop-timesteps", "256", "--checkpoint-every", "1", "--logdir", "runs",
               cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (run,) = (tmp_path / "runs").iterdir()
    resume = [sys.executable, "-m", "asyncflow.cli", "train", "--resume", str(run), "--stop-time", "120"]
    first = subprocess.Popen(resume, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with first:
        assert first.stdout is not None
        for line in first.stdout:  # its lock is taken before the run starts, and so before this line
            if line.startswith("iter"):
                break
        second = _cli("train", "--resume", str(run), "--stop-timesteps", "100000", cwd=tmp_path)
        first.terminate()
        first.communicate(timeout=60)
    assert f"is in use by process {first.pid}" in _one_line(second)
    results = [json.loads(line) for line in (run / "result.jsonl").read_text().splitlines()]
    iterations = [r["training_iteration"] for r in results]
    assert iterations == list(range(1, len(iterations) + 1))  # one run's logs, nothing mixed in


@pytest.mark.timeout(240)
def test_resume_points_at_the_newest_sound_checkpoint_and_takes_a_file(tmp_path: Path) -> None:
    out = _cli("train", "ppo", *QUICK, "--stop-timesteps", "384", "--checkpoint-every", "1", "--logdir", "runs",
               cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (run,) = (tmp_path / "runs").iterdir()
    newest = run / "checkpoints" / "checkpoint_000003.ckpt"
    newest.write_bytes(newest.read_bytes()[:-100])  # cut short, as a full disk would
    message = _one_line(_cli("train", "--resume", str(run), cwd=tmp_path))
    older = run / "checkpoints" / "checkpoint_000002.ckpt"
    assert "the newest sound one is" in message and f"--resume {older}" in message, message

    out = _cli("train", "--resume", str(older), "--stop-timesteps", "512", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"resuming ppo from {older}" in out.stdout
    results = [json.loads(line) for line in (run / "result.jsonl").read_text().splitlines()]
    assert [r["training_iteration"] for r in results] == [1, 2, 3, 4]  # 3 was logged again, once
    assert (run / "checkpoints" / "replaced" / "checkpoint_000003.ckpt").exists()  # moved aside, not deleted
    message = _one_line(_cli("train", "--resume", str(tmp_path / "nowhere.ckpt"), cwd=tmp_path))
    assert "no such run folder or checkpoint file" in message


@pytest.mark.timeout(180)
def test_a_reader_that_goes_away_does_not_stop_the_run(tmp_path: Path) -> None:
    """``asyncflow train ... | head -1``: the run used to die of the broken pipe, before its last
    checkpoint; it now trains to its stop condition with everything in the run folder."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "asyncflow.cli", "train", "ppo", *QUICK, "--stop-timesteps", "1280",
         "--checkpoint-every", "100", "--logdir", "runs"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    with proc:
        proc.stdout.readline()
        proc.stdout.close()  # the reader is gone
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=150) == 0, err
    assert "Broken pipe" not in err and "Traceback" not in err, err
    (run,) = (tmp_path / "runs").iterdir()
    assert (run / "checkpoints" / "checkpoint_000010.ckpt").exists()  # the final one, at the stop


def test_the_cli_leaves_no_multiprocessing_folder_in_tmp(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = _cli("train", "ppo", *QUICK, "--stop-timesteps", "128", "--logdir", "runs", cwd=tmp_path,
               env={**os.environ, "TMPDIR": str(tmp)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert list(tmp.iterdir()) == []


def test_what_fails_at_start_fails_before_the_run_folder_is_made(tmp_path: Path) -> None:
    # No tensorboard package: a shadow one that cannot be imported.
    shadow = tmp_path / "shadow" / "tensorboard"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no tensorboard here')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shadow")}
    message = _one_line(_cli("train", "ppo", *QUICK, "--tensorboard", "--logdir", "runs", cwd=tmp_path, env=env))
    assert "--tensorboard needs the tensorboard package" in message
    # No Ray cluster at the address given.
    message = _one_line(_cli("train", "ppo", *QUICK, "--address", "127.0.0.1:9", "--logdir", "runs", cwd=tmp_path))
    assert "no Ray cluster answers" in message
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


def test_stop_conditions_must_be_reachable_numbers(tmp_path: Path) -> None:
    from asyncflow.experiment import Stop

    for fields, said in [({"reward": float("nan")}, "--stop-reward must be a finite number"),
                         ({"timesteps": -5}, "--stop-timesteps must be >= 1"),
                         ({"seconds": -1.0}, "--stop-time must be a number of seconds > 0"),
                         ({"seconds": float("nan")}, "--stop-time")]:  # fmt: skip
        with pytest.raises(ConfigError, match=said):
            Stop(**fields)  # type: ignore[arg-type]
    assert Stop(reward=-200.0).reward == -200.0  # Pendulum's returns are negative
    started = time.perf_counter()
    message = _one_line(_cli("train", "ppo", "--stop-time", "nan", "--logdir", "runs", cwd=tmp_path))
    assert "--stop-time" in message and not (tmp_path / "runs").exists()
    assert time.perf_counter() - started < 60


LEGACY = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["ppo", "dqn"])
async def test_checkpoints_of_format_2_load_behind_the_opt_in_and_go_on(name: str) -> None:
    """Checkpoints written by the asyncflow before format 3 (a pickle, with a flat config and
    the modules of its day): refused without trust_code; with it, the config is read as the
    shorthands its flat fields are, the learner and counters come back, and the workers,
    pickled in another layout, start new episodes with the learner's weights."""
    path = LEGACY / f"{name}_cartpole_format2.ckpt"
    with pytest.raises(CheckpointTrustError, match="format 2"):
        Algorithm.restore(path)
    saved = read_checkpoint(path, trust_code=True)
    algo = Algorithm.restore(path, trust_code=True)
    assert algo.name == name and algo.config.env == "CartPole-v1" and algo.config.rollouts.num_workers == 0
    with pytest.warns(UserWarning, match="start new episodes with the learner's weights"):
        async with algo:
            weights = algo.learner.get_weights().vector.copy()
            async for result in algo.train():  # noqa: B007 - the first iteration is the one checked
                break
    assert result["training_iteration"] == saved["ctx"]["counters"]["training_iteration"] + 1
    assert result["num_env_steps_sampled"] > saved["ctx"]["counters"]["num_env_steps_sampled"]
    assert weights.shape == algo.learner.get_weights().vector.shape and weights.any()
