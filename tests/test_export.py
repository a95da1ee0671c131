"""``asyncflow export``: a checkpoint's greedy policy as a TorchScript file that plain
torch (no asyncflow) loads, picking the same actions as the framework."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from asyncflow import ConfigError
from asyncflow.algorithms import ALGORITHMS, Algorithm
from asyncflow.cli import main
from asyncflow.evaluate import load_policy
from asyncflow.export import export_policy

from .toy_envs import MaskedPick

CASES = {
    "ppo-discrete": ("ppo", "CartPole-v1"),
    "ppo-box": ("ppo", "Pendulum-v1"),
    "dqn": ("dqn", "CartPole-v1"),
    "sac": ("sac", "Pendulum-v1"),
    "td3": ("td3", "Pendulum-v1"),
}

LOAD = """
import sys
import numpy as np
import torch
for path in sys.argv[1:]:
    policy = torch.jit.load(path + ".pt")
    obs = torch.as_tensor(np.load(path + ".obs.npy"))
    np.save(path + ".actions.npy", policy(obs).numpy())
assert not any(name.startswith("asyncflow") for name in sys.modules), "asyncflow was imported"
"""


def _observations(env_id: str, n: int = 500) -> np.ndarray:
    """1,000 observations: ``n`` an env really shows, from random play, and ``n`` spread wider
    (so that a barely trained network does not pick one action for all of them)."""
    env, rows, rng = gym.make(env_id), [], np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    while len(rows) < n:
        rows.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
    env.close()
    real = np.stack(rows)
    wide = rng.normal(0, 3 * (real.std(0) + 1e-3), real.shape).astype(real.dtype)
    return np.concatenate([real, wide])


async def _checkpoint(name: str, env_id: Any, path: Path) -> Path:
    cls = ALGORITHMS[name]
    fields: dict[str, Any] = {"env": env_id, "num_workers": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 64}
    names = set(cls.config_class.__dataclass_fields__)
    for key, value in (("timesteps_per_iteration", 256), ("learning_starts", 128), ("train_batch_size", 64)):
        if key in names:
            fields[key] = value
    algo: Algorithm = cls(cls.config_class(**fields))
    async with algo:
        async for _ in algo.train():
            return await algo.save(path)
    raise AssertionError("no result")


@pytest.mark.timeout(240)
async def test_exported_policies_pick_the_frameworks_greedy_actions_without_asyncflow(tmp_path: Path) -> None:
    expected = {}
    for case, (name, env_id) in CASES.items():
        ckpt = await _checkpoint(name, env_id, tmp_path / f"{case}.ckpt")
        out = export_policy(ckpt, tmp_path / f"{case}.pt")
        assert out.exists()
        obs = _observations(env_id)
        np.save(tmp_path / f"{case}.obs.npy", obs)
        _, policy = load_policy(ckpt)
        expected[case] = policy.env_actions(policy.greedy_actions(obs))
    run = subprocess.run([sys.executable, "-c", LOAD, *(str(tmp_path / c) for c in CASES)], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    for case, want in expected.items():
        got = np.load(tmp_path / f"{case}.actions.npy")
        assert got.shape == want.shape and got.dtype == want.dtype, case
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=case)
        else:
            np.testing.assert_array_equal(got, want, err_msg=case)
        if case != "dqn":  # after 256 steps DQN's Q prefers one action everywhere (a real preference)
            assert len(np.unique(got)) > 1, case  # not constant: the comparison means something


async def test_the_cli_exports_and_refuses_what_it_cannot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = await _checkpoint("ppo", "CartPole-v1", tmp_path / "ppo.ckpt")
    assert main(["export", str(ckpt), "-o", str(tmp_path / "p.pt")]) == 0
    assert "wrote" in capsys.readouterr().out and (tmp_path / "p.pt").stat().st_size > 0
    with pytest.raises(ConfigError, match="observations must be one array or a flat Dict"):
        from asyncflow.export import example_batch

        example_batch(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3))))


async def test_an_onnx_export_runs_in_onnxruntime_with_the_same_actions(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is in the test extra; not installed here")
    ckpt = await _checkpoint("ppo", "Pendulum-v1", tmp_path / "ppo.ckpt")
    assert main(["export", str(ckpt), "-o", str(tmp_path / "p.onnx"), "--format", "onnx"]) == 0
    obs = _observations("Pendulum-v1")
    got = ort.InferenceSession(str(tmp_path / "p.onnx")).run(None, {"obs": obs})[0]
    _, policy = load_policy(ckpt)
    want = policy.env_actions(policy.greedy_actions(obs))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(np.unique(got)) > 1


MASKED = """
import sys
import numpy as np
import torch
policy = torch.jit.load(sys.argv[1] + ".pt")
obs = {k: torch.as_tensor(np.load(sys.argv[1] + "." + k + ".npy")) for k in ("target", "action_mask")}
np.save(sys.argv[1] + ".actions.npy", policy(obs).numpy())
assert not any(name.startswith("asyncflow") for name in sys.modules), "asyncflow was imported"
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", ["ppo", "dqn"])
async def test_a_masked_policy_exports_with_its_mask_folded_in(tmp_path: Path, name: str) -> None:
    ckpt = await _checkpoint(name, MaskedPick, tmp_path / f"{name}.ckpt")
    export_policy(ckpt, tmp_path / f"{name}.pt")
    rng = np.random.default_rng(1)
    target = rng.integers(0, 4, 1_000)
    obs = {"target": np.eye(4, dtype=np.float32)[target], "action_mask": rng.integers(0, 2, (1_000, 4)).astype(np.int8)}
    obs["action_mask"][np.arange(1_000), target] = 1
    for key, value in obs.items():
        np.save(tmp_path / f"{name}.{key}.npy", value)
    run = subprocess.run([sys.executable, "-c", MASKED, str(tmp_path / name)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = np.load(tmp_path / f"{name}.actions.npy")
    _, policy = load_policy(ckpt)
    np.testing.assert_array_equal(got, policy.env_actions(policy.greedy_actions(obs)))
    assert (obs["action_mask"][np.arange(1_000), got] == 1).all()  # never an invalid action
