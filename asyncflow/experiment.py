"""Running an algorithm until a stop condition, with a run folder of logs.

Each run gets a folder ``LOGDIR/ALGO_ENV_YYYYmmdd-HHMMSS`` holding:

- ``params.json``: the config;
- ``progress.csv``: one row per iteration, the columns of ``CSV_FIELDS``;
- ``result.jsonl``: one JSON object per iteration, the whole result mapping
  (nested ``learner``, ``timers``, ``counters``, ``policy_return_mean``; a
  missing value such as the return before any episode ended is ``null``);
- ``checkpoints/checkpoint_NNNNNN.ckpt`` with ``checkpoint_every``;
- ``tensorboard/`` event files with ``tensorboard=True`` (needs the
  ``tensorboard`` package): every number of the result, at step
  ``num_env_steps_sampled``;
- ``.lock``: held (``flock``) by the run writing to the folder, with its pid. One run owns a
  folder at a time: a second ``--resume`` of a folder in use is refused, naming the process.

A new run's folder is made once the algorithm has started, so a run that cannot start (an
unreachable Ray address, a cluster too small for its workers) leaves no folder behind. A
resumed run appends to the same files.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import json
import math
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ._fields import flatten
from .algorithms import Algorithm
from .errors import ConfigError
from .trackers import Tracker, check_installed, close_all, open_trackers

__all__ = [
    "CSV_FIELDS",
    "Progress",
    "RunLock",
    "RunLogger",
    "Stop",
    "latest_checkpoint",
    "make_run_dir",
    "run_experiment",
    "truncate_logs",
]

CSV_FIELDS = [
    "training_iteration",
    "num_env_steps_sampled",
    "num_env_steps_trained",
    "episode_return_mean",
    "episode_return_min",
    "episode_return_max",
    "episode_len_mean",
    "episodes_this_iter",
    "num_env_steps_sampled_throughput_per_sec",
    "time_total_s",
    "num_workers_restarted",
    # evaluation during training (evaluation_interval): the latest finished evaluation
    "evaluation/episode_return_mean",
    "evaluation/episode_len_mean",
    "evaluation/training_iteration",
]
"""The columns of ``progress.csv``, in order (a stable format: see the run folder's documentation)."""


def csv_row(result: dict[str, Any]) -> dict[str, Any]:
    """A result as one progress.csv row: its ``evaluation`` entry flattened to ``evaluation/...``."""
    evaluation = result.get("evaluation") or {}
    return {**result, **{f"evaluation/{k}": v for k, v in evaluation.items()}}


@dataclass(frozen=True)
class Stop:
    """Stop conditions; the first one reached ends the run."""

    reward: float | None = None
    timesteps: int | None = None
    seconds: float | None = None
    on_evaluation: bool = False  # ``reward`` is for the evaluation return, not the training one

    def __post_init__(self) -> None:
        # A NaN never compares true, a negative count or time is reached at once: both are typos.
        if self.reward is not None and not math.isfinite(self.reward):
            raise ConfigError(f"--stop-reward must be a finite number, not {self.reward}")
        if self.timesteps is not None and (isinstance(self.timesteps, bool) or self.timesteps < 1):
            raise ConfigError(f"--stop-timesteps must be >= 1, not {self.timesteps}")
        if self.seconds is not None and not (math.isfinite(self.seconds) and self.seconds > 0):
            raise ConfigError(f"--stop-time must be a number of seconds > 0, not {self.seconds}")

    def reached(self, result: dict[str, Any]) -> str | None:
        """Why the run should stop now, or None."""
        if self.on_evaluation:
            name, ret = "evaluation/episode_return_mean", (result.get("evaluation") or {}).get("episode_return_mean")
        else:
            name, ret = "episode_return_mean", result["episode_return_mean"]
        if self.reward is not None and ret is not None and not math.isnan(ret) and ret >= self.reward:
            return f"{name} {ret:.1f} >= {self.reward:g}"
        counted = _counted(result)
        if self.timesteps is not None and result[counted] >= self.timesteps:
            return f"{counted} >= {self.timesteps}"
        if self.seconds is not None and result["time_total_s"] >= self.seconds:
            return f"time_total_s >= {self.seconds:g}"
        return None

    def seconds_left(self, result: dict[str, Any]) -> float | None:
        """An estimate of the time to the nearest time or step limit (None without one)."""
        left = []
        if self.seconds is not None:
            left.append(self.seconds - result["time_total_s"])
        rate = result["num_env_steps_sampled"] / max(result["time_total_s"], 1e-9)
        if self.timesteps is not None and rate > 0:
            left.append((self.timesteps - result["num_env_steps_sampled"]) / rate)
        return max(0.0, min(left)) if left else None


def make_run_dir(logdir: Path, algo: str, env: str) -> Path:
    """A new, empty folder ``LOGDIR/ALGO_ENV_YYYYmmdd-HHMMSS`` (suffixed if taken)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    env = re.sub(r"[^A-Za-z0-9._-]+", "-", env)[:80]  # a folder name: no slashes, and not too long
    base = logdir / f"{algo}_{env}_{stamp}"
    logdir.mkdir(parents=True, exist_ok=True)
    path, n = base, 1
    while True:  # mkdir is the atomic claim: two runs started at once get two folders
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = Path(f"{base}_{n}")


class RunLock:
    """Exclusive ownership of a run folder, for as long as a run writes to it.

    A lock (``flock``) on ``RUN/.lock``, which holds the owner's pid, host and start time: the
    kernel drops it when the owner ends, however it ends, so a folder is never left locked.
    A second owner gets a one-line ``ConfigError`` naming the first. (Two ``--resume`` of one
    folder at once both ran: one's logs were lost, and its checkpoints mixed two trainings.)
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / ".lock"
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the folder, or raise ``ConfigError`` naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 400, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise ConfigError(f"{self.run_dir} is in use by {holder}: one run writes to a run folder at a time "
                              "(wait for it to end, or stop it)") from None  # fmt: skip
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.pwrite(fd, f"process {os.getpid()} on {socket.gethostname()} (since {stamp})\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Let the folder go (the file stays: removing it could race with the next owner)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def latest_checkpoint(run_dir: Path) -> Path:
    """The newest checkpoint of a run folder."""
    found = checkpoints(run_dir)
    if not found:
        raise ConfigError(f"--resume: {run_dir} has no checkpoints (train with --checkpoint-every N)")
    return found[-1]


def checkpoints(run_dir: Path) -> list[Path]:
    """A run folder's checkpoints, oldest first."""
    return sorted((run_dir / "checkpoints").glob("checkpoint_*.ckpt"), key=_checkpoint_iteration)


def _checkpoint_iteration(path: Path) -> int:
    digits = path.stem.removeprefix("checkpoint_")
    return int(digits) if digits.isdigit() else -1


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _numbers(result: dict[str, Any]) -> Iterator[tuple[str, float]]:
    for name, value in flatten(result, "/").items():
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            yield name, float(value)


def _iteration_of(line: str) -> int | None:
    try:
        return int(json.loads(line)["training_iteration"])
    except (ValueError, KeyError, TypeError):
        return None  # a line cut short by a kill


def truncate_logs(run_dir: Path, iteration: int) -> None:
    """Drop what a run logged after ``iteration`` (and lines cut short): a resumed run goes on
    from its checkpoint, so iterations the killed run logged after it would come twice.
    Checkpoints after it move to ``checkpoints/replaced/``, and the temporary files of
    checkpoints that were being written when it died are removed."""
    csv_path, jsonl_path = run_dir / "progress.csv", run_dir / "result.jsonl"
    if csv_path.exists():
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
        keep = [r for r in rows if (r.get("training_iteration") or "").isdigit()
                and int(r["training_iteration"]) <= iteration and None not in r]  # fmt: skip
        _rewrite(csv_path, lambda f: _write_csv(f, keep))
    if jsonl_path.exists():
        lines = jsonl_path.read_text().splitlines()
        keep_lines = [ln for ln in lines if (i := _iteration_of(ln)) is not None and i <= iteration]
        _rewrite(jsonl_path, lambda f: f.write("".join(ln + "\n" for ln in keep_lines)))
    newer = [c for c in checkpoints(run_dir) if _checkpoint_iteration(c) > iteration]
    if newer:  # a run resumed from an older checkpoint: its later ones are another future
        aside = run_dir / "checkpoints" / "replaced"
        aside.mkdir(exist_ok=True)
        for path in newer:
            os.replace(path, aside / path.name)
    for pattern in (".*.tmp", ".*.tmp-*"):  # .tmp-PID: written before 2026-12
        for stale in (run_dir / "checkpoints").glob(pattern):
            stale.unlink(missing_ok=True)


def _write_csv(f: TextIO, rows: list[dict[str, str]]) -> None:
    writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)


def _rewrite(path: Path, write: Callable[[TextIO], object]) -> None:
    """Write ``path`` anew through a temporary file made exclusively beside it (``mkstemp``)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def summary_writer() -> Any:
    """TensorBoard's ``SummaryWriter``, or a ``ConfigError`` saying what to install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise ConfigError("--tensorboard needs the tensorboard package (pip install tensorboard)") from exc
    return SummaryWriter


class RunLogger:
    """Writes one iteration at a time to progress.csv, result.jsonl, TensorBoard and the trackers
    (MLflow, Weights & Biases: ``trackers.py``)."""

    def __init__(
        self,
        run_dir: Path,
        *,
        append: bool = False,
        tensorboard: bool = False,
        purge_step: int | None = None,
        trackers: Sequence[Tracker] = (),
    ) -> None:
        self.run_dir = run_dir
        self._trackers = list(trackers)
        new_csv = not append or not (run_dir / "progress.csv").exists()
        self._csv_file = open(run_dir / "progress.csv", "w" if new_csv else "a", newline="")  # noqa: SIM115
        self._csv = csv.DictWriter(self._csv_file, fieldnames=CSV_FIELDS, extrasaction="ignore")
        if new_csv:
            self._csv.writeheader()
        self._jsonl = open(run_dir / "result.jsonl", "a" if append else "w")  # noqa: SIM115
        self._tb: Any = None
        if tensorboard:
            self._tb = summary_writer()(str(run_dir / "tensorboard"), purge_step=purge_step)

    def log(self, result: dict[str, Any]) -> None:
        """Append one iteration to every log."""
        self._csv.writerow(csv_row(result))
        self._csv_file.flush()
        self._jsonl.write(json.dumps(_jsonable(result)) + "\n")
        self._jsonl.flush()
        if self._tb is not None:
            step = int(result["num_env_steps_sampled"])
            for name, value in _numbers(result):
                self._tb.add_scalar(name, value, step)
            self._tb.flush()
        if self._trackers:
            numbers = dict(_numbers(result))
            for tracker in self._trackers:
                tracker.log(numbers, int(result["num_env_steps_sampled"]))

    def close(self) -> None:
        """Close the log files and finish the trackers' runs."""
        self._csv_file.close()
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()
        close_all(self._trackers)


class Progress:
    """A live progress bar on a terminal (tqdm); plain lines elsewhere (CI, pipes)."""

    def __init__(self, stop: Stop, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stop = stop
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self._bar: Any = None
        if self.live:
            from tqdm import tqdm

            total = stop.timesteps if stop.timesteps is not None else None
            self._bar = tqdm(total=total, unit="step", unit_scale=True, file=self.stream, dynamic_ncols=True)

    def update(self, result: dict[str, Any]) -> None:
        """Show one iteration's result."""
        ret = result["episode_return_mean"]
        ret_text = "nan" if math.isnan(ret) else f"{ret:.1f}"
        left = self.stop.seconds_left(result)
        left_text = f"{left:.0f}s left" if left is not None else "-"
        counted = _counted(result)
        rate, unit = result[f"{counted}_throughput_per_sec"], "steps" if counted.endswith("sampled") else "rows"
        evaluation = result.get("evaluation")
        if evaluation is not None:
            ret_text += f" eval {evaluation['episode_return_mean']:.1f}"
        league = result.get("league")
        if league is not None:  # self-play: the game's return sums to 0, main's wins say more
            ret_text += f" win {league['win_rate']:.2f} league {league['size']} elo {league['rating']:.0f}"
        elif len(policies := result.get("policy_return_mean") or {}) > 1:
            ret_text += " (" + ", ".join(f"{p} {r:.1f}" for p, r in policies.items()) + ")"
        if self._bar is not None:
            self._bar.n = result[counted]
            self._bar.set_postfix_str(f"iter {result['training_iteration']} return {ret_text} {left_text}")
            return
        try:
            print(
                f"iter {result['training_iteration']:4d}  {unit} {result[counted]:8d}  "
                f"{rate:8.0f} {unit}/s  return {ret_text}  ({result['time_total_s']:.1f}s, {left_text})",
                file=self.stream,
                flush=True,
            )
        except BrokenPipeError:
            write_nowhere(self.stream)

    def close(self) -> None:
        """End the live display."""
        if self._bar is not None:
            self._bar.close()


def write_nowhere(stream: TextIO) -> None:
    """The reader of ``stream`` went away (``asyncflow train ... | head``): its later writes go to
    the null device, and the run goes on to its stop condition and its last checkpoint, with
    everything in the run folder. (It died of the first broken pipe, before them.)"""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


async def run_experiment(
    algo: Algorithm,
    stop: Stop,
    run_dir: Path | Callable[[], Path],
    on_result: Callable[[dict[str, Any]], None] | None = None,
    *,
    checkpoint_every: int = 0,
    tensorboard: bool = False,
    resume: bool = False,
    mlflow: str | bool | None = None,
    wandb: str | bool | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """Train until ``stop``; returns the last result and why it stopped.

    ``run_dir`` is the run's folder, or a function that makes one (``make_run_dir``), called
    once the algorithm has started: a run that cannot start leaves no folder. The folder is
    owned (``RunLock``) for as long as the run writes to it. ``checkpoint_every=N`` saves
    every N iterations and when the run stops; ``resume=True`` appends to an existing folder.
    ``mlflow`` and ``wandb`` add those trackers (``trackers.open_trackers``).
    """
    if tensorboard:
        summary_writer()  # a missing package is an error before anything starts
    check_installed(bool(mlflow), bool(wandb))
    last: dict[str, Any] | None = None
    with contextlib.ExitStack() as owned:
        if isinstance(run_dir, Path):  # taken before anything reads or writes it
            owned.enter_context(RunLock(run_dir))
        async with algo:
            if not isinstance(run_dir, Path):
                run_dir = run_dir()
                owned.enter_context(RunLock(run_dir))
            folder = run_dir
            purge_step = None
            if resume:  # the checkpoint's state is loaded now: forget what was logged after it
                truncate_logs(folder, algo.ctx.iteration)
                purge_step = algo.ctx.env_steps_sampled + 1
            else:
                (folder / "params.json").write_text(json.dumps(algo.config.to_dict(), indent=2, default=str) + "\n")
            trackers = open_trackers(folder, algo.config.to_dict(), mlflow=mlflow, wandb=wandb)
            logger = RunLogger(folder, append=resume, tensorboard=tensorboard, purge_step=purge_step, trackers=trackers)
            try:
                async for result in algo.train():
                    last = result
                    logger.log(result)
                    if on_result is not None:
                        on_result(result)
                    reason = stop.reached(result)
                    iteration = result["training_iteration"]
                    if checkpoint_every and (reason is not None or iteration % checkpoint_every == 0):
                        await algo.save(folder / "checkpoints" / f"checkpoint_{iteration:06d}.ckpt")
                    if reason is not None:
                        return last, reason
            finally:
                logger.close()
    return last, "the plan ended"


def _counted(result: dict[str, Any]) -> str:
    """What a run's progress counts: env steps sampled, or (an offline run, which samples none)
    the dataset rows trained; ``--stop-timesteps`` and the progress line use it."""
    offline = result["num_env_steps_sampled"] == 0 and result["num_env_steps_trained"] > 0
    return "num_env_steps_trained" if offline else "num_env_steps_sampled"
