"""The ``asyncflow`` command line.

asyncflow train ppo --env CartPole-v1 --stop-reward 475 --checkpoint-every 10
asyncflow train --config ppo.yaml --set lr=0.001
asyncflow train --resume runs/ppo_CartPole-v1_20261129-120000 --stop-timesteps 200000
asyncflow evaluate runs/.../checkpoints/checkpoint_000010.ckpt --episodes 10 --video run.gif
asyncflow export runs/.../checkpoints/checkpoint_000010.ckpt -o policy.pt
asyncflow plot runs/ppo_* -o curve.png
asyncflow sweep ppo --env CartPole-v1 --seeds 0-9 --grid lr=1e-3,3e-3 --stop-timesteps 100000
asyncflow compare runs/sweep_ppo_CartPole-v1_* -o compare.png
asyncflow tune ppo --env CartPole-v1 --space "lr=loguniform(1e-4,1e-2)" --trials 20 --stop-timesteps 50000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import _interrupts
from ._fields import parse_value
from .errors import AsyncflowError, ConfigError, RemoteTraceback
from .tune import PRUNERS

__all__ = ["main"]


TRUST_HELP = ("load what a checkpoint holds only as a pickle, which runs code when loaded: a config's "
              "lambda, environments mid-episode, checkpoints written before 2026-12. Only for files "
              "you trust")  # fmt: skip


def _parse_sets(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set expects field=value, got {pair!r}")
        key, raw = pair.split("=", 1)
        out[key.strip().replace("-", "_")] = parse_value(raw)
    return out


def _config_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that make a run's config (``train``; each trial of a ``sweep``)."""
    parser.add_argument(
        "--env",
        help="gymnasium id (CartPole-v1), or module:function returning an env (default: the algorithm's own)",
    )
    parser.add_argument("--config", type=Path, help="a .yaml, .toml or .json file of config fields")
    parser.add_argument("--num-workers", type=int, help="rollout worker processes (0: sample in this process)")
    parser.add_argument(
        "--backend",
        choices=["process", "ray", "local"],
        help="where workers run: processes on this machine (default), Ray actors, or in-process",
    )
    parser.add_argument("--address", help="--backend ray: the Ray cluster ('auto' or HOST:PORT; default: a local Ray)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="any config field")


def _stop_arguments(parser: argparse.ArgumentParser) -> None:
    """When a run stops, and what it writes besides its logs (``train``; each trial of a ``sweep``)."""
    parser.add_argument("--stop-reward", type=float, help="stop at this mean episode return")
    parser.add_argument(
        "--stop-on-evaluation",
        action="store_true",
        help="--stop-reward is for the evaluation return (needs evaluation_interval)",
    )
    parser.add_argument("--stop-timesteps", type=int, help="stop after this many env steps (offline: rows trained)")
    parser.add_argument("--stop-time", type=float, help="stop after this many seconds")
    parser.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                       help="save a checkpoint every N iterations and at the end")  # fmt: skip
    parser.add_argument("--tensorboard", action="store_true", help="also write TensorBoard event files")
    parser.add_argument("--mlflow", nargs="?", const=True, metavar="URI",
                        help="also log to MLflow (default: an SQLite store in the run folder)")  # fmt: skip
    parser.add_argument("--wandb", nargs="?", const=True, metavar="PROJECT",
                        help="also log to Weights & Biases (offline unless WANDB_MODE says otherwise)")  # fmt: skip


def _trials_arguments(parser: argparse.ArgumentParser, what: str, folder: str, resume_help: str) -> None:
    """Where the trials of a sweep or a study run, where their folder goes, and resuming it."""
    parser.add_argument("--cores", type=int, help="cores to pack the trials onto (default: this machine's)")
    parser.add_argument("--logdir", type=Path, default=Path("runs"), help=f"where the {what}'s folder goes")
    parser.add_argument("--resume", type=Path, metavar=folder, help=resume_help)
    parser.add_argument("--debug", action="store_true", help="show full tracebacks")


def _cores(args: argparse.Namespace) -> int:
    """``--cores``, checked (default: this machine's)."""
    cores = args.cores if args.cores is not None else (os.cpu_count() or 1)
    if cores < 1:
        raise ConfigError(f"--cores must be >= 1, not {cores}")
    return int(cores)


def _build_parser() -> argparse.ArgumentParser:
    from .algorithms import ALGORITHMS

    parser = argparse.ArgumentParser(prog="asyncflow", description="Distributed RL as asyncio dataflow.")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train an algorithm on an environment")
    train.add_argument("algo", nargs="?", choices=sorted(ALGORITHMS), help="algorithm (not with --resume)")
    _config_arguments(train)
    train.add_argument("--seed", type=int, help="random seed")
    train.add_argument("--multi-agent", choices=["shared", "per-agent", "self-play"],
                       help="a multi-agent env's agents: one shared policy, one policy each, or self-play against "
                            "a league of past selves (two-player games)")  # fmt: skip
    train.add_argument("--self-play", action="store_true", help="--multi-agent self-play")
    train.add_argument("--league-player", action="append", default=[], metavar="MODULE:FUNCTION",
                       help="self-play: a fixed opponent in the league beside the snapshots, a function "
                            "(observation, rng) -> action (repeatable; "
                            "asyncflow.rl.envs.two_player:connect_four_lookahead)")  # fmt: skip
    train.add_argument("--output", help="write what the workers sample to this folder, as Minari datasets")
    train.add_argument("--input", help="learn from this dataset folder (offline algorithms: bc, marwil, cql)")
    _stop_arguments(train)
    train.add_argument("--logdir", type=Path, default=Path("runs"), help="where run folders go (default: runs)")
    train.add_argument("--resume", type=Path, metavar="RUN_DIR|CHECKPOINT",
                       help="continue a run from its latest checkpoint (or from the checkpoint named)")  # fmt: skip
    train.add_argument("--trust-code", action="store_true", help=TRUST_HELP)
    train.add_argument("--debug", action="store_true", help="show full tracebacks")
    evaluate = sub.add_parser("evaluate", help="run a checkpoint's greedy policy")
    evaluate.add_argument("checkpoint", type=Path)
    evaluate.add_argument("--episodes", type=int, default=10)
    evaluate.add_argument("--seed", type=int, default=10_000, help="seed of the first episode")
    evaluate.add_argument("--video", type=Path, help="record the first episode to a .gif (or .mp4 with imageio-ffmpeg)")
    evaluate.add_argument("--video-frames", type=int,
                          help="record at most this many frames of the episode (default 1,000)")  # fmt: skip
    evaluate.add_argument("--output", type=Path, help="write the episodes to this folder, as a Minari dataset")
    evaluate.add_argument("--explore", action="store_true", help="sample actions (default: greedy)")
    evaluate.add_argument("--trust-code", action="store_true", help=TRUST_HELP)
    evaluate.add_argument("--debug", action="store_true", help="show full tracebacks")
    export = sub.add_parser("export", help="write a checkpoint's greedy policy as a TorchScript (or ONNX) file")
    export.add_argument("checkpoint", type=Path)
    export.add_argument("-o", "--output", type=Path, default=Path("policy.pt"))
    export.add_argument("--format", choices=["torchscript", "onnx"], default="torchscript")
    export.add_argument("--policy", help="a multi-agent checkpoint's policy to export (its id)")
    export.add_argument("--trust-code", action="store_true", help=TRUST_HELP)
    export.add_argument("--debug", action="store_true", help="show full tracebacks")
    plot = sub.add_parser("plot", help="draw learning curves of run folders")
    plot.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR")
    plot.add_argument("-o", "--output", type=Path, default=Path("curve.png"))
    plot.add_argument("--smooth", type=float, default=0.6, help="moving-average weight in [0, 1)")
    plot.add_argument("--debug", action="store_true", help="show full tracebacks")
    sweep = sub.add_parser("sweep", help="seeds and a grid of settings, as trials in parallel on this machine")
    sweep.add_argument("algo", nargs="?", choices=sorted(ALGORITHMS), help="algorithm (not with --resume)")
    sweep.add_argument("--seeds", default="0", help="seeds: 0-9, 0,3,7 or both (default: 0)")
    sweep.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2,...",
                       help="values of one config field (env too); several --grid: every combination")  # fmt: skip
    _config_arguments(sweep)
    _stop_arguments(sweep)
    _trials_arguments(sweep, "sweep", "SWEEP_DIR", "run what an interrupted sweep left")
    tune = sub.add_parser("tune", help="search config values with Optuna: trials in parallel, pruning, resuming")
    tune.add_argument("algo", nargs="?", choices=sorted(ALGORITHMS), help="algorithm (not with --resume)")
    tune.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="FIELD=KIND(...)",
        help="a field's range: loguniform(a,b), uniform(a,b), int(a,b), logint(a,b), choice(v1,v2,...)",
    )
    tune.add_argument("--trials", type=int, help="trials in the study (default 20; with --resume: raise it)")
    tune.add_argument(
        "--metric",
        default="episode_return_mean",
        help="a progress.csv column (default: "
        "episode_return_mean; evaluation/episode_return_mean needs evaluation_interval)",
    )
    tune.add_argument("--mode", choices=["max", "min"], default="max", help="whether the metric should rise or fall")
    tune.add_argument(
        "--prune",
        choices=PRUNERS,
        default="median",
        help="stop trials whose curve falls behind: median, successive halving, or none",
    )
    tune.add_argument(
        "--report-every",
        type=int,
        metavar="STEPS",
        help="env steps between a trial's reports to the pruner (default: a tenth of --stop-timesteps)",
    )
    tune.add_argument("--seed", type=int, default=0, help="every trial's seed, and the sampler's")
    _config_arguments(tune)
    _stop_arguments(tune)
    _trials_arguments(tune, "study", "STUDY_DIR", "go on with an interrupted study")
    pbt = sub.add_parser("pbt", help="population-based training: a population of trainers in one process")
    pbt.add_argument("algo", choices=sorted(ALGORITHMS), help="algorithm")
    pbt.add_argument("--mutate", action="append", default=[], metavar="FIELD=KIND(...)",
                     help="a field to search and its range, as tune's --space (lr, or a field the algorithm "
                          "can change while training)")  # fmt: skip
    pbt.add_argument("--population", type=int, default=4, help="members (default 4)")
    pbt.add_argument("--interval", type=int, default=5, help="iterations between exploit and explore (default 5)")
    pbt.add_argument("--quantile", type=float, default=0.25,
                     help="the bottom quantile exploits the top one (default 0.25)")  # fmt: skip
    pbt.add_argument("--resample-probability", type=float, default=0.25,
                     help="chance that an explored value is drawn anew, not perturbed by 0.8 or 1.2")  # fmt: skip
    pbt.add_argument("--metric", default="episode_return_mean", help="the progress.csv column members are ranked by")
    pbt.add_argument("--initial", action="append", default=[], metavar="FIELD=V1,V2,...",
                     help="the members' first values of a field, one per member (default: drawn)")  # fmt: skip
    pbt.add_argument("--seed", type=int, default=0, help="member i runs with seed SEED+i; also PBT's own draws")
    _config_arguments(pbt)
    pbt.add_argument("--stop-reward", type=float, help="stop once the best member's metric reaches this")
    pbt.add_argument("--stop-timesteps", type=int, help="stop once every member has sampled this many env steps")
    pbt.add_argument("--stop-time", type=float, help="stop after this many seconds")
    pbt.add_argument("--logdir", type=Path, default=Path("runs"), help="where the population's folder goes")
    pbt.add_argument("--debug", action="store_true", help="show full tracebacks")
    compare = sub.add_parser("compare", help="compare settings over runs: IQM with 95%% bootstrap intervals")
    compare.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="run folders, or folders holding them")
    compare.add_argument("-o", "--output", type=Path, help="also draw the curves and performance profiles here")
    compare.add_argument("--score", choices=["final", "best"], default="final", help="a run's score: last or best")
    compare.add_argument("--at-steps", type=float, help="score each run at this many env steps (equal frames)")
    compare.add_argument("--reps", type=int, default=50_000, help="bootstrap resamples")
    compare.add_argument("--debug", action="store_true", help="show full tracebacks")
    return parser


def _fmt(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.1f}"


def _make_config(cls: Any, args: argparse.Namespace) -> Any:
    from .rl.data.state_tree import storable
    from .rl.envs.make import resolve_env

    fields: dict[str, Any] = {}
    if args.config is not None:
        from .config_file import load_config_file

        from_file = load_config_file(args.config)
        if isinstance(from_file.get("env"), str):
            from_file["env"] = resolve_env(from_file["env"])
        try:
            cls.config_class(**from_file)
        except ConfigError as exc:
            raise ConfigError(f"{args.config}: {exc}") from None
        fields.update(from_file)
    players = getattr(args, "league_player", [])
    kind = "self-play" if getattr(args, "self_play", False) else getattr(args, "multi_agent", None)
    kind = "self-play" if players and kind is None else kind
    if players and kind != "self-play":
        raise ConfigError(f"--league-player: a self-play league's opponent; got --multi-agent {kind}")
    if args.env is not None:
        fields["env"] = resolve_env(args.env)
        caps = cls.recipe.capabilities
        multi = kind is not None or caps.multi_agent or caps.team
        if multi and callable(fields["env"]) and not storable(fields["env"]):
            fields["env"] = args.env  # a closure (PettingZoo's parallel_env): named, it can be checkpointed
    if args.num_workers is not None:
        fields["num_workers"] = args.num_workers
    if args.seed is not None:
        fields["seed"] = args.seed
    if args.output is not None:
        fields["output"] = args.output
    if args.input is not None:
        if cls.recipe.samples:
            from .algorithms import ALGORITHMS

            offline = ", ".join(sorted(n for n, c in ALGORITHMS.items() if not c.recipe.samples))
            raise ConfigError(f"--input: {cls.recipe.name} learns from an env; these learn from a dataset: {offline}")
        fields["input"] = args.input
    if kind is not None:
        fields["multi_agent"] = _multi_agent(kind, fields.get("env"), players)
    fields.update(_placement(args))
    fields.update(_parse_sets(args.set))
    return cls.config_class(**fields)  # ConfigError before anything starts


def _multi_agent(kind: str, env: Any, players: list[str]) -> Any:
    """``--multi-agent``: the mapping for the env's agents (built once here to learn them);
    ``players``: the league's fixed players (``--league-player``)."""
    from .rl.envs.make import import_attribute
    from .rl.envs.multi_agent import make_multi_agent_env
    from .rl.multi_agent import League, MultiAgent

    if env is None:
        raise ConfigError(f"--multi-agent {kind}: give the multi-agent env (--env module:function)")
    probe = make_multi_agent_env(env)
    agents = list(probe.possible_agents)
    probe.close()
    if kind == "shared":
        return MultiAgent.shared()
    if kind == "per-agent":
        return MultiAgent.per_agent(agents)
    league = League(players=tuple(import_attribute(p, "--league-player") for p in players))
    return MultiAgent.self_play(agents, league)


def _placement(args: argparse.Namespace) -> dict[str, Any]:
    """``--backend`` and ``--address`` as config fields (an address implies Ray)."""
    fields: dict[str, Any] = {}
    if args.backend is not None:
        fields["backend"] = args.backend
    if args.address is not None:
        fields["address"] = args.address
        fields.setdefault("backend", "ray")
    return fields


class _Terminated(Exception):
    """SIGTERM arrived (``kill``, ``docker stop``, a job scheduler's time limit)."""


async def _stopped_by_sigterm(coro: Any) -> Any:
    """Run ``coro``; SIGTERM cancels it as Ctrl-C does, so the workers are stopped
    and their segments unlinked in order, then raises ``_Terminated``."""
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _train(args: argparse.Namespace) -> int:
    from .algorithms import ALGORITHMS, Algorithm
    from .experiment import Progress, Stop, make_run_dir, run_experiment

    if args.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0, not {args.checkpoint_every}")
    stop = Stop(args.stop_reward, args.stop_timesteps, args.stop_time, on_evaluation=args.stop_on_evaluation)
    made: list[Path] = []
    if args.resume is not None:
        if args.algo or args.config or args.env or args.set or args.num_workers is not None or args.seed is not None:
            raise ConfigError(
                "--resume continues a run with its saved config; give only stop conditions, logging, "
                "--backend and --address"
            )
        run_dir, checkpoint = _resume_point(args.resume)
        algo = Algorithm.restore(checkpoint, trust_code=args.trust_code, **_placement(args))  # may resume elsewhere
        episodes = ("with its environments mid-episode" if args.trust_code
                    else "its environments starting new episodes; --trust-code restores them mid-episode")  # fmt: skip
        print(f"asyncflow: resuming {algo.name} from {checkpoint}, {episodes}")
        made.append(run_dir)
        target: Path | Any = run_dir
    else:
        if args.trust_code:
            raise ConfigError("--trust-code is for loading a checkpoint (with --resume)")
        if args.algo is None:
            raise ConfigError("train: name an algorithm (" + ", ".join(sorted(ALGORITHMS)) + ")")
        cls = ALGORITHMS[args.algo]
        config = _make_config(cls, args)
        algo = cls(config)  # the env and the model are checked here, in this process
        env = config.env if isinstance(config.env, str) else getattr(config.env, "__name__", "env")
        _interrupts.check()  # before anything starts
        name = args.algo

        def target() -> Path:  # made once the algorithm has started: a run that cannot start leaves none
            made.append(make_run_dir(args.logdir, name, env))
            print(f"asyncflow: training {name} on {env} with {config.rollouts.num_workers} workers; logs in {made[0]}")
            return made[0]

    if args.stop_on_evaluation and algo.config.evaluation.interval is None:
        raise ConfigError("--stop-on-evaluation needs evaluation_interval (--set evaluation_interval=N)")
    _interrupts.release()  # from here, asyncio's handler: Ctrl-C cancels the run
    progress = Progress(stop)
    try:
        experiment = run_experiment(algo, stop, target, progress.update, checkpoint_every=args.checkpoint_every,
                                    tensorboard=args.tensorboard, resume=args.resume is not None,
                                    mlflow=args.mlflow, wandb=args.wandb)  # fmt: skip
        last, reason = asyncio.run(_stopped_by_sigterm(experiment))
    except (KeyboardInterrupt, _Terminated) as stopped:
        progress.close()
        how, code = ("interrupted", 130) if isinstance(stopped, KeyboardInterrupt) else ("terminated", 143)
        where = f" Results so far are in {made[0]}" if made else ""
        print(f"\nasyncflow: {how}; workers stopped.{where}", file=sys.stderr)
        return code
    progress.close()
    if last is not None:
        print(
            f"done: {reason} after {last['training_iteration']} iterations, "
            f"{last['num_env_steps_sampled']} env steps, {last['time_total_s']:.1f}s; "
            f"return mean {_fmt(last['episode_return_mean'])}. Results: {made[0]}"
        )
    return 0


def _resume_point(given: Path) -> tuple[Path, Path]:
    """The run folder and the checkpoint that ``--resume`` names: a run folder (its newest
    checkpoint), or a checkpoint file in one (``RUN/checkpoints/checkpoint_N.ckpt``). A damaged
    newest checkpoint is an error that names the newest sound one."""
    from .algorithms._checkpoint import read_checkpoint
    from .errors import CheckpointError, CheckpointImportError, CheckpointTrustError
    from .experiment import checkpoints

    if given.is_file():
        if given.parent.name != "checkpoints":
            raise ConfigError(f"--resume {given}: a checkpoint file continues the run folder it is in "
                              "(RUN/checkpoints/FILE); this one is in none")  # fmt: skip
        return given.parent.parent, given
    if not given.is_dir():
        raise ConfigError(f"--resume {given}: no such run folder or checkpoint file")
    found = checkpoints(given)
    if not found:
        raise ConfigError(f"--resume: {given} has no checkpoints (train with --checkpoint-every N)")
    newest = found[-1]
    try:
        read_checkpoint(newest)
    except (CheckpointImportError, CheckpointTrustError):
        pass  # sound; what it needs is said when it is restored
    except CheckpointError as damaged:
        for older in reversed(found[:-1]):
            try:
                read_checkpoint(older)
            except (CheckpointImportError, CheckpointTrustError):
                pass
            except CheckpointError:
                continue
            raise ConfigError(f"--resume: the newest checkpoint cannot be loaded ({damaged}); the newest sound "
                              f"one is {older}: resume from it with --resume {older}") from None  # fmt: skip
        raise ConfigError(f"--resume: the newest checkpoint cannot be loaded ({damaged}), "
                          f"and no older one of {given} can either") from None  # fmt: skip
    return given, newest


def _evaluate(args: argparse.Namespace) -> int:
    from .evaluate import evaluate

    frames = {} if args.video_frames is None else {"video_frames": args.video_frames}
    result = evaluate(args.checkpoint, args.episodes, seed=args.seed, video=args.video, trust_code=args.trust_code,
                      output=args.output, explore=args.explore, **frames)  # fmt: skip
    summary: dict[str, Any] = {"episodes": len(result.returns), "return_mean": result.mean, "return_std": result.std,
               "length_mean": sum(result.lengths) / len(result.lengths)}  # fmt: skip
    if result.policy_returns is not None:  # a multi-agent checkpoint: each agent's own return, by policy
        summary["policy_return_mean"] = {p: sum(r) / len(r) for p, r in result.policy_returns.items() if r}
    print(json.dumps(summary))
    print(f"return {result.mean:.1f} +- {result.std:.1f} over {len(result.returns)} episodes"
          + (f"; video: {result.video}" if result.video else "")
          + (f"; experiences: {args.output}" if args.output else ""))  # fmt: skip
    return 0


def _export(args: argparse.Namespace) -> int:
    from .export import export_policy

    path = export_policy(args.checkpoint, args.output, args.format, trust_code=args.trust_code, policy_id=args.policy)
    how = "torch.jit.load" if args.format == "torchscript" else "onnxruntime.InferenceSession"
    print(f"wrote {path}: load it with {how} and give it a batch of observations")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from .plot import plot_runs

    out = plot_runs(args.runs, args.output, smoothing=args.smooth)
    print(f"wrote {out}")
    return 0


def _options(args: argparse.Namespace, names: Sequence[str]) -> list[str]:
    """The command-line options ``names`` as given in ``args``, to give a trial the same."""
    out: list[str] = []
    for name in names:
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if value is None or value is False or (name == "checkpoint_every" and value == 0):
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            out += [x for v in value for x in (flag, str(v))]
        else:
            out += [flag, str(value.resolve() if isinstance(value, Path) else value)]
    return out


_CONFIG_OPTIONS = ("env", "config", "num_workers", "backend", "address", "set")
_STOP_OPTIONS = ("stop_reward", "stop_on_evaluation", "stop_timesteps", "stop_time", "checkpoint_every",
                 "tensorboard", "mlflow", "wandb")  # fmt: skip


def _trial_config(
    cls: Any, algo: str, shared: Sequence[str], seed: int, point: dict[str, Any]
) -> tuple[Any, int, bool]:
    """Check the config of one trial of a sweep or a study (as ``train`` would, env and model
    too): the config, how many cores a trial of it needs (one for its driver, which runs the
    learner, and one per worker process) and whether its learner's torch threads are left to set."""
    from .sweep import Trial

    args = _build_parser().parse_args(["train", algo, *shared, *Trial(seed, point, 1).train_args()])
    config = _make_config(cls, args)
    cls(config)  # the env and the model, checked in this process
    workers = config.rollouts.num_workers if config.rollouts.backend == "process" else 0
    evaluators = config.evaluation.num_workers if config.evaluation.interval is not None else 0
    return config, 1 + workers + evaluators, config.learner.torch_threads is None


def _trial_cores(cls: Any, spec: Any, point: dict[str, Any]) -> tuple[int, bool]:
    """A sweep's trial of one point of its grid: the cores it needs, and whether its threads are left to set."""
    _, cores, free_threads = _trial_config(cls, spec.algo, spec.shared, spec.seeds[0], point)
    return cores, free_threads


def _sweep(args: argparse.Namespace) -> int:
    from .algorithms import ALGORITHMS
    from .sweep import SweepSpec, Trial, parse_grid, parse_seeds, run_sweep, summary

    if args.resume is not None:
        given = _options(args, (*_CONFIG_OPTIONS, *_STOP_OPTIONS, "cores")) + ([args.algo] if args.algo else [])
        if given or args.grid or args.seeds != "0":
            raise ConfigError("sweep --resume runs the sweep as it was asked; give nothing else")
        folder = args.resume
        spec = SweepSpec.load(folder)
    else:
        if args.algo is None:
            raise ConfigError("sweep: name an algorithm (" + ", ".join(sorted(ALGORITHMS)) + ")")
        grid = parse_grid(args.grid) or [{}]
        if args.env is not None and "env" in grid[0]:
            raise ConfigError("sweep: give the env by --env or by --grid env=..., not both")
        shared, stops = _options(args, _CONFIG_OPTIONS), _options(args, _STOP_OPTIONS)
        spec = SweepSpec(args.algo, shared, stops, parse_seeds(args.seeds), grid, _cores(args))
        env = re.sub(r"[^\w.-]+", "-", args.env or ("envs" if "env" in grid[0] else "default-env"))
        folder = args.logdir / f"sweep_{args.algo}_{env}_{time.strftime('%Y%m%d-%H%M%S')}"
    cls = ALGORITHMS[spec.algo]
    trials = []
    for point in spec.grid:  # every config checked before any trial starts
        need, free_threads = _trial_cores(cls, spec, point)
        if need > spec.cores:
            print(f"asyncflow: a trial of {point or 'the config'} needs {need} cores (its driver and each worker "
                  f"process), the sweep has {spec.cores}: each runs alone")  # fmt: skip
        cores = min(need, spec.cores)
        trials += [Trial(seed, point, cores, cores if free_threads else None) for seed in spec.seeds]
    folder.mkdir(parents=True, exist_ok=True)
    spec.save(folder)
    print(f"asyncflow: sweep of {len(trials)} trials on {spec.cores} cores in {folder}", flush=True)

    def report(outcome: Any) -> None:
        print(f"asyncflow: {outcome.trial.name}: {outcome.status} in {outcome.seconds:.1f} s"
              + ("" if outcome.status == "finished" else f" (exit {outcome.returncode}; see its trial.log)"),
              flush=True)  # fmt: skip

    try:
        outcomes = asyncio.run(_stopped_by_sigterm(run_sweep(folder, spec, trials, report)))
    except _Terminated:
        print(f"\nasyncflow: terminated; asyncflow sweep --resume {folder} runs what is left", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"\nasyncflow: interrupted; asyncflow sweep --resume {folder} runs what is left", file=sys.stderr)
        return 130
    table = summary(folder, trials)
    (folder / "summary.md").write_text(table + "\n")
    print(table)
    failed = sum(outcome.status == "failed" for outcome in outcomes)  # the others finished, now or before
    print(f"asyncflow: {len(trials) - failed} of {len(trials)} trials finished; asyncflow compare {folder}")
    return 1 if failed else 0


def _plain_fields(algo: str, shared: Sequence[str]) -> dict[str, Any]:
    """The config fields the options ``shared`` give, as written (an env by its name): what a
    study's ``best.yaml`` holds beside the tuned values."""
    from .config_file import load_config_file

    args = _build_parser().parse_args(["train", algo, *shared])
    fields = load_config_file(args.config) if args.config is not None else {}
    if args.env is not None:
        fields["env"] = args.env
    if args.num_workers is not None:
        fields["num_workers"] = args.num_workers
    return {**fields, **_placement(args), **_parse_sets(args.set)}


def _tune_spec(args: argparse.Namespace) -> tuple[Path, Any]:
    """The study's folder and what it was asked, checked: from the options, or from its folder (--resume)."""
    from .algorithms import ALGORITHMS
    from .experiment import CSV_FIELDS
    from .search_space import parse_space
    from .tune import TuneSpec

    if args.trials is not None and args.trials < 1:
        raise ConfigError(f"--trials must be >= 1, not {args.trials}")
    if args.resume is not None:
        given = _options(args, (*_CONFIG_OPTIONS, *_STOP_OPTIONS, "cores", "report_every", "space"))
        if given or args.algo or args.metric != "episode_return_mean" or args.mode != "max" or args.seed != 0 \
                or args.prune != "median":  # fmt: skip
            raise ConfigError("tune --resume goes on with the study as it was asked; give nothing else but --trials")
        spec = TuneSpec.load(args.resume)
        if args.trials is not None:
            spec = TuneSpec(**{**spec.__dict__, "trials": args.trials})
        return args.resume, spec
    if args.algo is None:
        raise ConfigError("tune: name an algorithm (" + ", ".join(sorted(ALGORITHMS)) + ")")
    if not args.space:
        raise ConfigError('tune: give what to search with --space, e.g. --space "lr=loguniform(1e-4,1e-2)"')
    parse_space(args.space)  # each one parses
    if args.stop_timesteps is None:
        raise ConfigError("tune: give each trial its budget with --stop-timesteps (the pruner compares curves "
                          "at equal env steps)")  # fmt: skip
    if args.metric not in CSV_FIELDS:
        raise ConfigError(f"--metric: no run reports {args.metric!r}; use a progress.csv column: "
                          + ", ".join(CSV_FIELDS))  # fmt: skip
    report_every = args.report_every if args.report_every is not None else max(1, args.stop_timesteps // 10)
    if report_every < 1:
        raise ConfigError(f"--report-every must be >= 1, not {report_every}")
    cores = _cores(args)
    spec = TuneSpec(args.algo, _options(args, _CONFIG_OPTIONS), _options(args, _STOP_OPTIONS), args.seed, args.space,
                    args.metric, "maximize" if args.mode == "max" else "minimize", args.prune,
                    args.trials if args.trials is not None else 20, cores, report_every)  # fmt: skip
    env = re.sub(r"[^\w.-]+", "-", args.env or "default-env")
    return args.logdir / f"tune_{args.algo}_{env}_{time.strftime('%Y%m%d-%H%M%S')}", spec


def _tune(args: argparse.Namespace) -> int:
    from .algorithms import ALGORITHMS
    from .sweep import Trial
    from .tune import BEST_FILE, best_config, load_study, run_study, study_table

    folder, spec = _tune_spec(args)
    cls, dims = ALGORITHMS[spec.algo], spec.dimensions
    lows = {d.name: d.low for d in dims}
    for dim in dims:  # every field exists and takes its whole range, before any trial starts
        for value in dim.args:
            config, _, _ = _trial_config(cls, spec.algo, spec.shared, spec.seed, {**lows, dim.name: value})
    if spec.metric.startswith("evaluation/") and config.evaluation.interval is None:
        raise ConfigError(f"--metric {spec.metric} needs evaluation during training (--set evaluation_interval=N)")

    def make_trial(values: dict[str, Any]) -> Trial:
        _, need, free_threads = _trial_config(cls, spec.algo, spec.shared, spec.seed, values)
        cores = min(need, spec.cores)
        return Trial(spec.seed, values, cores, cores if free_threads else None)

    folder.mkdir(parents=True, exist_ok=True)
    spec.save(folder)
    study = load_study(folder, spec)
    print(f"asyncflow: study of {spec.trials} trials of {spec.algo} on {spec.cores} cores, {spec.direction} "
          f"{spec.metric}, pruning: {spec.prune}; in {folder}", flush=True)  # fmt: skip

    def report(outcome: Any, frozen: Any) -> None:
        values = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in frozen.params.items())
        how = {"COMPLETE": f"{spec.metric} {frozen.value:.2f}",
               "PRUNED": f"pruned at report {frozen.last_step}",
               "FAIL": f"failed ({frozen.user_attrs.get('failed')}; see its trial.log)"}[frozen.state.name]  # fmt: skip
        print(f"asyncflow: trial {frozen.number} ({values}): {how}, {outcome.seconds:.1f} s", flush=True)

    try:
        asyncio.run(_stopped_by_sigterm(run_study(folder, spec, study, make_trial, report)))
    except (_Terminated, KeyboardInterrupt) as stopped:
        how, code = ("interrupted", 130) if isinstance(stopped, KeyboardInterrupt) else ("terminated", 143)
        print(f"\nasyncflow: {how}; asyncflow tune --resume {folder} goes on", file=sys.stderr)
        return code
    table = study_table(study, dims)
    (folder / "summary.md").write_text(table + "\n")
    print(table)
    best = best_config(study, dims, _plain_fields(spec.algo, spec.shared), spec.algo, spec.metric)
    if best is None:
        print("asyncflow: no trial finished; see the trials' trial.log")
        return 1
    (folder / BEST_FILE).write_text(best)
    print(f"asyncflow: best: trial {study.best_trial.number}, {spec.metric} {study.best_value:.2f}; "
          f"asyncflow train {spec.algo} --config {folder / BEST_FILE}")  # fmt: skip
    return 0


def _pbt(args: argparse.Namespace) -> int:
    from .algorithms import ALGORITHMS
    from .experiment import RunLogger
    from .pbt import PopulationBasedTraining
    from .search_space import parse_space
    from .sweep import parse_grid

    if args.stop_reward is None and args.stop_timesteps is None and args.stop_time is None:
        raise ConfigError("pbt: give a stop condition (--stop-timesteps, --stop-reward or --stop-time)")
    initial = None
    if args.initial:
        columns = {spec.partition("=")[0].strip().replace("-", "_"): parse_grid([spec])
                   for spec in args.initial}  # fmt: skip
        for name, values in columns.items():
            if len(values) != args.population:
                raise ConfigError(f"--initial {name}: one value per member ({args.population}), not {len(values)}")
        initial = [{name: values[i][name] for name, values in columns.items()} for i in range(args.population)]
    cls = ALGORITHMS[args.algo]
    args.output = args.input = None
    config = _make_config(cls, args)
    population = PopulationBasedTraining(cls, config, parse_space(args.mutate), population=args.population,
                                         interval=args.interval, quantile=args.quantile,
                                         resample_probability=args.resample_probability, metric=args.metric,
                                         initial=initial, seed=args.seed)  # fmt: skip
    env = re.sub(r"[^\w.-]+", "-", args.env or "default-env")
    folder = args.logdir / f"pbt_{args.algo}_{env}_{time.strftime('%Y%m%d-%H%M%S')}"
    return asyncio.run(_stopped_by_sigterm_code(_run_population(population, folder, args, RunLogger)))


async def _stopped_by_sigterm_code(coro: Any) -> int:
    try:
        return int(await _stopped_by_sigterm(coro))
    except _Terminated:
        print("\nasyncflow: terminated; workers stopped", file=sys.stderr)
        return 143


async def _run_population(population: Any, folder: Path, args: argparse.Namespace, logger_class: Any) -> int:
    """Train ``population`` until the stop conditions, each member logging to a run folder of its
    own (``member_I``), each round to ``pbt.jsonl``; then the members' table and ``best.yaml``."""
    started = time.monotonic()
    loggers: dict[int, Any] = {}
    async with population:
        folder.mkdir(parents=True)
        print(f"asyncflow: population-based training of {len(population.members)} {args.algo} trainers; "
              f"logs in {folder}", flush=True)  # fmt: skip
        for member in population.members:
            (folder / f"member_{member.index}").mkdir()
            (folder / f"member_{member.index}" / "params.json").write_text(
                json.dumps(member.algo.config.to_dict(), indent=2, default=str) + "\n"
            )
            loggers[member.index] = logger_class(folder / f"member_{member.index}")
        try:
            with open(folder / "pbt.jsonl", "w") as log:
                async for rnd in population.train(lambda m, r: loggers[m.index].log(r)):
                    log.write(json.dumps({**rnd, "exploits": [e.__dict__ for e in rnd["exploits"]]},
                                         default=str) + "\n")  # fmt: skip
                    log.flush()
                    best = rnd["members"][rnd["best"]]
                    taken = ", ".join(f"{e.member} <- {e.donor}" for e in rnd["exploits"]) or "none"
                    print(f"round {rnd['round']:3d}  best: member {best['index']} {population.metric} "
                          f"{best['score']:.1f} ({_values(best['values'])})  exploits: {taken}",
                          flush=True)  # fmt: skip
                    if _population_stops(rnd, args, time.monotonic() - started):
                        break
        finally:
            for logger in loggers.values():
                logger.close()
    lines = ["| member | " + population.metric + " | env steps | exploits | values |", "|---|---|---|---|---|"]
    for m in population.members:
        steps = (m.result or {}).get("num_env_steps_sampled", 0)
        lines.append(f"| {m.index} | {m.score(population.metric):.1f} | {steps} | {m.exploits} | {_values(m.values)} |")
    table = "\n".join(lines)
    (folder / "summary.md").write_text(table + "\n")
    print(table)
    best_member = max(population.members, key=lambda m: m.score(population.metric))
    import yaml

    fields = {**_plain_fields(args.algo, _options(args, _CONFIG_OPTIONS)), **best_member.values}
    (folder / "best.yaml").write_text(f"# asyncflow pbt: member {best_member.index}'s last values\n"
                                      + yaml.safe_dump(fields, sort_keys=False))  # fmt: skip
    print(f"asyncflow: best: member {best_member.index}; its values in {folder / 'best.yaml'}")
    return 0


def _values(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())


def _population_stops(rnd: dict[str, Any], args: argparse.Namespace, seconds: float) -> bool:
    members = rnd["members"]
    if args.stop_reward is not None and max(m["score"] for m in members) >= args.stop_reward:
        return True
    if args.stop_timesteps is not None and min(m["env_steps"] for m in members) >= args.stop_timesteps:
        return True
    return args.stop_time is not None and seconds >= args.stop_time


def _compare(args: argparse.Namespace) -> int:
    from .compare import compare, plot_comparison

    if args.reps < 100:
        raise ConfigError(f"compare: --reps must be at least 100, not {args.reps}")
    comparison = compare(args.runs, score=args.score, at_steps=args.at_steps, reps=args.reps)
    print(comparison.markdown())
    if args.output is not None:
        print(f"wrote {plot_comparison(comparison, args.output)}")
    return 0


_OUR_FILES = os.path.dirname(os.path.abspath(__file__))
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _where(exc: BaseException) -> str:
    """Where an exception came from in the user's code: the innermost frame outside asyncflow,
    the standard library and installed packages, from the remote traceback if it travelled."""
    frames: list[tuple[str, str, str]] = []
    cause = exc.__cause__
    if isinstance(cause, RemoteTraceback):
        frames = _FRAME.findall(cause.tb)
    else:
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            frames.append((code.co_filename, str(tb.tb_lineno), code.co_name))
            tb = tb.tb_next
    library = (_OUR_FILES, sys.prefix, sys.base_prefix, "<frozen")
    for filename, line, function in reversed(frames):
        if not os.path.abspath(filename).startswith(library):
            return f" (in {function}, {os.path.basename(filename)}:{line})"
    return ""


def _one_line(exc: BaseException) -> str:
    """An error as the command line reports it: one line (--debug shows the traceback)."""
    if isinstance(exc, AsyncflowError):
        return f"asyncflow: error: {exc}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"asyncflow: error: {exc.strerror}{where}"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"asyncflow: error: {type(exc).__name__}: {first}{_where(exc)}; --debug shows the whole traceback"


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    debug = "--debug" in raw
    from_shell = argv is None
    early = os.environ.get("ASYNCFLOW_EARLY_FORK_SERVER")
    if from_shell and raw[:1] != ["train"]:
        os.environ["ASYNCFLOW_EARLY_FORK_SERVER"] = "0"  # evaluate, export, plot and sweep start no worker
    if from_shell:
        _interrupts.hold()  # a Ctrl-C in the imports is raised after them (see _interrupts)
    try:
        try:
            parser = _build_parser()  # imports the algorithms, which start the fork server early
        finally:  # decided at that import: the processes this one starts (a sweep's trials) decide their own
            if early is None:
                os.environ.pop("ASYNCFLOW_EARLY_FORK_SERVER", None)
            else:
                os.environ["ASYNCFLOW_EARLY_FORK_SERVER"] = early
        _interrupts.check()
        args = parser.parse_args(argv)
        if args.command != "train":
            _interrupts.release()
        commands = {"train": _train, "evaluate": _evaluate, "export": _export, "plot": _plot, "compare": _compare,
                    "sweep": _sweep, "tune": _tune, "pbt": _pbt}  # fmt: skip
        code = commands[args.command](args)
    except KeyboardInterrupt:  # before training started (imports, checks): nothing to clean up
        _stop_unused_fork_server(from_shell)
        print("\nasyncflow: interrupted", file=sys.stderr)
        return 130
    except SystemExit:  # argparse: bad arguments, or --help
        _stop_unused_fork_server(from_shell)
        raise
    except Exception as exc:
        _stop_unused_fork_server(from_shell)
        if debug:
            raise
        print(_one_line(exc), file=sys.stderr)
        return 2
    finally:
        _interrupts.release_quietly()
    if from_shell:
        # Run from the shell and finished: every worker is stopped and every file
        # closed. Skip the interpreter's teardown, which takes about a second
        # with torch loaded, after removing the one thing it would have: the
        # folder multiprocessing made in /tmp (pymp-*) for the fork server's socket.
        _remove_multiprocessing_tempdir()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):  # a reader that went away (| head)
                stream.flush()
        os._exit(code)
    return code


def _remove_multiprocessing_tempdir() -> None:
    """Remove the ``pymp-*`` folder that ``multiprocessing`` made for this process, as its exit
    handler would (``os._exit`` skips that handler)."""
    if "multiprocessing" not in sys.modules:
        return
    import multiprocessing.process
    import shutil

    tempdir = multiprocessing.process.current_process()._config.get("tempdir")  # type: ignore[attr-defined]
    if tempdir:
        shutil.rmtree(tempdir, ignore_errors=True)


def _stop_unused_fork_server(from_shell: bool) -> None:
    """Bad input leaves no process behind: the fork server the import started for a
    training run that never began is stopped (a no-op once a runtime has used it)."""
    if from_shell and "asyncflow.actors" in sys.modules:
        from .actors import stop_fork_server

        stop_fork_server()


if __name__ == "__main__":
    sys.exit(main())
