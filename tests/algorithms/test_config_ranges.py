"""Every numeric config field of every algorithm, in its parts too, has its real range, and
a value outside it (or NaN, or inf) is a ConfigError that names the field by its path
(``learner.lr: ...``), raised before any process starts: the fork server included."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
import types
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncflow import ConfigError
from asyncflow.algorithms import ALGORITHMS

CONFIGS = sorted({cls.config_class for cls in ALGORITHMS.values()}, key=lambda c: c.__name__)
ANY_FINITE = {"target_entropy"}  # an entropy target may be any real number
NON_FINITE = [math.nan, math.inf, -math.inf]


def _scalar(hint: Any) -> Any:
    """``int`` or ``float`` for a (possibly optional) numeric field, else None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = options[0] if len(options) == 1 else None
    return hint if hint in (int, float) else None


def numeric_fields(config: type, prefix: str = "") -> list[tuple[str, dataclasses.Field[Any], type]]:
    """Each numeric field's path (``learner.lr``), the field, and its kind; parts opened."""
    hints = typing.get_type_hints(config)
    out = []
    for f in dataclasses.fields(config):
        if "part" in f.metadata:
            out += numeric_fields(f.metadata["part"], f"{prefix}{f.name}.")
            continue
        kind = _scalar(hints[f.name])
        if kind is not None:
            out.append((f"{prefix}{f.name}", f, kind))
    return out


CASES = [(config, path, f, kind) for config in CONFIGS for path, f, kind in numeric_fields(config)]


def test_every_numeric_field_declares_its_range() -> None:
    unbounded = [
        f"{config.__name__}.{path}"
        for config, path, f, _ in CASES
        if f.name not in ANY_FINITE and f.metadata.get("min") is None and f.metadata.get("max") is None
    ]
    assert unbounded == []
    assert len(CASES) > 150  # all twelve algorithms' fields are here


def _bad_values(f: dataclasses.Field[Any], kind: type) -> st.SearchStrategy[Any]:
    low, high, exclusive = f.metadata.get("min"), f.metadata.get("max"), f.metadata.get("exclusive_min")
    options: list[st.SearchStrategy[Any]] = []
    if kind is float:
        options.append(st.sampled_from(NON_FINITE))
        if low is not None:
            options.append(st.floats(max_value=low, exclude_max=not exclusive, allow_nan=False, allow_infinity=False))
        if high is not None:
            options.append(st.floats(min_value=high, exclude_min=True, allow_nan=False, allow_infinity=False))
    else:
        options.append(st.sampled_from([math.inf, 1e309, 0.5]))  # not ints at all
        if low is not None:
            options.append(st.integers(max_value=int(low) - (0 if exclusive else 1)))
        if high is not None:
            options.append(st.integers(min_value=int(high) + 1))
    return st.one_of(options)


@pytest.mark.parametrize(("config", "path", "field", "kind"), CASES, ids=[f"{c.__name__}.{p}" for c, p, _, _ in CASES])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_out_of_range_and_non_finite_values_are_config_errors_naming_the_field(
    config: type, path: str, field: dataclasses.Field[Any], kind: type, data: st.DataObject
) -> None:
    value = data.draw(_bad_values(field, kind), label=path)
    with pytest.raises(ConfigError, match=rf"^{re.escape(path)}: "):
        config(**{path: value})


def test_tuple_fields_reject_non_finite_and_non_positive_items() -> None:
    from asyncflow.algorithms import DQNConfig, PPOConfig, TwoTrainerConfig

    for bad in [(64, 0), (64, -3)]:
        with pytest.raises(ConfigError, match=r"^model\.hidden: sizes must be >= 1"):
            PPOConfig(hidden=bad)
    with pytest.raises(ConfigError, match=r"^epsilon: must be a finite number"):
        DQNConfig(epsilon=(1.0, math.nan))
    with pytest.raises(ConfigError, match=r"^dqn\.model\.hidden: sizes must be >= 1"):
        TwoTrainerConfig(dqn_hidden=(0,))


# Runs the real command line (as the shell does), then lists this process's children
# from /proc: a fork server started on the way would be one of them.
SPY = """
import os, sys, threading
sys.argv = ["asyncflow", "train", "ppo", *sys.argv[1:]]
import asyncflow.cli
code = asyncflow.cli.main()
for thread in threading.enumerate():
    if thread is not threading.main_thread():
        thread.join(timeout=10)
children = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        continue
    if ppid == os.getpid():
        children.append(pid)
print("EXIT", code, "CHILDREN", len(children))
"""


@pytest.mark.parametrize("arg", ["max_grad_norm=-0.5", "lr=1e309", "gamma=nan", "num_workers=-1", "hiden=(64,)"])
def test_the_cli_rejects_bad_settings_before_starting_any_process(arg: str) -> None:
    out = subprocess.run([sys.executable, "-c", SPY, "--set", arg], capture_output=True, text=True, timeout=120)
    name = arg.split("=")[0]  # a shorthand: the error names the field's path (learner.lr: ...)
    named = re.search(rf"asyncflow: error: ([\w.]+\.)?{name}: ", out.stderr) or f"unknown field {name!r}" in out.stderr
    assert named, out.stderr
    assert "EXIT 2 CHILDREN 0" in out.stdout, out.stdout
