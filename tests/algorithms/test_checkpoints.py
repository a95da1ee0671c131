"""Checkpoints: a restored run continues the same curve; bad files are clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asyncflow import CheckpointError
from asyncflow.algorithms import DQN, PPO, Algorithm, ApexDQN, ApexDQNConfig, DQNConfig, PPOConfig
from asyncflow.algorithms._checkpoint import read_checkpoint, write_checkpoint

# One local worker (num_workers=0), 2 envs x 64 steps = one 128-row training batch.
PPO_LOCAL = dict(num_workers=0, num_envs_per_worker=2, rollout_fragment_length=64, train_batch_size=128,
                 minibatch_size=64, num_epochs=2, seed=3)  # fmt: skip
COMPARED = ["training_iteration", "num_env_steps_sampled", "num_env_steps_trained", "episode_return_mean",
            "episodes_total", "episode_len_mean", "learner", "counters"]  # fmt: skip


async def _iterations(algo: Algorithm, n: int) -> list[dict[str, Any]]:
    out = []
    async for result in algo.train():
        out.append(result)
        if len(out) == n:
            break
    return out


_RESUME = textwrap.dedent(
    """
    import asyncio, json, sys
    import numpy as np
    from asyncflow.algorithms import Algorithm

    async def main():
        async with Algorithm.restore(sys.argv[1], trust_code=True) as algo:
            async for result in algo.train():
                break
            np.save(sys.argv[2], algo.learner.get_weights().vector)
        keep = {COMPARED}
        json.dump({k: result[k] for k in keep}, open(sys.argv[3], "w"))

    asyncio.run(main())
    """
).replace("{COMPARED}", repr(COMPARED))


@pytest.mark.timeout(120)
async def test_a_restored_run_continues_exactly_like_one_that_never_stopped(tmp_path: Path) -> None:
    async with PPO(PPOConfig(**PPO_LOCAL)) as algo:
        straight = await _iterations(algo, 4)
        straight_weights = algo.learner.get_weights().vector.copy()
    async with PPO(PPOConfig(**PPO_LOCAL)) as algo:
        first = await _iterations(algo, 3)
        saved = await algo.save(tmp_path / "run" / "checkpoint_000003.ckpt")
    assert [r["num_env_steps_sampled"] for r in first] == [r["num_env_steps_sampled"] for r in straight[:3]]
    assert saved.exists() and not [p for p in saved.parent.iterdir() if p.name.startswith(".")]
    # A fresh process: nothing survives from this one but the file.
    out = subprocess.run(
        [sys.executable, "-c", _RESUME, str(saved), str(tmp_path / "w.npy"), str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    resumed = json.loads((tmp_path / "r.json").read_text())
    expected = json.loads(json.dumps({k: straight[3][k] for k in COMPARED}))
    assert resumed == expected
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), straight_weights)


async def test_the_replay_buffer_travels_with_a_checkpoint(tmp_path: Path) -> None:
    config = DQNConfig(num_workers=1, learning_starts=200, timesteps_per_iteration=200, seed=1)
    async with DQN(config) as algo:
        before = await _iterations(algo, 3)
        path = await algo.save(tmp_path / "dqn.ckpt")
        buffer_rows, weights = len(algo.resources), algo.learner.get_weights().vector.copy()
        target = algo.learner.target.state_dict()["advantage.0.weight"].clone()
    restored = DQN.restore(path)
    async with restored:
        assert len(restored.resources) == buffer_rows > 0
        np.testing.assert_array_equal(restored.learner.get_weights().vector, weights)
        np.testing.assert_array_equal(restored.learner.target.state_dict()["advantage.0.weight"], target)
        epsilon = await restored.workers.workers[0].get_state()  # the worker's schedule position came back too
        assert epsilon
        after = await _iterations(restored, 1)
    assert after[0]["training_iteration"] == 4
    assert after[0]["num_env_steps_sampled"] > before[-1]["num_env_steps_sampled"]
    without = DQNConfig(num_workers=0, learning_starts=100, timesteps_per_iteration=100, checkpoint_replay_buffer=False)
    async with DQN(without) as algo:
        await _iterations(algo, 1)
        path = await algo.save(tmp_path / "small.ckpt")
    async with DQN.restore(path) as restored:
        assert len(restored.resources) == 0  # saved without its buffer: it refills


@pytest.mark.timeout(120)
async def test_replay_shards_are_saved_and_restored(tmp_path: Path) -> None:
    config = ApexDQNConfig(num_workers=1, learning_starts=64, timesteps_per_iteration=256, seed=2)
    async with ApexDQN(config) as algo:
        await _iterations(algo, 2)
        path = await algo.save(tmp_path / "apex.ckpt")
    # What the file holds (the store branch keeps adding after the loop stops pulling results).
    sizes = [len(buffer) for buffer in read_checkpoint(path)["extra"]]
    assert all(size > 0 for size in sizes)
    async with Algorithm.restore(path) as restored:
        assert isinstance(restored, ApexDQN)
        assert [(await shard.stats())["size"] for shard in restored.resources.workers] == sizes
        await _iterations(restored, 1)


async def test_foreign_damaged_and_mismatched_files_are_clear_errors(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.ckpt"
    foreign.write_bytes(os.urandom(200))
    with pytest.raises(CheckpointError, match="is not an asyncflow checkpoint"):
        PPO.restore(foreign)
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        PPO.restore(tmp_path / "missing.ckpt")
    async with PPO(PPOConfig(**PPO_LOCAL)) as algo:
        good = await algo.save(tmp_path / "good.ckpt")
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(CheckpointError, match="damaged"):
        PPO.restore(truncated)
    with pytest.raises(CheckpointError, match="holds a 'ppo' checkpoint, not 'dqn'"):
        DQN.restore(good)
    assert isinstance(Algorithm.restore(good), PPO)


def test_a_failed_save_leaves_the_previous_checkpoint_whole(tmp_path: Path) -> None:
    import threading

    path = write_checkpoint(tmp_path / "c.ckpt", {"algorithm": "ppo", "n": 1})
    with pytest.raises(TypeError):
        write_checkpoint(path, {"algorithm": "ppo", "lock": threading.Lock()})  # cannot be pickled
    assert read_checkpoint(path)["n"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.ckpt"]  # no temporary file left


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", ["sac", "td3", "appo", "two_trainer"])
async def test_every_kind_of_learner_round_trips(tmp_path: Path, name: str) -> None:
    from asyncflow.algorithms import ALGORITHMS
    from asyncflow.rl.data.state import get_state

    cls = ALGORITHMS[name]
    fields: dict[str, object] = {"num_workers": 1, "timesteps_per_iteration": 256}
    if name in ("sac", "td3"):
        fields["learning_starts"] = 128
    async with cls(cls.config_class(**fields)) as algo:
        await _iterations(algo, 2)
        path = await algo.save(tmp_path / f"{name}.ckpt")
    # Compare with what the file holds: an asynchronous plan (APPO, the two-trainer)
    # keeps training in the background after the loop above stops pulling results.
    payload = read_checkpoint(path)
    saved, counters = payload["learner"], payload["ctx"]["counters"]
    async with Algorithm.restore(path) as restored:
        again = get_state(restored.learner)
        assert restored.ctx.counters == counters

        def flat(state: object) -> list[np.ndarray]:
            # Every tensor of the state, in order: modules, optimizers, loose tensors.
            import torch

            out: list[np.ndarray] = []
            stack = [state]
            while stack:
                item = stack.pop()
                if isinstance(item, torch.Tensor):
                    out.append(item.detach().numpy().copy())
                elif isinstance(item, dict):
                    stack.extend(item[k] for k in sorted(item, key=str))
                elif isinstance(item, list | tuple):
                    stack.extend(item)
            return out

        tensors = flat(saved)
        assert len(tensors) >= 8  # weights and optimizer moments at least
        for a, b in zip(tensors, flat(again), strict=True):
            np.testing.assert_array_equal(a, b)
        after = await _iterations(restored, 1)
    assert after[0]["training_iteration"] == 3


def _overwrite(path: Path, needle: bytes, out: Path) -> Path:
    """A copy of ``path`` with 64 bytes overwritten where ``needle`` starts."""
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at > 0, "the bytes to damage are not in the file"
    data[at : at + 64] = bytes(64)
    out.write_bytes(bytes(data))
    return out


async def test_a_checkpoint_damaged_in_place_is_a_checksum_mismatch(tmp_path: Path) -> None:
    """64 bytes overwritten in the weights, the optimizer moments or a worker's state used to
    load and evaluate without a word."""
    async with PPO(PPOConfig(**PPO_LOCAL)) as algo:
        await _iterations(algo, 1)
        good = await algo.save(tmp_path / "good.ckpt")
        weights = algo.learner.get_weights().vector.tobytes()
        moments = algo.learner.optimizer.exp_avg[0].numpy().tobytes()
        worker_state = await algo.workers.workers[0].get_state()
    for name, needle in [
        ("weights", weights),
        ("moments", moments),
        ("worker", worker_state["exact"].blob[len(worker_state["exact"].blob) // 2 :]),
    ]:
        damaged = _overwrite(good, needle[:64], tmp_path / f"{name}.ckpt")
        with pytest.raises(CheckpointError, match="checksum mismatch"):
            PPO.restore(damaged)
        with pytest.raises(CheckpointError, match="checksum mismatch"):
            from asyncflow.evaluate import evaluate

            evaluate(damaged, episodes=1)
    assert isinstance(PPO.restore(good), PPO)


def test_a_sound_checkpoint_whose_env_module_is_missing_says_so(tmp_path: Path) -> None:
    """Not "damaged": users delete damaged files."""
    from asyncflow import CheckpointImportError

    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "my_gone_envs.py").write_text(
        "import gymnasium as gym\ndef make():\n    return gym.make('CartPole-v1')\n"
    )
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path.insert(0, {str(module_dir)!r})
        import my_gone_envs
        from asyncflow.algorithms import PPO, PPOConfig

        async def main():
            async with PPO(PPOConfig(env=my_gone_envs.make, num_workers=0)) as algo:
                await algo.save({str(tmp_path / "ok.ckpt")!r})

        asyncio.run(main())
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    with pytest.raises(CheckpointImportError, match="sound checkpoint, but it needs module 'my_gone_envs'") as caught:
        read_checkpoint(tmp_path / "ok.ckpt")
    assert caught.value.module == "my_gone_envs"
    out = subprocess.run([sys.executable, "-m", "asyncflow.cli", "evaluate", str(tmp_path / "ok.ckpt")],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "needs module 'my_gone_envs'" in out.stderr and "damaged" not in out.stderr
