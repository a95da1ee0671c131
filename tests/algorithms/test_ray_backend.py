"""Plans on ``backend="ray"``, unchanged: every algorithm trains, weights travel once, a
worker killed with SIGKILL is replaced (or fails the plan), bad input fails early.

One local Ray (2 CPUs, no dashboard) serves the whole module (``ray_instance``)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import asyncflow
from asyncflow import ActorDiedError, ConfigError
from asyncflow.algorithms import ALGORITHMS, Algorithm, PPOConfig
from asyncflow.rl.data.sample_batch import OBS
from asyncflow.rl.envs.matrix_games import TwoStepGame
from asyncflow.rl.envs.mpe_continuous import speaker_listener
from asyncflow.rl.policy import FlatWeights
from asyncflow.rl.sampling.worker_set import WorkerSet

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.usefixtures("ray_instance")

ROOT = Path(__file__).resolve().parents[2]

SMALL: dict[str, dict[str, Any]] = {
    "pg": {"train_batch_size": 256},
    "a2c": {"train_batch_size": 256},
    "a3c": {},
    "ppo": {"train_batch_size": 256, "minibatch_size": 128, "num_epochs": 2},
    "impala": {"timesteps_per_iteration": 256},
    "appo": {"timesteps_per_iteration": 256},
    "dqn": {"learning_starts": 64, "timesteps_per_iteration": 128},
    "apex": {"learning_starts": 64, "timesteps_per_iteration": 128, "num_replay_shards": 2},
    "sac": {"env": "Pendulum-v1", "learning_starts": 64, "timesteps_per_iteration": 64},
    "ddpg": {"env": "Pendulum-v1", "learning_starts": 64, "timesteps_per_iteration": 64},
    "td3": {"env": "Pendulum-v1", "learning_starts": 64, "timesteps_per_iteration": 64},
    "two_trainer": {"dqn_learning_starts": 64, "timesteps_per_iteration": 128},
    "qmix": {"env": TwoStepGame, "learning_starts": 64, "timesteps_per_iteration": 128},
    "maddpg": {"env": speaker_listener, "learning_starts": 64, "timesteps_per_iteration": 64},
}


def _config(name: str, **fields: Any) -> Any:
    small = {"num_workers": 2, "num_envs_per_worker": 2, "rollout_fragment_length": 32, **SMALL[name]}
    return ALGORITHMS[name].config_class(backend="ray", **{**small, **fields})


async def _until(algo: Algorithm, done: Any) -> dict[str, Any]:
    async for result in algo.train():
        if done(result):
            return result
    raise AssertionError("the plan ended")


SAMPLING = sorted(n for n, cls in ALGORITHMS.items() if cls.recipe.samples)
OFFLINE = sorted(set(ALGORITHMS) - set(SAMPLING))


def test_every_algorithm_has_small_settings_here() -> None:
    assert set(SMALL) == set(SAMPLING) and OFFLINE == ["bc", "cql", "marwil"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", SAMPLING)
async def test_every_algorithm_trains_on_ray_actors(name: str) -> None:
    async with ALGORITHMS[name](_config(name)) as algo:
        assert algo.runtime is not None and algo.runtime.backend == "ray"
        workers = algo.workers.workers
        # Ray's workers, not ours: another process, with a Ray node id.
        assert all(w.node_id and w.pid not in (None, os.getpid()) for w in workers)
        result = await _until(algo, lambda r: r["num_env_steps_trained"] > 0)
        assert result["num_env_steps_sampled"] > 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", OFFLINE)
async def test_offline_algorithms_read_their_dataset_through_ray_actors(name: str, tmp_path: Path) -> None:
    pytest.importorskip("minari")
    from asyncflow.rl import RolloutWorker
    from asyncflow.rl.offline.writer import Output

    for index in (1, 2):  # two shards: one per reader
        worker = RolloutWorker("CartPole-v1", num_envs=2, rollout_fragment_length=200, worker_index=index,
                               output=Output(str(tmp_path)))  # fmt: skip
        worker.sample()
        worker.close_envs()
    config = ALGORITHMS[name].config_class(input=str(tmp_path), backend="ray", num_workers=2, updates_per_iteration=5)
    async with ALGORITHMS[name](config) as algo:
        readers = algo.resources.workers
        assert len(readers) == 2 and all(r.node_id and r.pid not in (None, os.getpid()) for r in readers)
        result = await _until(algo, lambda r: r["num_env_steps_trained"] > 0)
    assert result["num_env_steps_trained"] == 5 * config.train_batch_size and result["num_env_steps_sampled"] == 0


def _plasma() -> tuple[float, int]:
    """(MiB, objects) in Ray's object store, as Ray reports them."""
    from ray._private.internal_api import memory_summary

    text = memory_summary(stats_only=True)
    match = re.search(r"Plasma memory usage (\d+) MiB, (\d+) objects", text)
    assert match, text
    return float(match.group(1)), int(match.group(2))


async def _plasma_settled() -> tuple[float, int]:
    """``_plasma`` once objects already released have left the store: Ray frees them in
    batches (``free_objects_period_milliseconds``, 1 s), so a release from an earlier test
    can land between two readings and cancel a put out of the difference."""
    last = _plasma()
    for _ in range(20):
        await asyncio.sleep(1.2)
        now = _plasma()
        if now == last:
            return now
        last = now
    raise AssertionError(f"Ray's object store did not settle: {last}")


async def _plasma_until(reached: Callable[[float], bool], within_s: float = 30.0) -> float:
    """MiB in Ray's object store once ``reached`` holds for it, or the last reading after
    ``within_s`` (Ray's memory summary may lag a put)."""
    deadline = time.monotonic() + within_s
    while True:
        mib, _ = _plasma()
        if reached(mib) or time.monotonic() > deadline:
            return mib
        await asyncio.sleep(0.5)


class Keeper:
    """Keeps the last weights it was sent (a worker's ``set_weights``), so their memory stays in use."""

    def __init__(self) -> None:
        self.weights: Any = None

    def set_weights(self, weights: Any) -> None:
        self.weights = weights

    def total(self) -> float:
        return float(self.weights.vector.sum())


async def test_a_broadcast_puts_the_weights_into_the_object_store_once() -> None:
    size_mib = 32
    weights = FlatWeights(np.ones(size_mib << 18, np.float32), 1)  # 32 MiB
    async with asyncflow.open_runtime("ray") as rt:
        keepers = [await rt.spawn(Keeper) for _ in range(4)]
        before, _ = await _plasma_settled()
        refs: list[Any] = []  # held, so that the one copy stays in the store while it is read

        def share(value: Any) -> Any:
            refs.append(rt.share(value))
            return refs[-1]

        await WorkerSet(keepers, share=share).broadcast(weights)
        assert [await k.total() for k in keepers] == [float(size_mib << 18)] * 4
        assert len(refs) == 1
        shared = await _plasma_until(lambda mib: mib - before >= size_mib - 2)
        # The measurement can tell one copy from four (held as well: Ray frees an object whose
        # last reference went within seconds, and the keepers hold copies of their own).
        copies = [rt.share(FlatWeights(np.full(size_mib << 18, 2, np.float32), 2)) for _ in keepers]
        copied = await _plasma_until(lambda mib: mib - before >= 5 * size_mib - 2)
        del copies
    readings = f"store: {before} MiB before, {shared} with one shared copy, {copied} with four more"
    assert shared - before == pytest.approx(size_mib, abs=2), readings  # one copy for four workers
    assert copied - before == pytest.approx(5 * size_mib, abs=2), readings  # and four more


@pytest.mark.timeout(120)
async def test_sample_batches_come_back_as_numpy_arrays() -> None:
    async with ALGORITHMS["ppo"](_config("ppo")) as algo:
        batch = await algo.workers.workers[0].sample()
        obs = batch[OBS]
        assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and obs.shape == (64, 4)
        obs[0] = 0.0  # the driver's own copy, as on the process backend


@pytest.mark.timeout(120)
async def test_a_worker_killed_on_ray_is_replaced_and_counted() -> None:
    async with ALGORITHMS["ppo"](_config("ppo", max_worker_restarts=1)) as algo:
        first = await _until(algo, lambda r: r["num_env_steps_trained"] > 0)
        victim = algo.workers.workers[0]
        old_pid = victim.pid
        assert old_pid is not None
        os.kill(old_pid, signal.SIGKILL)
        sampled = first["num_env_steps_sampled"]
        last = await _until(algo, lambda r: r["num_env_steps_sampled"] >= sampled + 1_000 and victim.restarts == 1)
        assert last["num_workers_restarted"] == 1
        assert victim.alive and victim.pid != old_pid


@pytest.mark.timeout(120)
async def test_a_worker_killed_on_ray_without_restarts_fails_the_plan() -> None:
    async with ALGORITHMS["ppo"](_config("ppo", max_worker_restarts=0)) as algo:
        await _until(algo, lambda r: r["num_env_steps_trained"] > 0)
        pid = algo.workers.workers[0].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(ActorDiedError) as info:  # not a hang: Ray reports the death within milliseconds
            await asyncio.wait_for(_until(algo, lambda r: False), timeout=60)
        assert isinstance(info.value.__cause__, ray.exceptions.RayActorError)


def test_bad_placement_fails_before_any_worker_starts() -> None:
    with pytest.raises(ConfigError, match="backend"):
        PPOConfig(backend="rya")
    with pytest.raises(ConfigError, match="address"):
        PPOConfig(backend="process", address="auto")
    with pytest.raises(ConfigError, match="num_cpus_per_worker"):
        PPOConfig(backend="ray", num_cpus_per_worker=-1)


async def test_more_workers_than_the_cluster_can_hold_is_a_config_error() -> None:
    # 2 CPUs here: four workers of one CPU each would wait forever.
    algo = ALGORITHMS["ppo"](_config("ppo", num_workers=4, num_cpus_per_worker=1.0))
    with pytest.raises(ConfigError, match=r"4 actors.*num_cpus=1.*2 CPUs"):
        async with algo:
            pass
    assert algo.runtime is None or algo.runtime.statistics().actors_spawned == 0


async def test_an_address_that_does_not_answer_fails_within_seconds() -> None:
    # Its own driver: this process is already attached to the module's Ray.
    script = textwrap.dedent("""
        import asyncio, asyncflow
        async def main():
            async with asyncflow.open_runtime("ray", address="127.0.0.1:9"):
                pass
        asyncio.run(main())
    """)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stderr=subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)  # Ray alone retries for a minute or more
    assert proc.returncode != 0
    assert "ConfigError: no Ray cluster answers at address='127.0.0.1:9' within 3 s" in err.decode()


def test_backend_ray_without_ray_installed_names_the_extra() -> None:
    script = textwrap.dedent("""
        import sys
        sys.modules["ray"] = None  # what an install without the extra looks like to an import
        from asyncflow import ConfigError, Runtime
        from asyncflow.algorithms import PPOConfig
        for make in (lambda: PPOConfig(backend="ray"), lambda: Runtime("ray")):
            try:
                make()
            except ConfigError as exc:
                print("ConfigError:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.count("pip install 'asyncflow[ray]'") == 2, out


@pytest.mark.timeout(120)
def test_the_cli_trains_on_ray(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "asyncflow.cli", "train", "ppo", "--env", "CartPole-v1", "--backend", "ray",
         "--num-workers", "2", "--stop-timesteps", "2000", "--logdir", str(tmp_path),
         "--set", "train_batch_size=512"],
        capture_output=True, text=True, timeout=110, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    params = next(tmp_path.glob("ppo_*/params.json")).read_text()
    assert '"backend": "ray"' in params


_CTRL_C = """
import asyncio, os, sys
import asyncflow

class Idle:
    def where(self):
        return os.getpid()

async def main():
    async with asyncflow.open_runtime("ray", ray_init={"num_cpus": 1}) as rt:
        actors = [await rt.spawn(Idle) for _ in range(2)]
        print(*[await a.where() for a in actors], flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.timeout(120)
def test_ctrl_c_on_ray_stops_the_actors_and_the_ray_it_started(tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(_CTRL_C)
    with subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            actors = [int(p) for p in proc.stdout.readline().split()]
            ray_processes = _descendants(proc.pid)  # the GCS, the raylet, its workers
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert len(actors) == 2, err
    assert set(actors) <= ray_processes
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in ray_processes):
        time.sleep(0.1)
    assert [p for p in ray_processes if _alive(p)] == []


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
