"""Many runs of one algorithm: seeds and a grid of settings, as trials in parallel on one machine.

    asyncflow sweep ppo --env CartPole-v1 --seeds 0-9 --grid lr=1e-3,3e-3 --stop-timesteps 100000

Each trial is an ordinary ``asyncflow train`` in a process of its own, writing an ordinary run
folder under ``SWEEP/<trial>/``, its output in ``SWEEP/<trial>/trial.log`` and, once it ends,
``trial.json`` (finished or failed, its exit code, its wall time). Trials are packed onto the
machine's cores: a trial needs one for its driver, which runs the learner (and samples, with
``--num-workers 0``), and one per worker process on this machine; it waits until that many are
free, so trials never share a core (one that needs more cores than the sweep has runs alone).
Each trial's learner gets as many torch threads as it has cores, unless its config says. A
failing trial is reported and the others go on. ``sweep.json`` holds what the sweep was asked;
``asyncflow sweep --resume SWEEP`` skips finished trials, continues an interrupted one from its
latest checkpoint (or starts it again) and runs the failed ones again. Every config is checked
before any trial starts.

A sweep folder is code, as a config file is: the options in its ``sweep.json`` start every trial,
and an ``--env module:function`` or ``--config`` there imports what it names. Resume only your own.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import itertools
import json
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ._fields import parse_value
from .errors import ConfigError

__all__ = ["Outcome", "SweepSpec", "Trial", "parse_grid", "parse_seeds", "run_sweep", "summary"]

SPEC_FILE, TRIAL_FILE, LOG_FILE = "sweep.json", "trial.json", "trial.log"


def parse_seeds(text: str) -> list[int]:
    """``"0-9"``, ``"0,3,7"`` or both (``"0-2,10"``): the seeds, in order, each once."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None:
            raise ConfigError(f"--seeds: expected numbers and ranges such as 0-9 or 0,3,7; got {text!r}")
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise ConfigError(f"--seeds: the range {part.strip()} is empty")
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return seeds


def parse_grid(specs: Sequence[str]) -> list[dict[str, Any]]:
    """``["lr=1e-3,3e-3", "gamma=0.99,0.995"]``: every combination, as field -> value mappings."""
    axes: list[tuple[str, list[Any]]] = []
    for spec in specs:
        name, sep, values = spec.partition("=")
        if not sep or not name.strip() or not values.strip():
            raise ConfigError(f"--grid: expected field=value,value,...; got {spec!r}")
        if name.strip() in {n for n, _ in axes}:
            raise ConfigError(f"--grid: {name.strip()} is given twice")
        axes.append((name.strip().replace("-", "_"), [parse_value(v.strip()) for v in values.split(",")]))
    return [dict(zip([n for n, _ in axes], combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))]


@dataclass(frozen=True, eq=False)  # each trial is itself (its grid, a dict, has no hash)
class Trial:
    """One run of the sweep: a seed and a point of the grid, and the cores it needs."""

    seed: int
    grid: dict[str, Any]
    cores: int
    threads: int | None = None
    """The learner's torch threads (``learner.torch_threads``), its share of the cores, unless the
    config sets them: torch would otherwise start a thread per core of the machine in each trial."""

    @property
    def name(self) -> str:
        parts = [f"{k}={v}" for k, v in self.grid.items()] + [f"seed={self.seed}"]
        return re.sub(r"[^\w.=+-]+", "-", "_".join(parts))

    def train_args(self) -> list[str]:
        """The ``asyncflow train`` options that make this trial (the env by ``--env``, so that
        ``module:function`` names a callable there too)."""
        args = ["--seed", str(self.seed)]
        for key, value in self.grid.items():
            args += ["--env", str(value)] if key == "env" else ["--set", f"{key}={value!r}"]
        if self.threads is not None:
            args += ["--set", f"learner.torch_threads={self.threads}"]
        return args


@dataclass(frozen=True)
class SweepSpec:
    """What the sweep was asked (``sweep.json``): the algorithm, the config options every trial
    shares, its stop conditions and logging options, the seeds, the grid and the cores to pack
    the trials onto."""

    algo: str
    shared: list[str]
    stops: list[str]
    seeds: list[int]
    grid: list[dict[str, Any]]
    cores: int

    def save(self, folder: Path) -> None:
        """Write ``sweep.json`` into the sweep's folder."""
        (folder / SPEC_FILE).write_text(json.dumps(asdict(self), indent=2, default=repr) + "\n")

    @classmethod
    def load(cls, folder: Path) -> SweepSpec:
        """Read a sweep's ``sweep.json`` (a ``ConfigError`` when the folder holds none)."""
        try:
            return cls(**json.loads((folder / SPEC_FILE).read_text()))
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            raise ConfigError(f"--resume: {folder} is not a sweep folder ({SPEC_FILE}: {exc})") from None


@dataclass(frozen=True)
class Outcome:
    """How a trial ended, and where its run folder is."""

    trial: Trial
    status: str  # "finished", "failed" or (tuning) "pruned"
    returncode: int
    seconds: float
    run_dir: str | None


def _run_dir(folder: Path) -> Path | None:
    runs = sorted(p.parent for p in folder.glob("*/progress.csv"))
    return runs[-1] if runs else None


def _command(spec: Any, trial: Trial, folder: Path) -> list[str]:
    run_dir = _run_dir(folder)
    base = [sys.executable, "-m", "asyncflow.cli", "train"]
    if run_dir is not None and any((run_dir / "checkpoints").glob("*.ckpt")):  # an interrupted trial goes on
        return [*base, "--resume", str(run_dir), *spec.stops]
    shutil.rmtree(folder, ignore_errors=True)  # started again from nothing
    folder.mkdir(parents=True)
    return [*base, spec.algo, *spec.shared, *spec.stops, *trial.train_args(), "--logdir", str(folder)]


class _Processes:
    """The trials' running processes, and whether the sweep is stopping: a trial whose process
    starts after the sweep began to stop is stopped at once, not left to run to its end."""

    def __init__(self) -> None:
        self.running: dict[Trial, Any] = {}
        self.stopping = False

    def add(self, trial: Trial, proc: Any) -> None:
        self.running[trial] = proc
        if self.stopping:
            _terminate(proc)

    def stop(self) -> None:
        self.stopping = True
        for proc in self.running.values():
            _terminate(proc)


def _terminate(proc: Any) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)  # asyncflow train stops its workers and exits (143)


def _dying_with_parent() -> Callable[[], None] | None:
    """What a trial's process runs before its program: SIGTERM when the sweep's process dies,
    even by SIGKILL, so that no trial outlives its sweep (Linux's PR_SET_PDEATHSIG; elsewhere
    None). Everything is looked up here, in the parent: the child between fork and exec only calls."""
    if sys.platform != "linux":
        return None
    import ctypes

    prctl, parent, kill, me = ctypes.CDLL(None, use_errno=True).prctl, os.getpid(), os.kill, os.getpid

    def in_child() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the sweep died before that call
            kill(me(), signal.SIGTERM)

    return in_child


Watch = Callable[[Path], Awaitable[bool]]
"""Runs beside a trial with its folder; returning True stops the trial (pruned). It is cancelled
when the trial ends."""


async def _run_trial(
    spec: Any, trial: Trial, folder: Path, processes: _Processes, watch: Watch | None = None
) -> Outcome:
    folder.mkdir(parents=True, exist_ok=True)
    command = _command(spec, trial, folder)
    started = time.monotonic()
    pruned = False
    with open(folder / LOG_FILE, "ab") as log:
        proc = await asyncio.create_subprocess_exec(*command, stdout=log, stderr=asyncio.subprocess.STDOUT,
                                                    preexec_fn=_dying_with_parent())  # fmt: skip
        processes.add(trial, proc)
        waiting = asyncio.ensure_future(proc.wait())
        watching = asyncio.ensure_future(watch(folder)) if watch is not None else None
        try:
            if watching is not None:
                await asyncio.wait({waiting, watching}, return_when=asyncio.FIRST_COMPLETED)
                if watching.done() and watching.result():
                    pruned = True
                    _terminate(proc)
            code = await waiting
        finally:
            processes.running.pop(trial, None)
            if watching is not None:
                watching.cancel()
    run_dir = _run_dir(folder)
    status = "pruned" if pruned else "finished" if code == 0 else "failed"
    outcome = Outcome(trial, status, code, time.monotonic() - started, str(run_dir) if run_dir else None)
    (folder / TRIAL_FILE).write_text(json.dumps(asdict(outcome), indent=2, default=repr) + "\n")
    return outcome


def finished(folder: Path) -> bool:
    """Whether the trial in ``folder`` has finished (not failed, not interrupted)."""
    try:
        return bool(json.loads((folder / TRIAL_FILE).read_text())["status"] == "finished")
    except (OSError, json.JSONDecodeError, KeyError):
        return False


async def run_sweep(
    folder: Path,
    spec: SweepSpec,
    trials: Sequence[Trial],
    on_outcome: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run the trials not finished yet, packed onto ``spec.cores`` cores; the outcomes in trial order.
    Cancelled (Ctrl-C), it stops the running trials as ``asyncflow train`` stops on SIGTERM."""
    todo = [t for t in trials if not finished(folder / t.name)]
    for trial in todo:
        if (folder / trial.name / TRIAL_FILE).exists():
            (folder / trial.name / TRIAL_FILE).unlink()  # a failed trial runs again
    free = spec.cores
    running: dict[asyncio.Task[Outcome], Trial] = {}
    processes = _Processes()
    outcomes: dict[Trial, Outcome] = {}
    try:
        while todo or running:
            while todo and todo[0].cores <= free:
                trial = todo.pop(0)
                free -= trial.cores
                running[asyncio.create_task(_run_trial(spec, trial, folder / trial.name, processes))] = trial
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                trial = running.pop(task)
                free += trial.cores
                outcomes[trial] = task.result()
                if on_outcome is not None:
                    on_outcome(outcomes[trial])
    finally:
        processes.stop()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    return [outcomes[t] for t in trials if t in outcomes]


def _last_row(run_dir: str | None) -> dict[str, str]:
    if run_dir is None or not os.path.exists(os.path.join(run_dir, "progress.csv")):
        return {}
    with open(os.path.join(run_dir, "progress.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    return rows[-1] if rows else {}


def summary(folder: Path, trials: Sequence[Trial]) -> str:
    """A markdown table of every trial: its setting, seed, status, last return, steps and time."""
    lines = ["| trial | status | return | env steps | seconds |", "|---|---|---|---|---|"]
    for trial in trials:
        try:
            saved = json.loads((folder / trial.name / TRIAL_FILE).read_text())
        except (OSError, json.JSONDecodeError):
            saved = {"status": "not run", "seconds": None, "run_dir": None}
        row = _last_row(saved.get("run_dir"))
        value = row.get("evaluation/episode_return_mean") or row.get("episode_return_mean") or "-"
        seconds = f"{saved['seconds']:.1f}" if saved.get("seconds") is not None else "-"
        lines.append(f"| {trial.name} | {saved['status']} | {value} | {row.get('num_env_steps_sampled', '-')} | "
                     f"{seconds} |")  # fmt: skip
    return "\n".join(lines)
