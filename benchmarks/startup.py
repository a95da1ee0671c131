"""Start-up: wall time from launching a fresh Python process to the first
training result, phase by phase, asyncflow beside its peers in the same run.

- torch import: ``python -c "import torch"``, the floor every peer pays;
- asyncflow: ``PPO(PPOConfig(env="CartPole-v1", num_workers=2))`` in a script,
  then ``async with algo`` and the first ``train()`` result (2 worker processes);
- stable-baselines3 (when installed): ``PPO("MlpPolicy", "CartPole-v1")``, then
  its first ``learn`` call of one rollout (2,048 steps) and one update;
- RLlib (when installed): ``PPOConfig().environment("CartPole-v1")
  .env_runners(num_env_runners=2).build()`` on a local Ray, then one ``train()``.

Each phase is the time from launch to the end of that phase (cumulative), the
median over ``--repeats`` fresh processes. The targets (issue 13): asyncflow's
first result at most 2.5 s, or at most 1.45x the torch import.

    python benchmarks/startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table

# Each script gets its launch time (time.time() in the parent just before the
# process starts) as argv[1] and prints {phase: seconds since launch} as JSON.
_PRELUDE = textwrap.dedent(
    """
    import json, sys, time
    _t0 = float(sys.argv[1])
    marks = {"interpreter": time.time() - _t0}
    def mark(name):
        marks[name] = time.time() - _t0
    """
)

_TORCH = _PRELUDE + textwrap.dedent(
    """
    import torch
    mark("import torch")
    print(json.dumps(marks))
    """
)

_ASYNCFLOW = _PRELUDE + textwrap.dedent(
    """
    import asyncio
    from asyncflow.algorithms import PPO, PPOConfig
    mark("imports")
    algo = PPO(PPOConfig(env="CartPole-v1", num_workers=2, seed=0))
    mark("config checked")

    async def main():
        async with algo:
            mark("workers ready")
            async for result in algo.train():
                mark("first result")
                timers = result["timers"]
                marks["(first sample alone)"] = timers["sample_time_ms"] / 1000
                marks["(first update alone)"] = timers["learn_time_ms"] / 1000
                break

    asyncio.run(main())
    mark("closed")
    print(json.dumps(marks))
    """
)

_SB3 = _PRELUDE + textwrap.dedent(
    """
    from stable_baselines3 import PPO
    mark("imports")
    model = PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu")
    mark("workers ready")
    model.learn(total_timesteps=model.n_steps)  # one rollout, one update
    mark("first result")
    print(json.dumps(marks))
    """
)

_RLLIB = _PRELUDE + textwrap.dedent(
    """
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    mark("imports")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    mark("runtime")
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2).build()
    mark("workers ready")
    algo.train()
    mark("first result")
    algo.stop()
    ray.shutdown()
    mark("closed")
    print(json.dumps(marks))
    """
)

PHASES = ["interpreter", "import torch", "imports", "config checked", "runtime", "workers ready", "first result"]


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def run_once(script: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", script, repr(time.time())], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def median_marks(script: str, repeats: int) -> dict[str, float]:
    runs = [run_once(script) for _ in range(repeats)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"# start-up, seconds from launch, median of {args.repeats} fresh processes ({machine_line()})")
    print("# asyncflow and RLlib start 2 worker processes; SB3 steps its env in the driver")
    systems = [("python -c 'import torch'", _TORCH, None), ("asyncflow PPO", _ASYNCFLOW, None),
               ("stable-baselines3 PPO", _SB3, "stable_baselines3"), ("RLlib PPO", _RLLIB, "ray.rllib")]  # fmt: skip
    results: dict[str, dict[str, float] | None] = {}
    missing: dict[str, str] = {}
    for name, script, needs in systems:
        if needs is not None and not _installed(needs):
            results[name], missing[name] = None, "not installed"
            continue
        try:
            results[name] = median_marks(script, args.repeats)
        except RuntimeError as exc:  # a peer installed without what it imports (RLlib without ray[tune])
            if needs is None:
                raise
            print(f"# {name} did not start: {str(exc).strip().splitlines()[-1]}")
            results[name], missing[name] = None, "did not start"
    header = ["phase (s from launch)", *(f"{n} ({missing[n]})" if n in missing else n for n in results)]
    extra = [k for r in results.values() if r for k in r if k not in PHASES]
    rows = [[phase, *((r or {}).get(phase) for r in results.values())] for phase in PHASES + list(dict.fromkeys(extra))]
    print_table("start-up phases", header, rows)
    torch_s = results["python -c 'import torch'"]["import torch"]  # type: ignore[index]
    ours = results["asyncflow PPO"]["first result"]  # type: ignore[index]
    summary = [["asyncflow PPO", ours, f"{ours / torch_s:.2f}x", "-"]]
    for name, r in results.items():
        if r is not None and name.endswith("PPO") and name != "asyncflow PPO":
            summary.append([name, r["first result"], f"{r['first result'] / torch_s:.2f}x",
                            f"{r['first result'] / ours:.2f}x"])  # fmt: skip
    print_table(
        f"launch to the first result (torch import {torch_s:.2f} s; target: asyncflow <= 2.5 s or <= 1.45x torch)",
        ["system", "seconds", "/ torch import", "/ asyncflow"],
        summary,
    )


if __name__ == "__main__":
    main()
