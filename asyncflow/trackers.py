"""Experiment trackers beside the run folder's own logs: MLflow and Weights & Biases.

``asyncflow train --mlflow`` logs each iteration's numbers (nested ones as ``learner/kl``) at
step ``num_env_steps_sampled``, and the config as parameters, to MLflow: by default an SQLite
store in the run folder (``RUN_DIR/mlflow.db``, which ``mlflow ui --backend-store-uri
sqlite:///RUN_DIR/mlflow.db`` shows; ``--mlflow URI`` names another store or a server).
``--wandb`` does the same to Weights & Biases, offline unless ``WANDB_MODE`` says otherwise, its
files in ``RUN_DIR/wandb`` (``wandb sync`` uploads them later). Each tracker's run id is kept in
``RUN_DIR/trackers.json``, so a resumed run goes on in the same tracker run. A tracker whose
package is missing is a ``ConfigError`` before anything starts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ._fields import flatten
from .errors import ConfigError

__all__ = ["MLflowTracker", "Tracker", "WandbTracker", "check_installed", "flat_params", "open_trackers"]

IDS_FILE = "trackers.json"


class Tracker(Protocol):
    """Where a run's numbers go besides its folder."""

    def log(self, numbers: Mapping[str, float], step: int) -> None:
        """Record one iteration's numbers at env step ``step``."""

    def close(self) -> None:
        """Finish the tracker's run."""


def check_installed(mlflow: bool, wandb: bool) -> None:
    """A ``ConfigError`` naming the extra for each tracker asked for whose package is missing."""
    for wanted, module, extra in ((mlflow, "mlflow", "mlflow"), (wandb, "wandb", "wandb")):
        if wanted:
            try:
                __import__(module)
            except ImportError:
                raise ConfigError(f"--{extra} needs the {module} package (pip install 'asyncflow[{extra}]')") from None


def flat_params(params: Mapping[str, Any]) -> dict[str, str]:
    """A nested config as ``{"learner.lr": "0.0003", ...}``, each value cut to 250 characters."""
    return {name: str(value)[:250] for name, value in flatten(params).items()}


def _ids(run_dir: Path) -> dict[str, str]:
    try:
        return dict(json.loads((run_dir / IDS_FILE).read_text()))
    except (OSError, json.JSONDecodeError):
        return {}


def _keep_id(run_dir: Path, name: str, run_id: str) -> None:
    (run_dir / IDS_FILE).write_text(json.dumps({**_ids(run_dir), name: run_id}) + "\n")


class MLflowTracker:
    """One MLflow run per asyncflow run (the same one again when the run is resumed)."""

    def __init__(self, run_dir: Path, params: Mapping[str, Any], uri: str | None = None) -> None:
        import mlflow

        self._mlflow = mlflow
        mlflow.set_tracking_uri(uri or f"sqlite:///{(run_dir / 'mlflow.db').resolve()}")
        mlflow.set_experiment(run_dir.parent.resolve().name or "asyncflow")
        known = _ids(run_dir).get("mlflow")
        self.run = mlflow.start_run(run_id=known) if known else mlflow.start_run(run_name=run_dir.name)
        if known is None:
            mlflow.log_params(flat_params(params))
            _keep_id(run_dir, "mlflow", self.run.info.run_id)

    def log(self, numbers: Mapping[str, float], step: int) -> None:
        """Record one iteration's numbers at env step ``step``."""
        self._mlflow.log_metrics(dict(numbers), step=step)

    def close(self) -> None:
        """End the MLflow run."""
        self._mlflow.end_run()


class WandbTracker:
    """One Weights & Biases run per asyncflow run, offline unless ``WANDB_MODE`` says otherwise."""

    def __init__(self, run_dir: Path, params: Mapping[str, Any], project: str | None = None) -> None:
        import wandb

        known = _ids(run_dir).get("wandb")
        self.run = wandb.init(
            project=project or "asyncflow",
            name=run_dir.name,
            dir=str(run_dir),
            config=flat_params(params),
            mode=os.environ.get("WANDB_MODE", "offline"),  # type: ignore[arg-type]
            id=known,
            resume="allow" if known else None,
        )
        if known is None:
            _keep_id(run_dir, "wandb", self.run.id)

    def log(self, numbers: Mapping[str, float], step: int) -> None:
        """Record one iteration's numbers at env step ``step``."""
        self.run.log(dict(numbers), step=step)

    def close(self) -> None:
        """Finish the W&B run (offline: its files are complete for ``wandb sync``)."""
        self.run.finish()


def open_trackers(
    run_dir: Path, params: Mapping[str, Any], *, mlflow: str | bool | None = None, wandb: str | bool | None = None
) -> list[Tracker]:
    """The trackers asked for: ``mlflow`` True (the run folder's store) or a tracking URI; ``wandb``
    True or a project name."""
    trackers: list[Tracker] = []
    if mlflow:
        trackers.append(MLflowTracker(run_dir, params, mlflow if isinstance(mlflow, str) else None))
    if wandb:
        trackers.append(WandbTracker(run_dir, params, wandb if isinstance(wandb, str) else None))
    return trackers


def close_all(trackers: Iterable[Tracker]) -> None:
    """Close every tracker (each one even if another fails)."""
    errors = []
    for tracker in trackers:
        try:
            tracker.close()
        except Exception as exc:  # noqa: BLE001 - the rest still close; the first error is raised after
            errors.append(exc)
    if errors:
        raise errors[0]
