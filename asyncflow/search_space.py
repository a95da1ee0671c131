"""Search spaces for config fields, as the command line writes them (``asyncflow tune``, ``asyncflow pbt``).

    lr=loguniform(1e-4,1e-2)      a float, uniform in its logarithm
    tau=uniform(0.001,0.05)       a float
    num_sgd_iter=int(3,30)        an integer, both bounds included
    batch=logint(32,1024)         an integer, uniform in its logarithm
    hidden=choice([64,64],[256,256])   one of the values

The bounds and values are read as Python literals (``ast.literal_eval``: no code runs).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ConfigError

__all__ = ["Dimension", "parse_space"]

KINDS = ("uniform", "loguniform", "int", "logint", "choice")


@dataclass(frozen=True)
class Dimension:
    """One config field's range: ``kind`` is one of ``uniform``, ``loguniform``, ``int``,
    ``logint`` and ``choice``; ``args`` the bounds (low, high) or the choices."""

    name: str
    kind: str
    args: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{self.name}={self.kind}({','.join(repr(a) for a in self.args)})"

    @property
    def low(self) -> Any:
        """A value of the range (its lower bound, or its first choice): a config built with it
        shows whether the field exists and takes values of this kind."""
        return self.args[0]

    def suggest(self, trial: Any) -> Any:
        """A value from an Optuna trial (``trial.suggest_*``)."""
        if self.kind == "choice":
            plain = all(isinstance(a, bool | int | float | str) or a is None for a in self.args)
            return self.value(trial.suggest_categorical(self.name, list(self.args) if plain else
                                                        [repr(a) for a in self.args]))  # fmt: skip
        if self.kind in ("int", "logint"):
            return trial.suggest_int(self.name, self.args[0], self.args[1], log=self.kind == "logint")
        return trial.suggest_float(self.name, self.args[0], self.args[1], log=self.kind == "loguniform")

    def value(self, param: Any) -> Any:
        """The config value of what an Optuna trial recorded for this field (a choice that is not
        a plain value is recorded as its ``repr``)."""
        if self.kind == "choice" and param not in self.args and isinstance(param, str):
            return ast.literal_eval(param)
        return param

    def sample(self, rng: np.random.Generator) -> Any:
        """A value drawn at random (population-based training's initial values and resampling)."""
        if self.kind == "choice":
            return self.args[int(rng.integers(len(self.args)))]
        low, high = self.args
        if self.kind == "uniform":
            return float(rng.uniform(low, high))
        if self.kind == "loguniform":
            return float(math.exp(rng.uniform(math.log(low), math.log(high))))
        if self.kind == "int":
            return int(rng.integers(low, high + 1))
        return int(min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high + 1)) - 1e-9)))))

    def clip(self, value: Any) -> Any:
        """``value`` kept inside the range (a perturbed value that left it)."""
        if self.kind == "choice":
            return value
        low, high = self.args
        clipped = min(high, max(low, value))
        return round(clipped) if self.kind in ("int", "logint") else float(clipped)


def _dimension(spec: str) -> Dimension:
    name, sep, rest = spec.partition("=")
    match = re.fullmatch(r"\s*(\w+)\s*\((.*)\)\s*", rest, re.DOTALL)
    if not sep or not name.strip() or match is None:
        raise ConfigError(f"--space: expected field=kind(...), kind one of {', '.join(KINDS)}; got {spec!r}")
    kind, body = match.group(1), match.group(2)
    field = name.strip().replace("-", "_")
    if kind not in KINDS:
        raise ConfigError(f"--space {field}: unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    try:
        args: tuple[Any, ...] = ast.literal_eval(f"({body},)" if body.strip() else "()")
    except (ValueError, SyntaxError):
        raise ConfigError(f"--space {field}: {kind}({body}) does not parse: give numbers or literal values") from None
    if kind == "choice":
        if len(args) < 2:
            raise ConfigError(f"--space {field}: choice(...) needs at least two values")
        return Dimension(field, kind, tuple(args))
    if len(args) != 2 or not all(isinstance(a, int | float) and not isinstance(a, bool) for a in args):
        raise ConfigError(f"--space {field}: {kind}(low,high) takes two numbers, not ({body})")
    low, high = args[0], args[1]
    if not low < high:
        raise ConfigError(f"--space {field}: {kind}({low},{high}) is empty: low must be below high")
    if kind in ("loguniform", "logint") and low <= 0:
        raise ConfigError(f"--space {field}: {kind} needs a positive low bound, not {low}")
    if kind in ("int", "logint"):
        if not (float(low).is_integer() and float(high).is_integer()):
            raise ConfigError(f"--space {field}: {kind}(low,high) takes integers, not ({body})")
        low, high = int(low), int(high)
    return Dimension(field, kind, (low, high))


def parse_space(specs: Sequence[str]) -> list[Dimension]:
    """``["lr=loguniform(1e-4,1e-2)", ...]`` as dimensions, each field once (a one-line
    ``ConfigError`` for one that does not parse)."""
    dims: list[Dimension] = []
    for spec in specs:
        dim = _dimension(spec)
        if dim.name in {d.name for d in dims}:
            raise ConfigError(f"--space: {dim.name} is given twice")
        dims.append(dim)
    return dims
