"""Tuning: an Optuna study whose trials are runs, packed onto the cores as a sweep's are.

    asyncflow tune sac --env Pendulum-v1 --trials 60 --space "lr=loguniform(1e-4,1e-2)" \\
        --metric evaluation/episode_return_mean --prune median --stop-timesteps 20000

Each trial is an ordinary ``asyncflow train`` with the values the sampler (TPE) chose, writing a
run folder under ``STUDY/trial_NNNN/`` (as ``asyncflow sweep`` does: ``trial.log``, ``trial.json``).
While it runs, the study reads its ``progress.csv``: each time the trial passes a multiple of
``report_every`` env steps, the metric's value there is reported to Optuna, and a trial the
pruner (median, or successive halving) stops is ended with SIGTERM and recorded as pruned. A
finished trial's value is its metric's last value. The study lives in ``STUDY/study.db``
(SQLite): ``asyncflow tune --resume STUDY`` goes on after an interruption or a kill, keeping the
trials that ended and running again, with the same values, those that were cut off. The best
trial's config is written to ``STUDY/best.yaml``, which ``asyncflow train ALGO --config`` takes.

A study folder is code, as a config file is (see ``asyncflow.sweep``): resume only your own.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .search_space import Dimension, parse_space
from .sweep import Outcome, Trial, _Processes, _run_trial

__all__ = ["PRUNERS", "TuneSpec", "best_config", "load_study", "run_study", "study_table"]

SPEC_FILE, STUDY_FILE, BEST_FILE = "tune.json", "study.db", "best.yaml"
PRUNERS = ("median", "halving", "none")
"""The pruners ``--prune`` names: Optuna's median pruner (once 3 trials have ended, not at a
trial's first report), successive halving (from the second report, reduction factor 3), none."""


@dataclass(frozen=True)
class TuneSpec:
    """What the study was asked (``tune.json``): the algorithm, the options every trial shares,
    its stop conditions, the seed, the search space, the metric and its direction, the pruner,
    the number of trials, the cores, and how often (env steps) a trial reports its metric."""

    algo: str
    shared: list[str]
    stops: list[str]
    seed: int
    space: list[str]
    metric: str
    direction: str  # "maximize" or "minimize"
    prune: str
    trials: int
    cores: int
    report_every: int

    @property
    def dimensions(self) -> list[Dimension]:
        """The search space, parsed."""
        return parse_space(self.space)

    def save(self, folder: Path) -> None:
        """Write ``tune.json`` into the study's folder."""
        (folder / SPEC_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, folder: Path) -> TuneSpec:
        """Read a study's ``tune.json`` (a ``ConfigError`` when the folder holds none)."""
        try:
            return cls(**json.loads((folder / SPEC_FILE).read_text()))
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            raise ConfigError(f"--resume: {folder} is not a study folder ({SPEC_FILE}: {exc})") from None


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise ConfigError("asyncflow tune needs Optuna: pip install 'asyncflow[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the study's own lines say what happens
    return optuna


def _pruner(optuna: Any, name: str) -> Any:
    if name == "median":  # once 3 trials have ended; not at a trial's first report
        return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=2, reduction_factor=3)
    return optuna.pruners.NopPruner()


def load_study(folder: Path, spec: TuneSpec) -> Any:
    """The study in ``folder/study.db``, made if it is not there. Trials left running by an
    interrupted or killed ``asyncflow tune`` are marked failed (``user_attrs["interrupted"]``)
    and their values queued to run again; their folders are removed."""
    optuna = _optuna()
    storage = f"sqlite:///{(folder / STUDY_FILE).resolve()}"
    study = optuna.create_study(storage=storage, study_name="asyncflow", direction=spec.direction,
                                load_if_exists=True, pruner=_pruner(optuna, spec.prune))  # fmt: skip
    # seeded by the trials so far: a resumed study's sampler draws anew, not what it drew before
    study.sampler = optuna.samplers.TPESampler(seed=spec.seed + len(study.trials))
    for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        optuna.Trial(study, frozen._trial_id).set_user_attr("interrupted", True)
        study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
        study.enqueue_trial(frozen.params)
        shutil.rmtree(folder / _trial_folder(frozen.number), ignore_errors=True)
    return study


def _trial_folder(number: int) -> str:
    return f"trial_{number:04d}"


def _counted(study: Any) -> int:
    """Trials that count towards the study's number: all but those an interruption cut off."""
    return sum(not t.user_attrs.get("interrupted") for t in study.get_trials(deepcopy=False))


def _curve(folder: Path, metric: str) -> list[tuple[int, float]]:
    """(env steps, metric) for each row of the trial's ``progress.csv`` that has the metric."""
    points = []
    for path in sorted(folder.glob("*/progress.csv"))[-1:]:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                try:
                    steps, value = int(row["num_env_steps_sampled"]), float(row[metric])
                except (KeyError, TypeError, ValueError):  # a row being written, or no value yet
                    continue
                if math.isfinite(value):
                    points.append((steps, value))
    return points


def _final(folder: Path, metric: str) -> tuple[float, int] | None:
    curve = _curve(folder, metric)
    return (curve[-1][1], curve[-1][0]) if curve else None


class _Reporter:
    """Reports a running trial's metric to Optuna at each multiple of ``every`` env steps it
    passes (the value of the first row at or past it), and says when the pruner stops it."""

    def __init__(self, trial: Any, metric: str, every: int) -> None:
        self.trial, self.metric, self.every = trial, metric, every
        self.reported = 0  # the last milestone reported

    def catch_up(self, folder: Path, prune: bool = True) -> bool:
        """Report the milestones passed since the last call; True: the trial should stop."""
        for steps, value in _curve(folder, self.metric):
            milestone = steps // self.every
            if milestone > self.reported:
                self.reported = milestone
                self.trial.report(value, milestone)
                if prune and self.trial.should_prune():
                    return True
        return False

    async def watch(self, folder: Path) -> bool:
        while True:
            if self.catch_up(folder):
                return True
            await asyncio.sleep(0.25)


async def run_study(
    folder: Path,
    spec: TuneSpec,
    study: Any,
    make_trial: Callable[[dict[str, Any]], Trial],
    on_outcome: Callable[[Outcome, Any], None] | None = None,
) -> None:
    """Run trials until the study has ``spec.trials`` of them (besides those cut off by an
    interruption), packed onto ``spec.cores`` cores. ``make_trial`` turns the sampler's values
    into a trial (checking its config); ``on_outcome`` hears of each trial that ends with the
    Optuna trial as recorded. Cancelled, it stops the running trials; they are run again on resume."""
    optuna = _optuna()
    dims = spec.dimensions
    processes = _Processes()
    running: dict[asyncio.Task[Outcome], tuple[Trial, Any, _Reporter]] = {}
    free, waiting = spec.cores, None  # waiting: an asked trial that waits for cores
    try:
        while _counted(study) < spec.trials or waiting is not None or running:
            while waiting is not None or _counted(study) < spec.trials:
                if waiting is None:
                    if free == 0:  # asked only once it may start: a study cut off holds no trial that never ran
                        break
                    asked = study.ask()
                    waiting = (make_trial({d.name: d.suggest(asked) for d in dims}), asked)
                trial, asked = waiting
                if trial.cores > free:
                    break
                waiting, free = None, free - trial.cores
                reporter = _Reporter(asked, spec.metric, spec.report_every)
                run = _run_trial(spec, trial, folder / _trial_folder(asked.number), processes, reporter.watch)
                running[asyncio.create_task(run)] = (trial, asked, reporter)
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                trial, asked, reporter = running.pop(task)
                free += trial.cores
                outcome, trial_folder = task.result(), folder / _trial_folder(asked.number)
                if outcome.status == "finished":
                    reporter.catch_up(trial_folder, prune=False)  # the rows it wrote since the last look
                frozen = _tell(optuna, study, asked, outcome, trial_folder, spec)
                if on_outcome is not None:
                    on_outcome(outcome, frozen)
    finally:
        processes.stop()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


def _tell(optuna: Any, study: Any, asked: Any, outcome: Outcome, folder: Path, spec: TuneSpec) -> Any:
    """Record how a trial ended: its last value, pruned, or failed (its exit code, or a run that
    never reported the metric)."""
    asked.set_user_attr("folder", folder.name)
    asked.set_user_attr("seconds", round(outcome.seconds, 2))
    final = _final(folder, spec.metric)
    if final is not None:
        asked.set_user_attr("env_steps", final[1])
    if outcome.status == "pruned":
        return study.tell(asked, state=optuna.trial.TrialState.PRUNED)
    if outcome.status == "failed" or final is None:
        why = f"exit {outcome.returncode}" if outcome.status == "failed" else f"no {spec.metric} reported"
        asked.set_user_attr("failed", why)
        return study.tell(asked, state=optuna.trial.TrialState.FAIL)
    return study.tell(asked, final[0])


def study_table(study: Any, dims: Sequence[Dimension]) -> str:
    """A markdown table of the study's trials: values, state, the metric, env steps and seconds."""
    names = [d.name for d in dims]
    lines = ["| trial | " + " | ".join(names) + " | state | value | env steps | seconds |",
             "|---|" + "---|" * (len(names) + 4)]  # fmt: skip
    for t in study.get_trials(deepcopy=False):
        state = "interrupted" if t.user_attrs.get("interrupted") else t.state.name.lower()
        if t.user_attrs.get("failed"):
            state += f" ({t.user_attrs['failed']})"
        values = [_short(t.params.get(n, "-")) for n in names]
        if t.state.name == "PRUNED":  # its value is its last report's
            state += f" at report {t.last_step}"
        value = "-" if t.value is None else f"{t.value:.2f}"
        lines.append(f"| {t.number} | " + " | ".join(values) + f" | {state} | {value} | "
                     f"{t.user_attrs.get('env_steps', '-')} | {t.user_attrs.get('seconds', '-')} |")  # fmt: skip
    return "\n".join(lines)


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def best_config(study: Any, dims: Sequence[Dimension], base: Mapping[str, Any], algo: str, metric: str) -> str | None:
    """The best finished trial's config as YAML: ``base`` (the fields every trial shared) and its
    values, for ``asyncflow train ALGO --config``; None when no trial finished."""
    import yaml

    try:
        best = study.best_trial
    except ValueError:
        return None
    values = {d.name: d.value(best.params[d.name]) for d in dims if d.name in best.params}
    fields = {**_plain(dict(base)), **_plain(values)}
    header = (f"# asyncflow tune: the best of {len(study.trials)} trials, trial {best.number}, "
              f"{metric} = {best.value:.4g}\n# asyncflow train {algo} --config THIS_FILE\n")  # fmt: skip
    return header + str(yaml.safe_dump(fields, sort_keys=False))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
