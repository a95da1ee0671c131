"""Experience in (``input=``): datasets found and checked before any process starts, read
into transitions, and served by reader actors, whole or streamed."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

minari = pytest.importorskip("minari")

from asyncflow.algorithms import BC, CQL, MARWIL, BCConfig, CQLConfig, MARWILConfig  # noqa: E402
from asyncflow.errors import ConfigError  # noqa: E402
from asyncflow.rl.data.sample_batch import ACTIONS, DONES, EPS_ID, LOGP, NEXT_OBS, OBS, REWARDS  # noqa: E402
from asyncflow.rl.offline.dataset import RETURNS, open_dataset, read_transitions  # noqa: E402
from asyncflow.rl.offline.reader import DatasetShard  # noqa: E402
from asyncflow.rl.offline.writer import Output  # noqa: E402
from asyncflow.rl.sampling.rollout_worker import RolloutWorker  # noqa: E402

from ..conftest import actor_children  # noqa: E402
from ..toy_envs import Ledger  # noqa: E402


def write_ledger(folder: Path, steps: int = 600, worker_index: int = 1) -> None:
    """``steps`` steps of ``Ledger`` written by a rollout worker in this process."""
    worker = RolloutWorker(Ledger, num_envs=3, rollout_fragment_length=steps // 3, worker_index=worker_index,
                           output=Output(str(folder)))  # fmt: skip
    worker.sample()
    worker.close_envs()


def collected_cartpole(root: Path, steps: int, monkeypatch: pytest.MonkeyPatch, seed: int = 0) -> Path:
    """A dataset made by Minari's own ``DataCollector`` (not by asyncflow), random actions."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    env = minari.DataCollector(gym.make("CartPole-v1"))
    env.action_space.seed(seed)
    env.reset(seed=seed)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    # Minari 0.5.4 leaves its temporary folders to their finalizers, which warn (a ResourceWarning,
    # an error in this suite): create_dataset replaces the first without cleaning it up, and close
    # removes the second with shutil.rmtree. The test cleans up after it.
    first = env._tmp_dir
    with warnings.catch_warnings():  # Minari's advice on metadata a published dataset should carry
        warnings.simplefilter("ignore", UserWarning)
        env.create_dataset(dataset_id="cartpole/random-v0", algorithm_name="random")
    first.cleanup()
    env.close()
    env._tmp_dir._finalizer.detach()
    return root / "cartpole" / "random-v0"


def test_transitions_and_returns_from_asyncflows_own_shards(tmp_path: Path) -> None:
    write_ledger(tmp_path, worker_index=1)
    write_ledger(tmp_path, worker_index=1)  # the same worker index in the same process: a shard of its own
    data = open_dataset(tmp_path)
    assert len(data.shards) == 2 and data.steps == 1200 and data.has_logp
    rows = read_transitions(data.shards, gamma=0.5)
    assert len(rows) == 1200
    np.testing.assert_array_equal(rows[NEXT_OBS][:, 1], rows[OBS][:, 1] + 1)  # each row's next step
    np.testing.assert_allclose(rows[REWARDS], rows[ACTIONS] + rows[OBS][:, 1] / 100, rtol=1e-6)
    assert np.isfinite(rows[LOGP]).all()
    for eps in np.unique(rows[EPS_ID])[:20]:  # the discounted return to each episode's end
        r = rows[REWARDS][rows[EPS_ID] == eps]
        want = [sum(r[k] * 0.5 ** (k - t) for k in range(t, len(r))) for t in range(len(r))]
        np.testing.assert_allclose(rows[RETURNS][rows[EPS_ID] == eps], want, rtol=1e-5)
        assert rows[DONES][rows[EPS_ID] == eps][-1]
    assert len(np.unique(rows[EPS_ID])) == data.episodes  # ids do not collide across shards


def test_a_minari_datacollector_dataset_reads_and_trains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = collected_cartpole(tmp_path, 500, monkeypatch)
    data = open_dataset(path)
    assert data.steps == 500 and not data.has_logp
    with pytest.raises(ConfigError, match="no infos/action_logp"):
        data.require_logp("importance sampling")
    config = BCConfig(input=str(path), num_workers=0, updates_per_iteration=5)
    import asyncio

    async def one() -> dict[str, Any]:
        async with BC(config) as algo:
            async for result in algo.train():
                return result
        raise AssertionError

    result = asyncio.run(one())
    assert result["num_env_steps_trained"] == 5 * 256 and np.isfinite(result["learner"]["policy_loss"])


@pytest.mark.timeout(60)
async def test_reader_actors_stream_a_share_larger_than_their_memory(tmp_path: Path) -> None:
    write_ledger(tmp_path, steps=900)
    data = open_dataset(tmp_path)
    reader = DatasetShard([str(s) for s in data.shards], gamma=0.9, seed=0, memory_rows=100)
    assert reader.streams and reader.rows == 900
    seen: set[int] = set()
    while reader.passes < 2:  # the first pass: every episode, in windows of at most 100 rows
        assert len(reader.buffer) <= 100
        seen |= set(reader.buffer.sample(len(reader.buffer) * 20)[EPS_ID].tolist())
        await reader.replay(len(reader.buffer))  # serves a window's worth: the next window loads
    assert len(seen) == data.episodes


def test_bad_input_is_one_line_before_any_process_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases: list[tuple[Any, str]] = [
        (lambda: BCConfig(), "input: an offline algorithm needs a dataset"),
        (lambda: BC(BCConfig(input=str(tmp_path / "nowhere"))), "does not exist"),
        (lambda: BC(BCConfig(input=str(tmp_path))), "holds no Minari dataset"),
        (lambda: BCConfig(input="x", beta=1.0), "beta: behaviour cloning is MARWIL with beta 0"),
        (lambda: MARWILConfig(input="x", output="y"), "output: an offline algorithm samples nothing"),
    ]
    for make, message in cases:
        with pytest.raises(ConfigError, match=message):
            make()
    cartpole = collected_cartpole(tmp_path / "minari", 200, monkeypatch)
    with pytest.raises(ConfigError, match=r"random-v0: its observation space Box.* is not env 'Pendulum-v1''s Box"):
        MARWIL(MARWILConfig(input=str(cartpole), env="Pendulum-v1"))
    # Evaluation without --env: in the env the data names, where gymnasium has that id registered.
    assert CQL(CQLConfig(input=str(cartpole), evaluation_interval=1)).config.env == "CartPole-v1"
    ledger = tmp_path / "ledger"
    write_ledger(ledger, worker_index=1)
    write_ledger(ledger, worker_index=2)
    with pytest.raises(ConfigError, match="evaluation_interval: evaluation plays episodes in an env, and the data"):
        CQL(CQLConfig(input=str(ledger), evaluation_interval=1))  # a callable env: no id in the data
    (ledger_shard, other) = sorted(ledger.glob("*/data"))
    meta = json.loads((other / "metadata.json").read_text())
    damaged = tmp_path / "damaged"
    os.makedirs(damaged / "a-v0" / "data")
    (damaged / "a-v0" / "data" / "metadata.json").write_text(json.dumps(meta))
    (damaged / "a-v0" / "data" / "main_data.hdf5").write_bytes((other / "main_data.hdf5").read_bytes()[:4000])
    with pytest.raises(ConfigError, match=r"a-v0/data: damaged or unreadable"):
        BC(BCConfig(input=str(damaged)))
    mixed = tmp_path / "mixed"
    os.makedirs(mixed)
    os.symlink(ledger_shard.parent, mixed / "ledger-v0")
    os.symlink(cartpole, mixed / "cartpole-v0")
    with pytest.raises(ConfigError, match=r"its observation_space .* is not"):
        BC(BCConfig(input=str(mixed)))
    del meta["observation_space"]
    (other / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match=r"no observation_space .asyncflow does not make the dataset.s env"):
        BC(BCConfig(input=str(other)))
    assert actor_children() == []


@pytest.mark.timeout(120)
async def test_off_policy_estimates_come_in_the_results_and_refuse_what_their_maths_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_ledger(tmp_path / "ledger")
    config = MARWILConfig(input=str(tmp_path / "ledger"), num_workers=0, updates_per_iteration=5,
                          estimators=("is", "wis", "fqe"), estimation_interval=2)  # fmt: skip
    async with MARWIL(config) as algo:
        results = [r async for r in _first(algo.train(), 2)]
    assert "off_policy_estimation" not in results[0]
    estimates = results[1]["off_policy_estimation"]
    rows = read_transitions(open_dataset(tmp_path / "ledger").shards, config.gamma)
    episodes = [rows[REWARDS][rows[EPS_ID] == e] for e in np.unique(rows[EPS_ID])]
    behaviour = np.mean([sum(r * config.gamma**t for t, r in enumerate(e)) for e in episodes])
    for name in ("is", "wis", "fqe"):
        assert estimates[name]["v_behavior"] == pytest.approx(behaviour)
        assert np.isfinite(estimates[name]["v_target"])
    with pytest.raises(ConfigError, match=r"estimators: .'foo'. unknown"):
        MARWILConfig(input="x", estimators=("foo",))
    cartpole = collected_cartpole(tmp_path / "minari", 200, monkeypatch)
    with pytest.raises(ConfigError, match=r"no infos/action_logp .*importance sampling"):
        BC(BCConfig(input=str(cartpole), estimators=("wis",)))
    BC(BCConfig(input=str(cartpole), estimators=("fqe",)))  # fitted Q needs no probabilities


async def _first(results: Any, n: int) -> Any:
    async for result in results:
        yield result
        if result["training_iteration"] == n:
            return


@pytest.mark.timeout(120)
async def test_an_offline_run_checkpoints_and_resumes(tmp_path: Path) -> None:
    write_ledger(tmp_path / "ledger")
    config = MARWILConfig(input=str(tmp_path / "ledger"), env=Ledger, num_workers=2, updates_per_iteration=5,
                          evaluation_interval=2, evaluation_episodes=3)  # fmt: skip
    async with MARWIL(config) as algo:
        results = [r async for r in _first(algo.train(), 2)]
        weights = algo.learner.get_weights().vector.copy()
        checkpoint = await algo.save(tmp_path / "marwil.ckpt")
    assert results[-1]["num_env_steps_trained"] == 2 * 5 * 256 and results[-1]["num_env_steps_sampled"] == 0
    resumed = MARWIL.restore(checkpoint)
    async with resumed:
        np.testing.assert_array_equal(resumed.learner.get_weights().vector, weights)
        (result,) = [r async for r in _first(resumed.train(), 3)]
    assert result["training_iteration"] == 3 and result["num_env_steps_trained"] == 3 * 5 * 256
