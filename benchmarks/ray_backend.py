"""asyncflow's own actors (``process``) against the same plans on Ray (``ray``), and RLlib's
PPO as the peer, all on one Ray instance that this script starts (2 CPUs, no dashboard).

1. Actor calls: calls/s one at a time, calls/s with 64 in flight, and a 4 MiB numpy echo
   (round trips/s), for ``open_runtime("process")`` and ``open_runtime("ray")``.
2. PPO on CartPole-v1 until the mean return of the last 100 episodes reaches 475: wall time
   from launching a fresh Python process, and env steps/s over the run. asyncflow: its
   default PPOConfig with 2 rollout workers (on ``process``, then ``ray``). RLlib: its tuned
   CartPole PPO (``rllib/tuned_examples/ppo/cartpole_ppo.py`` in ray-project/ray: lr 3e-4,
   6 epochs, vf_loss_coeff 0.01, one hidden layer of 32 linear units with the value head
   shared, gamma 0.99), on RLlib's default API stack, with 2 env runners as asyncflow's 2
   workers, checked after each ``train()`` as asyncflow's ``--stop-reward`` is.

Every contender runs in its own fresh process; both Ray contenders attach to the same
instance. 2 worker processes at most: this machine has 2 cores.

    pip install -e '.[bench]'   # ray[rllib] pins its own gymnasium: use a separate venv
    python benchmarks/ray_backend.py [--seeds 0 1 2] [--budget 300000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table, ratio

TARGET = 475.0


# -- what each fresh process runs -------------------------------------------


class Echo:
    def echo(self, x: Any) -> Any:
        return x


async def _rate(call: Any, seconds: float, batch: int) -> float:
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        await asyncio.gather(*(call() for _ in range(batch)))
        done += batch
    return done / (time.perf_counter() - started)


async def _calls(backend: str, address: str | None) -> dict[str, float]:
    import numpy as np

    import asyncflow

    options = {"address": address} if backend == "ray" else {}
    async with asyncflow.open_runtime(backend, **options) as rt:  # type: ignore[arg-type]
        actor = await rt.spawn(Echo)
        small, big = 1, np.ones(1 << 20, np.float32)  # 4 MiB
        await _rate(lambda: actor.echo(small), 0.5, 1)  # warm
        return {
            "one_at_a_time": await _rate(lambda: actor.echo(small), 3.0, 1),
            "in_flight_64": await _rate(lambda: actor.echo(small), 3.0, 64),
            "echo_4mib": await _rate(lambda: actor.echo(big), 3.0, 1),
        }


async def _asyncflow_ppo(backend: str, address: str | None, seed: int, budget: int, launched: float) -> dict[str, Any]:
    from asyncflow.algorithms import PPO, PPOConfig

    options: dict[str, Any] = {"backend": backend, "address": address} if backend == "ray" else {}
    config = PPOConfig(env="CartPole-v1", num_workers=2, seed=seed, **options)
    started = time.time()
    async with PPO(config) as algo:
        async for result in algo.train():
            steps = result["num_env_steps_sampled"]
            if result["episode_return_mean"] >= TARGET or steps >= budget:
                break
    return _outcome(launched, started, steps, result["episode_return_mean"])


def _rllib_ppo(address: str, seed: int, budget: int, launched: float) -> dict[str, Any]:
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig

    ray.init(address=address)
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=2)
        .rl_module(model_config={"fcnet_hiddens": [32], "fcnet_activation": "linear", "vf_share_layers": True})
        .training(gamma=0.99, lr=0.0003, num_epochs=6, vf_loss_coeff=0.01)
        .debugging(seed=seed)
    )
    started = time.time()
    algo = config.build_algo()
    try:
        while True:
            result = algo.train()
            runners = result.get("env_runners", {})
            mean = runners.get("episode_return_mean", float("nan"))
            steps = result.get("num_env_steps_sampled_lifetime", runners.get("num_env_steps_sampled_lifetime", 0))
            if mean >= TARGET or steps >= budget:
                break
    finally:
        algo.stop()
    return _outcome(launched, started, steps, mean)


def _outcome(launched: float, started: float, steps: int, mean: float) -> dict[str, Any]:
    now = time.time()
    return {"from_launch_s": now - launched, "steps": int(steps), "steps_per_s": float(steps) / (now - started),
            "solved": bool(mean >= TARGET), "return": float(mean)}  # fmt: skip


def _child(args: argparse.Namespace) -> None:
    if args.child == "calls":
        out: Any = asyncio.run(_calls(args.backend, args.address))
    elif args.child == "ppo":
        out = asyncio.run(_asyncflow_ppo(args.backend, args.address, args.seed, args.budget, args.launched))
    else:
        out = _rllib_ppo(args.address, args.seed, args.budget, args.launched)
    print("RESULT " + json.dumps(out), flush=True)


# -- the orchestra -----------------------------------------------------------

_HOLDER = """
import sys, ray
ray.init(num_cpus=2, include_dashboard=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
ray.shutdown()
"""


def _run(*argv: str, timeout: float = 900) -> dict[str, Any]:
    cmd = [sys.executable, __file__, *argv, "--launched", repr(time.time())]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))  # type: ignore[no-any-return]
    raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stderr[-4000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=300_000, help="env steps before a PPO run gives up")
    parser.add_argument("--child", choices=["calls", "ppo", "rllib"], help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="process", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--launched", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    import ray

    print(f"# asyncflow on its own actors and on Ray; RLlib on the same Ray ({machine_line()}, Ray {ray.__version__})")
    print("# 2 worker processes at most (2 cores); one local Ray instance with num_cpus=2, no dashboard")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    holder.stdout.readline()  # its GCS address: Ray is up
    # "auto" finds it (and Ray's auth token with it; an explicit HOST:PORT here is refused
    # for a token that Ray 2.60 does not send).
    address = "auto"
    try:
        _report(address, args.seeds, args.budget)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


def _report(address: str, seeds: list[int], budget: int) -> None:
    calls = {b: _run("--child", "calls", "--backend", b, "--address", address) for b in ("process", "ray")}
    rows = []
    for key, label in (("one_at_a_time", "calls/s, one at a time"), ("in_flight_64", "calls/s, 64 in flight"),
                       ("echo_4mib", "4 MiB echo, round trips/s")):  # fmt: skip
        rows.append([label, calls["process"][key], calls["ray"][key], ratio(calls["process"][key], calls["ray"][key])])
    print_table("actor calls", ["measure", "process", "ray", "process / ray"], rows)

    runs: dict[str, list[dict[str, Any]]] = {"asyncflow process": [], "asyncflow ray": [], "RLlib ray": []}
    for seed in seeds:
        common = ["--address", address, "--seed", str(seed), "--budget", str(budget)]
        runs["asyncflow process"].append(_run("--child", "ppo", "--backend", "process", *common))
        runs["asyncflow ray"].append(_run("--child", "ppo", "--backend", "ray", *common))
        runs["RLlib ray"].append(_run("--child", "rllib", *common))
        for name, results in runs.items():
            r = results[-1]
            print(f"  seed {seed} {name}: {r['from_launch_s']:.1f} s, {r['steps']} steps, solved={r['solved']}")
    rows = []
    for name, results in runs.items():
        solved = [r["from_launch_s"] for r in results if r["solved"]]
        rows.append([name, f"{len(solved)}/{len(results)}", statistics.median(solved) if solved else None,
                     statistics.median(r["steps_per_s"] for r in results),
                     statistics.median(r["steps"] for r in results)])  # fmt: skip
    print_table(f"PPO CartPole-v1 to {TARGET:g}, median over seeds {seeds}",
                ["run", "solved", "time to 475 (s)", "env steps/s", "env steps"], rows)  # fmt: skip
    times = {row[0]: row[2] for row in rows}
    rllib = times["RLlib ray"]
    for name in ("asyncflow process", "asyncflow ray"):
        if times[name] and rllib:
            print(f"# {name} solves in {times[name] / rllib:.2f}x RLlib's time on the same Ray (target: <= 0.5x)")


if __name__ == "__main__":
    main()
