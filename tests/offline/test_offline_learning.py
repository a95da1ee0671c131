"""Offline algorithms learn, from data written by asyncflow and by Minari's own collector
(fixed seeds and budgets; the figures in the comments were measured on the 2-core VM)."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

minari = pytest.importorskip("minari")

from asyncflow.algorithms import ALGORITHMS, PPO, SAC, PPOConfig, SACConfig  # noqa: E402
from asyncflow.evaluate import evaluate  # noqa: E402
from asyncflow.rl.data.sample_batch import ACTIONS, OBS  # noqa: E402
from asyncflow.rl.offline.dataset import open_dataset, read_transitions  # noqa: E402
from asyncflow.rl.offline.estimators import fitted_q_evaluation, importance_sampling  # noqa: E402
from asyncflow.rl.offline.writer import ExperienceWriter  # noqa: E402

pytestmark = pytest.mark.slow


def scripted_expert(obs: np.ndarray) -> np.ndarray:
    """Push toward where the pole falls: it keeps CartPole up for all 500 steps."""
    return (3 * obs[..., 2] + obs[..., 3] + 0.1 * obs[..., 1] > 0).astype(np.int64)


def soft_expert(obs: np.ndarray, eps: float) -> np.ndarray:
    """The scripted expert's action with probability ``1 - eps``, else a uniform one: ``(B, 2)``."""
    p = np.full((len(obs), 2), eps / 2)
    p[np.arange(len(obs)), scripted_expert(obs)] += 1 - eps
    return p


def play_cartpole(eps: float, episodes: int, seed: int, gamma: float, writer: ExperienceWriter | None = None) -> float:
    """Episodes of ``soft_expert(eps)`` (written with their exact log-probabilities): the mean
    discounted return."""
    env, rng, values = gym.make("CartPole-v1"), np.random.default_rng(seed), []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed * 100_000 + episode)
        record: tuple[list[Any], list[Any], list[float], list[float]] = ([obs], [], [], [])
        while True:
            p = soft_expert(obs[None], eps)[0]
            action = int(rng.random() < p[1])
            obs, reward, terminated, truncated, _ = env.step(action)
            for column, value in zip(record, (obs, action, float(reward), float(np.log(p[action]))), strict=True):
                column.append(value)
            if terminated or truncated:
                break
        values.append(sum(r * gamma**t for t, r in enumerate(record[2])))
        if writer is not None:
            writer.add_episode(*record, terminated=terminated)
    return float(np.mean(values))


def write_cartpole(folder: Path, name: str, eps: float, steps: int, seed: int) -> None:
    env = gym.make("CartPole-v1")
    writer = ExperienceWriter(folder, name, env.observation_space, env.action_space, 1)
    episodes = 0
    while writer.received < steps:
        play_cartpole(eps, 1, seed * 1_000 + episodes, 0.99, writer)
        episodes += 1
    writer.close()


async def offline(name: str, data: Path, iterations: int, env: str = "CartPole-v1", **fields: Any) -> float:
    """``iterations`` of ``name`` on ``data`` (100 updates each), then the greedy policy's mean
    return over 20 episodes."""
    return (await curve(name, data, (iterations,), env, **fields))[0]


async def curve(name: str, data: Path, at: tuple[int, ...], env: str = "CartPole-v1", **fields: Any) -> list[float]:
    """The greedy policy's mean return over 20 episodes after each of the iterations ``at``."""
    cls = ALGORITHMS[name]
    config = cls.config_class(input=str(data), env=env, num_workers=0, seed=0, evaluation_episodes=20,
                              evaluation_interval=1_000, **fields)  # evaluated when asked  # fmt: skip
    returns = []
    async with cls(config) as algo:
        async for result in algo.train():
            if result["training_iteration"] in at:
                returns.append(float((await algo.evaluate())["episode_return_mean"]))
            if result["training_iteration"] == max(at):
                return returns
    raise AssertionError("the plan ended")


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A PPO expert (mean return >= 475), 100k steps of it (sampled actions), and a mixed
    dataset: 50k steps of it beside 50k of uniformly random actions."""
    root = tmp_path_factory.mktemp("cartpole")

    async def expert() -> None:
        async with PPO(PPOConfig(env="CartPole-v1", num_workers=2, seed=0)) as algo:
            async for result in algo.train():
                if result["episode_return_mean"] >= 475:
                    break
            await algo.save(root / "expert.ckpt")

    asyncio.run(expert())
    greedy = evaluate(root / "expert.ckpt", 20).mean
    evaluate(root / "expert.ckpt", 200, output=root / "expert", explore=True)
    evaluate(root / "expert.ckpt", 100, seed=50_000, output=root / "mixed", explore=True)
    write_cartpole(root / "mixed", "random-v0", eps=1.0, steps=50_000, seed=1)
    return {"root": root, "greedy": greedy}


@pytest.mark.timeout(300)
def test_bc_clones_a_ppo_expert(cartpole: dict[str, Any]) -> None:
    assert open_dataset(cartpole["root"] / "expert").steps >= 100_000
    bc = asyncio.run(offline("bc", cartpole["root"] / "expert", 5))  # measured: 500.0 (expert: 500.0)
    assert bc >= 0.95 * cartpole["greedy"]


@pytest.mark.timeout(300)
def test_marwil_beats_bc_on_half_expert_half_random_data(cartpole: dict[str, Any]) -> None:
    mixed = cartpole["root"] / "mixed"
    bc = asyncio.run(offline("bc", mixed, 10))  # measured: 212.7
    marwil = asyncio.run(offline("marwil", mixed, 10))  # measured: 500.0
    assert marwil >= 450 and marwil - bc >= 150, (marwil, bc)


@pytest.mark.timeout(300)
def test_discrete_cql_learns_where_offline_dqn_does_not(cartpole: dict[str, Any]) -> None:
    """Both learning curves are noisy (each point one training run's greedy policy): compared by
    their mean over 2,000, 2,500 and 3,000 updates."""
    mixed = cartpole["root"] / "mixed"
    cql = asyncio.run(curve("cql", mixed, (20, 25, 30)))  # measured: 455.6, 429.0, 457.7
    dqn = asyncio.run(curve("cql", mixed, (20, 25, 30), cql_weight=0.0))  # without the term: 41.3, 85.5, 177.9
    assert np.mean(cql) >= 350 and np.mean(cql) - np.mean(dqn) >= 75, (cql, dqn)


@pytest.mark.timeout(400)
def test_continuous_cql_learns_from_a_mediocre_sac_replay_where_bc_does_not(tmp_path: Path) -> None:
    """8,000 steps of SAC learning Pendulum (1,000 random, then a policy at -700 to -900 on the
    last 100 episodes) as written by its workers; CQL and BC on them, same budget."""
    data = tmp_path / "pendulum"

    async def sac() -> None:
        async with SAC(SACConfig(env="Pendulum-v1", output=str(data), seed=0)) as algo:
            async for result in algo.train():
                if result["num_env_steps_sampled"] >= 8_000:
                    break

    asyncio.run(sac())
    small = {"hidden": [64, 64], "train_batch_size": 128}
    cql = asyncio.run(offline("cql", data, 20, env="Pendulum-v1", cql_samples=4, **small))  # measured: -629.0
    bc = asyncio.run(offline("bc", data, 20, env="Pendulum-v1", **small))  # measured: -1378.5
    assert cql >= -800 and bc <= -1000, (cql, bc)


@pytest.mark.timeout(120)
def test_bc_learns_from_a_dataset_minaris_own_collector_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = minari.DataCollector(gym.make("CartPole-v1"))
    obs, _ = env.reset(seed=0)
    for _ in range(5_000):
        obs, _, terminated, truncated, _ = env.step(int(scripted_expert(obs)))
        if terminated or truncated:
            obs, _ = env.reset()
    first = env._tmp_dir  # Minari leaves its temporary folders to warn at exit (test_dataset.py)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env.create_dataset(dataset_id="cartpole/scripted-v0", algorithm_name="scripted expert")
    first.cleanup()
    env.close()
    env._tmp_dir._finalizer.detach()
    bc = asyncio.run(offline("bc", tmp_path / "cartpole" / "scripted-v0", 10))  # measured: 500.0
    assert bc >= 450


@pytest.mark.timeout(200)
def test_off_policy_estimates_of_a_known_policy_land_near_its_true_return(tmp_path: Path) -> None:
    """Behaviour: uniformly random actions; target: the scripted expert 40% of the time, else
    uniform. Discounted returns (gamma 0.95); the truth by 500 rollouts of the target."""
    gamma, eps = 0.95, 0.6
    env = gym.make("CartPole-v1")
    writer = ExperienceWriter(tmp_path, "uniform-v0", env.observation_space, env.action_space, 1)
    behaviour = play_cartpole(1.0, 500, 0, gamma, writer)
    writer.close()
    truth = play_cartpole(eps, 500, 1, gamma)  # measured: 18.11 (behaviour: 12.62)
    rows = read_transitions(open_dataset(tmp_path).shards, gamma)
    target_logp = np.log(soft_expert(rows[OBS], eps)[np.arange(len(rows)), rows[ACTIONS]])
    estimates = {
        "is": importance_sampling(rows, target_logp, gamma)["v_target"],  # measured: 19.65
        "wis": importance_sampling(rows, target_logp, gamma, weighted=True)["v_target"],  # 18.01
        "fqe": fitted_q_evaluation(
            rows, lambda o: soft_expert(np.asarray(o), eps), 2, gamma, updates=3_000, target_every=50
        )["v_target"],  # 18.05
    }
    tolerance = {"is": 0.15, "wis": 0.05, "fqe": 0.05}
    for name, value in estimates.items():
        assert abs(value - truth) <= tolerance[name] * truth, (name, value, truth)
        assert abs(value - truth) < abs(behaviour - truth)
