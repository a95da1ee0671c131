"""Experience out (``output=``, ``evaluate(output=...)``): what the workers sample is written as
Minari datasets that Minari itself reads, row by row as the env gave it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

minari = pytest.importorskip("minari")

from asyncflow.algorithms import ALGORITHMS, PPO, PPOConfig  # noqa: E402
from asyncflow.errors import ConfigError  # noqa: E402
from asyncflow.evaluate import evaluate  # noqa: E402

from ..toy_envs import DictFrames, Ledger, async_ledger  # noqa: E402


def shards(folder: Path) -> list[Any]:
    """Every dataset under ``folder``, read by Minari (``load_dataset``'s own class)."""
    return [minari.MinariDataset(p.parent) for p in sorted(folder.glob("*/data/metadata.json"))]


async def train(name: str, iterations: int, checkpoint: Path | None = None, **fields: Any) -> dict[str, Any]:
    cls = ALGORITHMS[name]
    async with cls(cls.config_class(**fields)) as algo:
        async for result in algo.train():
            if result["training_iteration"] == iterations:
                break
        if checkpoint is not None:
            await algo.save(checkpoint)
    return result


def check_ledger_episode(e: Any) -> None:
    n = len(e.rewards)
    assert e.observations.shape == (n + 1, 2) and e.observations.dtype == np.float32
    np.testing.assert_array_equal(e.observations[:, 1], np.arange(n + 1))  # every step, in order
    assert (e.observations[:, 0] == e.observations[0, 0]).all()  # one episode, not two spliced
    np.testing.assert_allclose(e.rewards, e.actions + np.arange(n) / 100, rtol=1e-6)
    assert not e.terminations[:-1].any() and not e.truncations[:-1].any()
    assert e.terminations[-1] != e.truncations[-1]  # it ends once, one way
    if e.terminations[-1]:
        assert 2 <= n <= 14
    logp = e.infos["action_logp"]
    assert logp.shape == (n + 1,) and np.isnan(logp[-1]) and (logp[:-1] <= 0).all() and (logp[:-1] > -10).all()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("name", "workers", "env"), [("ppo", 2, Ledger), ("dqn", 0, Ledger), ("ppo", 2, async_ledger)])
async def test_every_sampled_step_is_written_once_in_order(tmp_path: Path, name: str, workers: int, env: Any) -> None:
    """Gymnasium envs stepped in lock step, and ``AsyncEnv``s whose sequences complete in any order."""
    out = tmp_path / "data"
    fields = {"ppo": {"train_batch_size": 512}, "dqn": {"learning_starts": 64, "timesteps_per_iteration": 256}}[name]
    result = await train(name, 2, env=env, num_workers=workers, num_envs_per_worker=3, seed=1,
                         output=str(out), **fields)  # fmt: skip
    datasets = shards(out)
    assert len(datasets) == max(workers, 1)  # one shard per worker process
    assert sum(d.total_steps for d in datasets) == result["num_env_steps_sampled"]
    for d in datasets:
        assert d.observation_space == Ledger.observation_space and d.action_space == Ledger.action_space
        episodes = list(d.iterate_episodes())
        assert len(episodes) == d.total_episodes > 10
        for e in episodes:
            check_ledger_episode(e)


@pytest.mark.timeout(120)
async def test_a_vector_env_writes_its_episodes_without_the_autoreset_steps(tmp_path: Path) -> None:
    out = tmp_path / "data"
    result = await train("ppo", 2, env="CartPole-v1", vector_env=True, num_workers=2, num_envs_per_worker=4,
                         train_batch_size=1024, output=str(out))  # fmt: skip
    datasets = shards(out)
    assert sum(d.total_steps for d in datasets) == result["num_env_steps_sampled"]  # the batches' rows, no more
    for d in datasets:
        for e in d.iterate_episodes():
            n = len(e.rewards)
            assert not e.terminations[:-1].any() and not e.truncations[:-1].any()
            if e.terminations[-1]:  # CartPole ends where the pole falls or the cart leaves: the last observation says
                x, angle = e.observations[-1][0], e.observations[-1][2]
                assert abs(x) > 2.4 or abs(angle) > 0.2095
                assert abs(e.observations[-2][0]) <= 2.4 and abs(e.observations[-2][2]) <= 0.2095
            else:
                assert e.truncations[-1] and n <= 500


@pytest.mark.timeout(120)
async def test_dict_observations_and_uint8_frames_keep_their_shape_and_dtype(tmp_path: Path) -> None:
    out = tmp_path / "data"
    await train("ppo", 1, env=DictFrames, num_workers=0, num_envs_per_worker=2, train_batch_size=128,
                rollout_fragment_length=32, output=str(out))  # fmt: skip
    (d,) = shards(out)
    assert d.total_steps == 128
    for e in d.iterate_episodes():
        n = len(e.rewards)
        frames = e.observations["frame"]
        assert frames.dtype == np.uint8 and frames.shape == (n + 1, 6, 6, 3)
        np.testing.assert_array_equal(frames[:, 0, 0, 0], np.arange(n + 1))  # raw, not JPEG
        assert e.observations["pos"].dtype == np.float32
        assert e.actions.shape == (n, 2) and (np.abs(e.actions) <= 2).all()  # as the env took them
        np.testing.assert_allclose(e.rewards, e.actions.sum(1), rtol=1e-5)
    for name in ("bc", "marwil"):  # and the actor-critic family learns from it, Dict and Box as they are
        cls = ALGORITHMS[name]
        async with cls(cls.config_class(input=str(out), env=DictFrames, num_workers=0, updates_per_iteration=3,
                                        train_batch_size=32)) as algo:  # fmt: skip
            result = await anext(algo.train())
        assert result["num_env_steps_trained"] == 96 and np.isfinite(result["learner"]["policy_loss"])


@pytest.mark.timeout(120)
def test_evaluate_writes_its_episodes_with_the_behaviour_policys_probabilities(tmp_path: Path) -> None:
    out = tmp_path / "data"
    checkpoint = tmp_path / "checkpoint.ckpt"
    asyncio.run(train("ppo", 1, checkpoint, env=Ledger, num_workers=0, train_batch_size=128, output=str(out)))
    for explore in (True, False):
        folder = tmp_path / f"evaluate-{explore}"
        result = evaluate(checkpoint, 6, output=folder, explore=explore)
        (d,) = shards(folder)
        episodes = list(d.iterate_episodes())
        assert [m["seed"] for m in d.storage.get_episode_metadata(range(6))] == list(range(10_000, 10_006))
        assert [float(e.rewards.sum()) for e in episodes] == pytest.approx(result.returns)
        for e in episodes:
            check_ledger_episode(e)
            if not explore:  # greedy: deterministic, probability 1
                assert (e.infos["action_logp"][:-1] == 0).all()


def test_output_is_refused_where_it_cannot_write_what_the_env_gave(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"output: .*is a file"):
        PPO(PPOConfig(output=str(tmp_path / "file")))
    with pytest.raises(ConfigError, match="output: not available with normalize_observations"):
        PPO(PPOConfig(output=str(tmp_path / "x"), normalize_observations=True))
