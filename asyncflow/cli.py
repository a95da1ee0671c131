"""The ``asyncflow`` command line.

asyncflow train ppo --env CartPole-v1 --stop-reward 475
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import math
import os
import sys
from pathlib import Path
from typing import Any

from .errors import AsyncflowError, ConfigError

__all__ = ["main"]


def _parse_sets(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set expects field=value, got {pair!r}")
        key, raw = pair.split("=", 1)
        try:
            value: Any = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        out[key.strip().replace("-", "_")] = value
    return out


def _resolve_env(spec: str) -> Any:
    """``module:function`` names a callable that builds the env; anything else is a gymnasium id."""
    if ":" not in spec or spec.count(":") != 1 or "/" in spec:
        return spec
    module_name, attr = spec.split(":")
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return spec  # not a module: let gymnasium judge the id (it has its own "ns/Name" ids)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"env: module {module_name!r} has no {attr!r}") from None


def _build_parser() -> argparse.ArgumentParser:
    from .algorithms import ALGORITHMS

    parser = argparse.ArgumentParser(prog="asyncflow", description="Distributed RL as asyncio dataflow.")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train an algorithm on an environment")
    train.add_argument("algo", choices=sorted(ALGORITHMS), help="algorithm")
    train.add_argument(
        "--env",
        help="gymnasium id (CartPole-v1), or module:function returning an env (default: the algorithm's own)",
    )
    train.add_argument("--num-workers", type=int, help="rollout worker processes (0: sample in this process)")
    train.add_argument("--seed", type=int, help="random seed")
    train.add_argument("--stop-reward", type=float, help="stop at this mean episode return")
    train.add_argument("--stop-timesteps", type=int, help="stop after this many env steps")
    train.add_argument("--stop-time", type=float, help="stop after this many seconds")
    train.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="any config field")
    train.add_argument("--logdir", type=Path, default=Path("runs"), help="where run folders go (default: runs)")
    train.add_argument("--debug", action="store_true", help="show full tracebacks")
    return parser


def _fmt(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.1f}"


def _train(args: argparse.Namespace) -> int:
    from .algorithms import ALGORITHMS
    from .experiment import Stop, make_run_dir, run_experiment

    cls = ALGORITHMS[args.algo]
    fields = _parse_sets(args.set)
    if args.env is not None:
        fields["env"] = _resolve_env(args.env)
    if args.num_workers is not None:
        fields["num_workers"] = args.num_workers
    if args.seed is not None:
        fields["seed"] = args.seed
    config = cls.config_class(**fields)  # ConfigError before anything starts
    algo = cls(config)
    stop = Stop(args.stop_reward, args.stop_timesteps, args.stop_time)
    env_name = config.env if isinstance(config.env, str) else getattr(config.env, "__name__", "env")
    run_dir = make_run_dir(args.logdir, args.algo, env_name)
    print(f"asyncflow: training {args.algo} on {env_name} with {config.num_workers} workers; logs in {run_dir}")

    def show(r: dict[str, Any]) -> None:
        print(
            f"iter {r['training_iteration']:4d}  steps {r['num_env_steps_sampled']:8d}  "
            f"{r['num_env_steps_sampled_throughput_per_sec']:8.0f} steps/s  "
            f"return {_fmt(r['episode_return_mean'])}  ({r['time_total_s']:.1f}s)",
            flush=True,
        )

    try:
        last, reason = asyncio.run(run_experiment(algo, stop, run_dir, show))
    except KeyboardInterrupt:
        print(f"\nasyncflow: interrupted; workers stopped. Results so far are in {run_dir}", file=sys.stderr)
        return 130
    if last is not None:
        print(
            f"done: {reason} after {last['training_iteration']} iterations, "
            f"{last['num_env_steps_sampled']} env steps, {last['time_total_s']:.1f}s; "
            f"return mean {_fmt(last['episode_return_mean'])}. Results: {run_dir}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    # Before torch is imported here: the fork server imports it in parallel.
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "train":
        from .actors import start_fork_server

        start_fork_server()
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            code = _train(args)
    except AsyncflowError as exc:
        if args.debug:
            raise
        print(f"asyncflow: error: {exc}", file=sys.stderr)
        return 2
    if argv is None:
        # Run from the shell and finished: every worker is stopped and every file
        # closed. Skip the interpreter's teardown, which takes about a second
        # with torch loaded and has nothing left to do.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
