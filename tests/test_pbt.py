"""Population-based training: members that start with a learning rate too small to learn take a
better member's state and explore from its values, and recover (PPO on CartPole); what
``change_config`` changes while training; bad input before any process starts; the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asyncflow.algorithms import DQN, PPO, DQNConfig, PPOConfig
from asyncflow.errors import ConfigError
from asyncflow.pbt import PopulationBasedTraining
from asyncflow.rl.learners.optim import Adam
from tests.conftest import our_segments

ROOT = Path(__file__).resolve().parents[1]
BAD_LR, GOOD_LR = 1e-6, 3e-3


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_members_with_a_bad_learning_rate_recover_by_exploiting_better_ones() -> None:
    config = PPOConfig(env="CartPole-v1", num_workers=0)
    initial = [{"lr": BAD_LR}, {"lr": BAD_LR}, {"lr": GOOD_LR}, {"lr": GOOD_LR}]
    pbt = PopulationBasedTraining(PPO, config, ["lr=loguniform(1e-5,1e-2)"], population=4, interval=3,
                                  initial=initial, seed=0)  # fmt: skip
    rounds = []
    async with pbt:
        async for rnd in pbt.train():
            rounds.append(rnd)
            if min(m["env_steps"] for m in rnd["members"]) >= 60_000:  # the budget: 60k env steps a member
                break
    first, last = rounds[0]["members"], rounds[-1]["members"]
    assert first[0]["score"] < 40 and first[1]["score"] < 40  # 3 iterations at lr 1e-6: nothing learned
    assert max(m["score"] for m in last) >= 400  # the population's best
    for index in (0, 1):  # the bad half took a better member's state and values, and learned from there
        member = pbt.members[index]
        assert member.exploits >= 1
        assert member.values["lr"] >= 1e-4 and member.algo.config.learner.lr == member.values["lr"]
        assert last[index]["score"] >= 250, last
    exploits = [e for e in pbt.events if e.member in (0, 1)]
    assert exploits[0].before == {"lr": BAD_LR} and exploits[0].donor in (2, 3) and exploits[0].round == 1
    assert our_segments(os.getpid()) == []


async def test_change_config_reaches_the_optimizer_the_loss_and_the_plan() -> None:
    config = PPOConfig(env="CartPole-v1", num_workers=0, train_batch_size=256, minibatch_size=64)
    async with PPO(config) as algo:
        async for _ in algo.train():
            break
        await algo.change_config(lr=1e-4, entropy_coeff=0.01, train_batch_size=512)
        optimizers = [v for v in vars(algo.learner).values() if isinstance(v, Adam)]
        assert optimizers and all(o.lr == 1e-4 for o in optimizers)
        assert algo.learner.loss_config.entropy_coeff == 0.01
        async for result in algo.train():  # the plan, built again, gathers batches of the new size
            assert result["num_env_steps_trained"] - 256 >= 512
            break
        assert algo.config.learner.lr == 1e-4
        with pytest.raises(ConfigError, match="num_workers: ppo cannot change it while training"):
            await algo.change_config(num_workers=1)
        with pytest.raises(ConfigError, match="lam"):
            await algo.change_config(lam=0.9)


@pytest.mark.parametrize(
    ("algorithm", "changes", "refused"),
    [
        ("a2c", {"entropy_coeff": 0.01, "vf_loss_coeff": 0.25, "train_batch_size": 400}, "lam"),
        ("impala", {"entropy_coeff": 0.02, "vtrace_clip_rho": 0.9}, "num_async"),
        ("a3c", {}, "entropy_coeff"),  # its workers compute the gradients: they read the loss's fields
    ],
)
async def test_each_algorithm_changes_what_only_its_loss_and_plan_read(
    algorithm: str, changes: dict[str, float], refused: str
) -> None:
    from asyncflow.algorithms import ALGORITHMS

    cls = ALGORITHMS[algorithm]
    config = cls.recipe.config(env="CartPole-v1", num_workers=1)
    async with cls(config) as algo:
        async for _ in algo.train():
            break
        if changes:
            await algo.change_config(**changes)
            for name, value in changes.items():
                assert getattr(algo.learner.loss_config, name) == value
            async for _ in algo.train():  # the plan, built again, trains on
                break
        with pytest.raises(ConfigError, match=f"{refused}: {algorithm} cannot change it while training"):
            await algo.change_config(**{refused: 0.5 if refused != "num_async" else 3})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mutations": ["gamma=uniform(0.9,0.99)"]}, "gamma: ppo cannot change it while training"),
        ({"mutations": ["lr=uniform(-1,1)"]}, "learner.lr: must be > 0"),
        ({"mutations": ["no_such=uniform(0,1)"]}, "no_such"),
        ({"mutations": []}, "at least one field"),
        ({"population": 1}, "population must be at least 2"),
        ({"quantile": 0.75}, "quantile must be in"),
        ({"metric": "nope"}, "no run reports 'nope'"),
        ({"initial": [{"lr": 1e-3}]}, "one mapping per member"),
        ({"initial": [{"gamma": 0.9}] * 4}, "gamma is not a field being searched"),
    ],
)
def test_bad_input_is_an_error_before_any_process_starts(kwargs: dict[str, object], message: str) -> None:
    options: dict[str, object] = {"mutations": ["lr=loguniform(1e-5,1e-2)"], **kwargs}
    mutations = options.pop("mutations")
    with pytest.raises(ConfigError, match=message):
        PopulationBasedTraining(PPO, PPOConfig(env="CartPole-v1", num_workers=0), mutations, **options)  # type: ignore[arg-type]


def test_an_algorithm_changes_only_its_live_fields() -> None:
    with pytest.raises(ConfigError, match="target_network_update_freq: dqn cannot change it"):
        PopulationBasedTraining(DQN, DQNConfig(env="CartPole-v1", num_workers=0),
                                ["target_network_update_freq=int(100,1000)"])  # fmt: skip
    PopulationBasedTraining(DQN, DQNConfig(env="CartPole-v1", num_workers=0), ["lr=loguniform(1e-5,1e-3)"])


@pytest.mark.timeout(200)
def test_the_command_line_logs_each_member_and_each_round(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "asyncflow.cli", "pbt", "ppo", "--env", "CartPole-v1",
                          "--num-workers", "0", "--population", "2", "--interval", "1", "--mutate",
                          "lr=loguniform(1e-4,1e-2)", "--initial", "lr=1e-6,3e-3", "--stop-timesteps", "6000"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    [folder] = (tmp_path / "runs").iterdir()
    rounds = [json.loads(line) for line in (folder / "pbt.jsonl").read_text().splitlines()]
    assert len(rounds) == 3  # 2,048 env steps a round
    assert rounds[0]["exploits"][0]["member"] == 0 and rounds[0]["exploits"][0]["before"] == {"lr": 1e-6}
    assert rounds[0]["members"][0]["values"] == rounds[0]["exploits"][0]["after"]
    first = json.loads((folder / "member_0" / "result.jsonl").read_text().splitlines()[0])
    assert first["pbt"] == {"member": 0, "round": 1, "lr": 1e-6}  # each iteration logs the values it trained with
    for member in (0, 1):
        rows = (folder / f"member_{member}" / "progress.csv").read_text().splitlines()
        assert len(rows) == 1 + 3
        assert json.loads((folder / f"member_{member}" / "params.json").read_text())["seed"] == member
    assert "| member |" in out.stdout and (folder / "best.yaml").exists()
    bad = subprocess.run([sys.executable, "-m", "asyncflow.cli", "pbt", "ppo", "--mutate", "lr=uniform(1e-4,1e-3)",
                          "--initial", "lr=1e-6", "--stop-timesteps", "100"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "--initial lr: one value per member (4), not 1" in bad.stderr, bad.stderr
