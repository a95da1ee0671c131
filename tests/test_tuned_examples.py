"""The tuned examples (``examples/tuned/<algo>-<env>.yaml``): each one is a config its algorithm takes
(``asyncflow train ALGO --config FILE``), on the env its name says, names where its settings came
from and the command that runs it, and has a row in ``benchmarks/tuned_examples.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from asyncflow.algorithms import ALGORITHMS
from asyncflow.config_file import load_config_file

ROOT = Path(__file__).resolve().parents[1]
TUNED = sorted((ROOT / "examples" / "tuned").glob("*.yaml"))


@pytest.mark.parametrize("path", TUNED, ids=[p.stem for p in TUNED])
def test_each_tuned_example_is_a_config_of_its_algorithm_on_its_env(path: Path) -> None:
    algo, env = path.stem.split("-", 1)
    fields = load_config_file(path)
    assert fields["env"] == env
    cls = ALGORITHMS[algo]
    cls(cls.config_class(**fields))  # the config, the env and the model, checked
    first = path.read_text().splitlines()[0]
    assert first.startswith(f"# {cls.__name__} on {env}: asyncflow train {algo} --config examples/tuned/{path.name}")
    assert "rl-baselines3-zoo" in path.read_text()  # where the settings started from


def test_every_tuned_example_has_a_benchmark_row() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import tuned_examples
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert sorted(row.name for row in tuned_examples.ROWS) == [p.stem for p in TUNED]
    for row in tuned_examples.ROWS:  # the budget in each file's command is the row's
        assert f"--stop-timesteps {row.budget}" in (ROOT / "examples" / "tuned" / f"{row.name}.yaml").read_text()
