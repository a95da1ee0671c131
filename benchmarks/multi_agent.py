"""Multi-agent: sampling and training speed on MPE2 ``simple_spread`` against RLlib's multi-agent
PPO on the same env and machine, in one run; PPO with one shared policy against one policy per
agent; QMIX against VDN on the QMIX paper's two-step game; self-play PPO on connect four
against a random and a one-move-lookahead player, with the built-in model and with ``MirrorNet``
(the same over a board and its mirror); MADDPG against independent DDPG learners on
MPE2's cooperative communication task (``simple_speaker_listener``).

    python benchmarks/multi_agent.py --rllib-python /path/to/venv/bin/python
    python benchmarks/multi_agent.py --only maddpg       # one part (speed, spread, qmix, self-play,
                                                         # league-player, mirror, maddpg)

RLlib 2.60's ``ray[rllib]`` extra pins gymnasium 1.2.2, an older one than asyncflow's tests take:
give ``--rllib-python`` a Python whose environment has ``ray[rllib]``, ``mpe2`` and torch (the
RLlib rows run there, in a subprocess); without it they are left out. Both systems: 2 worker
processes (RLlib's env runners), PPO with one policy that every agent shares, batches of 4,000
env steps (12,000 agent steps), 5 epochs of minibatches of 256, on 2 cores. The plots go to
``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import RESULTS, machine_line, print_table

from asyncflow import algorithms as A
from asyncflow.rl import League, MultiAgent, PolicySpec
from asyncflow.rl.envs.two_player import connect_four_lookahead, play_games, random_player
from asyncflow.rl.models import MirrorNet

BATCH_ENV_STEPS = 4_000
AGENTS = 3
PARTS = ["speed", "spread", "qmix", "self-play", "league-player", "mirror", "maddpg"]


def spread() -> Any:
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(max_cycles=25)


def shared(agent: str) -> str:
    return "shared"


def own(agent: str) -> str:
    return agent


def connect_four() -> Any:
    from pettingzoo.classic.connect_four.connect_four import raw_env

    return raw_env()


def spread_config(per_agent: bool = False, seed: int = 0) -> Any:
    ma = (MultiAgent({f"agent_{i}": PolicySpec() for i in range(AGENTS)}, own) if per_agent
          else MultiAgent({"shared": PolicySpec()}, shared))  # fmt: skip
    batch = BATCH_ENV_STEPS * AGENTS // (AGENTS if per_agent else 1)  # rows of each policy: 4,000 env steps
    return A.PPOConfig(env=spread, multi_agent=ma, num_workers=2, seed=seed, train_batch_size=batch,
                       minibatch_size=256, num_epochs=5, rollout_fragment_length=100)  # fmt: skip


async def asyncflow_speed(iterations: int) -> tuple[float, float]:
    """Env steps per second: sampling alone (both workers, rounds of fragments), then PPO training."""
    async with A.PPO(spread_config()) as algo:
        workers = algo.workers
        await asyncio.gather(*(workers.sample(w) for w in workers.workers))  # warm up
        start, steps = time.perf_counter(), 0
        while steps < iterations * BATCH_ENV_STEPS:
            batches = await asyncio.gather(*(workers.sample(w) for w in workers.workers))
            steps += sum(len(b) for b in batches)
        sampling = steps / (time.perf_counter() - start)
        train = algo.train()
        first = await anext(train)
        start = time.perf_counter()
        for _ in range(iterations):
            last = await anext(train)
        training = (last.num_env_steps_sampled - first.num_env_steps_sampled) / (time.perf_counter() - start)
        await train.aclose()
    return sampling, training


_RLLIB = textwrap.dedent(
    """
    import json, sys, time
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    def make(_):
        from mpe2 import simple_spread_v3
        return ParallelPettingZooEnv(simple_spread_v3.parallel_env(max_cycles=25))

    iterations = int(sys.argv[1])
    register_env("spread", make)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = (PPOConfig().environment("spread").env_runners(num_env_runners=2, rollout_fragment_length="auto")
              .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent, *args, **kwargs: "shared")
              .training(train_batch_size_per_learner=BATCH, minibatch_size=256, num_epochs=5)
              .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={"shared": RLModuleSpec()})))
    algo = config.build()
    runners = algo.env_runner_group
    runners.foreach_env_runner(lambda r: len(r.sample(num_timesteps=200)), local_env_runner=False)  # warm up
    start, steps = time.perf_counter(), 0
    while steps < iterations * BATCH:
        episodes = runners.foreach_env_runner(lambda r: sum(e.env_steps() for e in r.sample(num_timesteps=1000)),
                                              local_env_runner=False)
        steps += sum(episodes)
    sampling = steps / (time.perf_counter() - start)
    first = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
    start = time.perf_counter()
    for _ in range(iterations):
        result = algo.train()
    training = (result["env_runners"]["num_env_steps_sampled_lifetime"] - first) / (time.perf_counter() - start)
    print("RESULT", json.dumps({"sampling": sampling, "training": training,
                                "return": result["env_runners"].get("episode_return_mean")}), flush=True)
    algo.stop()
    ray.shutdown()
    """
).replace("BATCH", str(BATCH_ENV_STEPS))


def rllib_speed(python: str, iterations: int) -> dict[str, float]:
    done = subprocess.run([python, "-c", _RLLIB, str(iterations)], capture_output=True, text=True, timeout=1800)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])  # type: ignore[no-any-return]
    raise RuntimeError(f"RLlib's run failed:\n{done.stderr[-3000:]}")


async def spread_learning(steps: int) -> list[list[object]]:
    rows = []
    for per_agent in (False, True):
        async with A.PPO(spread_config(per_agent)) as algo:
            start = time.perf_counter()
            async for result in algo.train():
                if result.num_env_steps_sampled >= steps:
                    break
            returns = result["policy_return_mean"]
            rows.append(["one policy per agent" if per_agent else "one shared policy", result.num_env_steps_sampled,
                         result.episode_return_mean, float(np.mean(list(returns.values()))),
                         time.perf_counter() - start])  # fmt: skip
    return rows


async def two_step_curves(steps: int, every: int, seeds: list[int]) -> dict[str, list[list[float]]]:
    from asyncflow.algorithms.qmix import greedy_return
    from asyncflow.rl.envs.matrix_games import TwoStepGame
    from asyncflow.rl.envs.team import TeamEnv

    curves: dict[str, list[list[float]]] = {}
    for mixer in ("qmix", "vdn"):
        for seed in seeds:
            config = A.QMIXConfig(
                env=TwoStepGame, mixer=mixer, epsilon=(1.0, 1.0), seed=seed, timesteps_per_iteration=every
            )
            curve = []
            async with A.QMIX(config) as algo:
                async for result in algo.train():
                    curve.append(
                        [result.num_env_steps_sampled, greedy_return(algo.learner.get_weights(), TeamEnv(TwoStepGame))]
                    )
                    if result.num_env_steps_sampled >= steps:
                        break
            curves.setdefault(mixer, []).append([v for _, v in curve])
            curves.setdefault(f"{mixer}_steps", [[s for s, _ in curve]])
    return curves


TUNED = {"lr": 1e-3, "train_batch_size": 4096, "minibatch_size": 256, "entropy_coeff": 0.01,
         "model": {"encoder": "mlp", "hidden": (256, 256)}}  # fmt: skip
"""The league-player part's settings, for both of its runs: an MLP over the board (in trials here,
twice the env steps per second of a CNN with 4x4 filters, and as good per env step), smaller
batches at a higher learning rate than PPO's defaults."""
WITH_LOOKAHEAD = League(snapshot_every=1, players=(connect_four_lookahead,), player_share=0.75)
"""The league of the league-player and mirror parts: a snapshot every iteration, and the
lookahead player drawn for 3 opponents in 4."""


async def self_play_curve(
    steps: int, every: int, games: int, league: League, settings: dict[str, Any], seed: int = 0
) -> list[list[float]]:
    """Greedy win rates of ``main`` against each fixed player every ``every`` iterations."""
    ma = MultiAgent.self_play(("player_0", "player_1"), league)
    config = A.PPOConfig(env=connect_four, multi_agent=ma, num_workers=2, seed=seed, **settings)
    rows = []
    async with A.PPO(config) as algo:
        policy = algo.learner.by_id["main"]
        start = time.perf_counter()
        async for result in algo.train():
            if result.training_iteration % every == 0 or result.num_env_steps_sampled >= steps:
                seconds = time.perf_counter() - start

                def greedy(obs: Any, rng: np.random.Generator) -> int:
                    return int(policy.greedy_actions({k: v[None] for k, v in obs.items()})[0])

                vs_random = play_games(connect_four, greedy, random_player, games)["win_rate"]
                vs_lookahead = play_games(connect_four, greedy, connect_four_lookahead, games)["win_rate"]
                figures = result["league"]
                rows.append([result.num_env_steps_sampled, seconds, figures["size"], figures["rating"], vs_random,
                             vs_lookahead])  # fmt: skip
                start = time.perf_counter() - seconds  # evaluation time is not training time
            if result.num_env_steps_sampled >= steps:
                break
    return rows


async def maddpg_curves(steps: int, every: int, seeds: list[int]) -> dict[str, list[list[float]]]:
    """Return per agent (the mean of the latest 100 episodes) every ``every`` env steps: MADDPG,
    and DDPG with one policy per agent, on the same settings (MADDPG's defaults, 1 worker)."""
    from asyncflow.rl.envs.mpe_continuous import speaker_listener

    settings = {"train_batch_size": 256, "buffer_size": 200_000, "learning_starts": 2_000, "training_intensity": 64.0,
                "rollout_fragment_length": 25, "exploration_noise": 0.2, "tau": 0.01, "num_workers": 1,
                "timesteps_per_iteration": every}  # fmt: skip
    curves: dict[str, list[list[float]]] = {"steps": [list(range(every, steps + 1, every))]}
    for seed in seeds:
        runs = {
            "MADDPG": (A.MADDPG(A.MADDPGConfig(env=speaker_listener, seed=seed, **settings)), 1),
            "independent DDPG": (A.DDPG(A.DDPGConfig(env=speaker_listener, seed=seed, **settings,
                                                     multi_agent=MultiAgent.per_agent(["speaker_0", "listener_0"]))),
                                 2),  # its episode return sums the two agents'
        }  # fmt: skip
        for name, (algo, agents) in runs.items():
            curve: list[float] = []
            start = time.perf_counter()
            async with algo:
                async for result in algo.train():
                    curve.append(result.episode_return_mean / agents)
                    if len(curve) == len(curves["steps"][0]):
                        break
            curves.setdefault(name, []).append(curve)
            curves.setdefault(f"{name} seconds", []).append([time.perf_counter() - start])
    return curves


def _plot_maddpg(curves: dict[str, list[list[float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    steps = curves["steps"][0]
    for name, color in (("MADDPG", "C0"), ("independent DDPG", "C1")):
        values = np.array(curves[name])
        ax.plot(steps, values.mean(0), color=color, label=f"{name} (mean of {len(values)} seeds)")
        ax.fill_between(steps, values.min(0), values.max(0), color=color, alpha=0.2)
    ax.set(xlabel="env steps", ylabel="return per agent (latest 100 episodes)",
           title="MPE2 simple_speaker_listener (continuous)")  # fmt: skip
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "multi_agent_maddpg.png", dpi=100)


def _plot_mirror(runs: list[list[list[float]]], with_player: list[list[float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for seed, run in enumerate(runs):
        data = np.array(run)
        ax.plot(data[:, 0], data[:, 5], color=f"C{seed + 1}", label=f"MirrorNet, seed {seed}")
    if with_player:
        data = np.array(with_player)
        ax.plot(data[:, 0], data[:, 5], "--", color="C0", label="built-in MLP, seed 0")
    ax.axhline(0.7, color="grey", linewidth=0.8)
    ax.set(xlabel="env steps", ylabel="greedy win rate vs lookahead", ylim=(0, 1),
           title="Self-play PPO, lookahead player in the league")  # fmt: skip
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "multi_agent_mirror.png", dpi=100)


def _plot(curves: dict[str, list[list[float]]], self_play: list[list[float]], with_player: list[list[float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for mixer, color in (("qmix", "C0"), ("vdn", "C1")):
        values, steps = np.array(curves[mixer]), curves[f"{mixer}_steps"][0]
        left.plot(steps, values.mean(0), color=color, label=f"{mixer.upper()} (mean of {len(values)} seeds)")
        left.fill_between(steps, values.min(0), values.max(0), color=color, alpha=0.2)
    left.set(xlabel="env steps", ylabel="greedy return", title="Two-step game (optimum 8)")
    left.legend()
    data = np.array(self_play)
    right.plot(data[:, 0], data[:, 4], color="C0", label="vs random")
    right.plot(data[:, 0], data[:, 5], color="C1", label="vs one-move lookahead")
    if with_player:
        more = np.array(with_player)
        right.plot(more[:, 0], more[:, 4], "--", color="C0", label="vs random (lookahead in the league)")
        right.plot(more[:, 0], more[:, 5], "--", color="C1", label="vs lookahead (lookahead in the league)")
    right.set(xlabel="env steps", ylabel="win rate (greedy)", title="Self-play PPO, connect four", ylim=(0, 1))
    right.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "multi_agent.png", dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5, help="PPO iterations timed (4,000 env steps each)")
    parser.add_argument("--rllib-python", default=None, help="a Python with ray[rllib] and mpe2 (else no RLlib rows)")
    parser.add_argument("--spread-steps", type=int, default=200_000)
    parser.add_argument("--self-play-steps", type=int, default=400_000)
    parser.add_argument("--league-player-steps", type=int, default=1_000_000)
    parser.add_argument("--mirror-steps", type=int, default=600_000, help="the learning test's budget")
    parser.add_argument("--games", type=int, default=200, help="evaluation games against each fixed player")
    parser.add_argument("--maddpg-steps", type=int, default=50_000)
    parser.add_argument("--only", choices=PARTS, action="append", help="run these parts only (default: all)")
    args = parser.parse_args()
    parts = args.only or PARTS
    print(f"# Multi-agent ({machine_line()}); 2 worker processes for each system")

    if "speed" in parts:
        sampling, training = asyncio.run(asyncflow_speed(args.iterations))
        rows: list[list[object]] = [["asyncflow", "sampling", sampling, 1.0],
                                    ["asyncflow", "PPO training", training, 1.0]]  # fmt: skip
        if args.rllib_python:
            peer = rllib_speed(args.rllib_python, args.iterations)
            rows += [["RLlib", "sampling", peer["sampling"], sampling / peer["sampling"]],
                     ["RLlib", "PPO training", peer["training"], training / peer["training"]]]  # fmt: skip
        print_table("MPE2 simple_spread (3 agents), one shared policy: env steps per second",
                    ["system", "what", "env steps/s", "asyncflow's ratio"], rows)  # fmt: skip

    if "spread" in parts:
        print_table(f"PPO on simple_spread to {args.spread_steps:,} env steps, seed 0",
                    ["policies", "env steps", "episode return (all agents)", "mean return per agent", "seconds"],
                    asyncio.run(spread_learning(args.spread_steps)))  # fmt: skip

    curves: dict[str, list[list[float]]] = {}
    if "qmix" in parts:
        curves = asyncio.run(two_step_curves(4_000, 500, [0, 1, 2]))
        steps = curves["qmix_steps"][0]
        print_table("QMIX and VDN on the two-step game (uniform exploration), greedy return, seeds 0-2",
                    ["env steps", *[f"{m.upper()} seed {s}" for m in ("qmix", "vdn") for s in range(3)]],
                    [[step, *[curves[m][s][i] for m in ("qmix", "vdn") for s in range(3)]]
                     for i, step in enumerate(steps)])  # fmt: skip

    self_play: list[list[float]] = []
    with_player: list[list[float]] = []
    columns = ["env steps", "training s", "league size", "Elo", "wins vs random", "wins vs lookahead"]
    if "self-play" in parts:
        self_play = asyncio.run(self_play_curve(args.self_play_steps, 10, args.games, League(snapshot_every=5),
                                                {"entropy_coeff": 0.01}))  # fmt: skip
        print_table(f"Self-play PPO on connect four (league snapshot every 5 iterations), {args.games} games each",
                    columns, self_play)  # fmt: skip
    if "league-player" in parts:
        steps, every = args.league_player_steps, 25
        alone = asyncio.run(self_play_curve(steps, every, args.games, League(snapshot_every=1), TUNED))
        print_table(f"Self-play PPO on connect four, tuned (lr 1e-3, batches of 4,096, a 256x256 MLP), snapshots "
                    f"only, a snapshot every iteration, {args.games} games each", columns, alone)  # fmt: skip
        with_player = asyncio.run(self_play_curve(steps, every, args.games, WITH_LOOKAHEAD, TUNED))
        print_table(f"The same with the lookahead player in the league (drawn for 3 opponents in 4), "
                    f"{args.games} games each", columns, with_player)  # fmt: skip
    if RESULTS.is_dir() and curves and self_play:
        _plot(curves, self_play, with_player)
    if "mirror" in parts:
        seeds, settings = [0, 1, 2], {**TUNED, "model": MirrorNet}
        runs = [asyncio.run(self_play_curve(args.mirror_steps, 25, args.games, WITH_LOOKAHEAD, settings, seed))
                for seed in seeds]  # fmt: skip
        print_table(f"MirrorNet (two 256x256 MLPs over the board and its mirror), the tuned settings, the lookahead "
                    f"player in the league (3 opponents in 4), {args.games} games each: wins vs lookahead (vs random)",
                    ["env steps", *[f"seed {s}" for s in seeds], "training s (seed 0)"],
                    [[runs[0][i][0], *[f"{r[i][5]:.3f} ({r[i][4]:.3f})" for r in runs], runs[0][i][1]]
                     for i in range(min(len(r) for r in runs))])  # fmt: skip
        if RESULTS.is_dir():
            _plot_mirror(runs, with_player)

    if "maddpg" in parts:
        seeds = [0, 1, 2]
        mad = asyncio.run(maddpg_curves(args.maddpg_steps, 5_000, seeds))
        names = ("MADDPG", "independent DDPG")
        print_table("MADDPG and independent DDPG on MPE2 simple_speaker_listener (continuous), return per agent "
                    "(latest 100 episodes), seeds 0-2, 1 worker",
                    ["env steps", *[f"{n} seed {s}" for n in names for s in seeds]],
                    [[step, *[mad[n][s][i] for n in names for s in range(len(seeds))]]
                     for i, step in enumerate(mad["steps"][0])])  # fmt: skip
        print_table("Training seconds per run (each to the last row's env steps)",
                    ["algorithm", *[f"seed {s}" for s in seeds]],
                    [[n, *[mad[f"{n} seconds"][s][0] for s in range(len(seeds))]] for n in names])  # fmt: skip
        if RESULTS.is_dir():
            _plot_maddpg(mad)


if __name__ == "__main__":
    main()
