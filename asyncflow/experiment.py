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
  ``num_env_steps_sampled``.

A resumed run appends to the same files.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .algorithms import Algorithm
from .errors import ConfigError

__all__ = [
    "CSV_FIELDS",
    "Progress",
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

    def reached(self, result: dict[str, Any]) -> str | None:
        """Why the run should stop now, or None."""
        if self.on_evaluation:
            name, ret = "evaluation/episode_return_mean", (result.get("evaluation") or {}).get("episode_return_mean")
        else:
            name, ret = "episode_return_mean", result["episode_return_mean"]
        if self.reward is not None and ret is not None and not math.isnan(ret) and ret >= self.reward:
            return f"{name} {ret:.1f} >= {self.reward:g}"
        if self.timesteps is not None and result["num_env_steps_sampled"] >= self.timesteps:
            return f"num_env_steps_sampled >= {self.timesteps}"
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


def latest_checkpoint(run_dir: Path) -> Path:
    """The newest checkpoint of a run folder."""
    found = sorted((run_dir / "checkpoints").glob("checkpoint_*.ckpt"))
    if not found:
        raise ConfigError(f"--resume: {run_dir} has no checkpoints (train with --checkpoint-every N)")
    return found[-1]


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _numbers(result: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    for key, value in result.items():
        if isinstance(value, dict):
            yield from _numbers(value, f"{prefix}{key}/")
        elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            yield f"{prefix}{key}", float(value)


def _iteration_of(line: str) -> int | None:
    try:
        return int(json.loads(line)["training_iteration"])
    except (ValueError, KeyError, TypeError):
        return None  # a line cut short by a kill


def truncate_logs(run_dir: Path, iteration: int) -> None:
    """Drop what a run logged after ``iteration`` (and lines cut short): a resumed run goes on
    from its checkpoint, so iterations the killed run logged after it would come twice.
    Also removes the temporary files of checkpoints that were being written when it died."""
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
    for stale in (run_dir / "checkpoints").glob(".*.tmp-*"):
        stale.unlink(missing_ok=True)


def _write_csv(f: TextIO, rows: list[dict[str, str]]) -> None:
    writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)


def _rewrite(path: Path, write: Callable[[TextIO], object]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as f:
        write(f)
    os.replace(tmp, path)


class RunLogger:
    """Writes one iteration at a time to progress.csv, result.jsonl and TensorBoard."""

    def __init__(
        self, run_dir: Path, *, append: bool = False, tensorboard: bool = False, purge_step: int | None = None
    ) -> None:
        self.run_dir = run_dir
        new_csv = not append or not (run_dir / "progress.csv").exists()
        self._csv_file = open(run_dir / "progress.csv", "w" if new_csv else "a", newline="")  # noqa: SIM115
        self._csv = csv.DictWriter(self._csv_file, fieldnames=CSV_FIELDS, extrasaction="ignore")
        if new_csv:
            self._csv.writeheader()
        self._jsonl = open(run_dir / "result.jsonl", "a" if append else "w")  # noqa: SIM115
        self._tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ConfigError("--tensorboard needs the tensorboard package (pip install tensorboard)") from exc
            self._tb = SummaryWriter(str(run_dir / "tensorboard"), purge_step=purge_step)

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

    def close(self) -> None:
        """Close the log files."""
        self._csv_file.close()
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()


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
        rate = result["num_env_steps_sampled_throughput_per_sec"]
        evaluation = result.get("evaluation")
        if evaluation is not None:
            ret_text += f" eval {evaluation['episode_return_mean']:.1f}"
        if self._bar is not None:
            self._bar.n = result["num_env_steps_sampled"]
            self._bar.set_postfix_str(f"iter {result['training_iteration']} return {ret_text} {left_text}")
            return
        print(
            f"iter {result['training_iteration']:4d}  steps {result['num_env_steps_sampled']:8d}  "
            f"{rate:8.0f} steps/s  return {ret_text}  ({result['time_total_s']:.1f}s, {left_text})",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        """End the live display."""
        if self._bar is not None:
            self._bar.close()


async def run_experiment(
    algo: Algorithm,
    stop: Stop,
    run_dir: Path,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    *,
    checkpoint_every: int = 0,
    tensorboard: bool = False,
    resume: bool = False,
) -> tuple[dict[str, Any] | None, str]:
    """Train until ``stop``; returns the last result and why it stopped.

    ``checkpoint_every=N`` saves every N iterations and when the run stops;
    ``resume=True`` appends to an existing run folder.
    """
    if not resume:
        (run_dir / "params.json").write_text(json.dumps(algo.config.to_dict(), indent=2, default=str) + "\n")
    last: dict[str, Any] | None = None

    async def checkpoint(result: dict[str, Any]) -> None:
        await algo.save(run_dir / "checkpoints" / f"checkpoint_{result['training_iteration']:06d}.ckpt")

    async with algo:
        purge_step = None
        if resume:  # the checkpoint's state is loaded now: forget what was logged after it
            truncate_logs(run_dir, algo.ctx.iteration)
            purge_step = algo.ctx.env_steps_sampled + 1
        logger = RunLogger(run_dir, append=resume, tensorboard=tensorboard, purge_step=purge_step)
        try:
            async for result in algo.train():
                last = result
                logger.log(result)
                if on_result is not None:
                    on_result(result)
                reason = stop.reached(result)
                if checkpoint_every and (reason is not None or result["training_iteration"] % checkpoint_every == 0):
                    await checkpoint(result)
                if reason is not None:
                    return last, reason
        finally:
            logger.close()
    return last, "the plan ended"
