"""The documentation's generated parts, each from the code it describes.

A page asks for one with a marker line, ``<!-- gen: KIND ARG -->``; ``hooks.py`` replaces it
with what the function of that kind returns: an algorithm's config fields and their
defaults (from its config class, the descriptions from the fields' docstrings), its plan (the
plan function's source), the spaces it takes (its recipe's family), the command line's help
(from the parser), and a benchmark's saved tables (``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OBSERVATIONS = "`Box` of any shape, `Discrete`, `MultiDiscrete`, `MultiBinary`, and `Dict`/`Tuple` of these"


class GenerationError(Exception):
    """A marker that names nothing (an unknown algorithm, a benchmark with no saved results)."""


@functools.cache
def _package() -> Any:
    import griffe

    return griffe.load("asyncflow", search_paths=[str(ROOT)], docstring_parser=None)


def _field_doc(owner: type, name: str) -> str:
    """The docstring written under field ``name`` of config class ``owner`` or of the class it inherits it from."""
    for cls in owner.__mro__:
        if name not in getattr(cls, "__annotations__", {}):
            continue
        path = f"{cls.__module__}.{cls.__qualname__}".removeprefix("asyncflow.")
        try:
            member = _package()[path].members[name]
        except KeyError:
            continue
        if member.docstring is not None:
            return " ".join(member.docstring.value.split())
    return ""


def _recipe(name: str) -> Any:
    from asyncflow.algorithms import recipes

    for recipe in recipes():
        if recipe.name == name:
            return recipe
    raise GenerationError(f"no algorithm named {name!r}")


def _rows(cls: type, defaults: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str, Any, str]]:
    from asyncflow._fields import is_config

    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        path = prefix + f.name
        given = defaults.get(f.name, dataclasses.MISSING)
        if (
            f.default_factory is not dataclasses.MISSING
            and isinstance(f.default_factory, type)
            and is_config(f.default_factory)
        ):
            yield from _rows(f.default_factory, given if isinstance(given, dict) else {}, path + ".")
            continue
        if given is dataclasses.MISSING:
            given = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        yield path, str(f.type), given, _field_doc(cls, f.name)


def _show(value: Any) -> str:
    text = value.__name__ if callable(value) and hasattr(value, "__name__") else repr(value)
    return f"`{text}`".replace("|", "\\|")


def config(name: str) -> str:
    """A table of algorithm ``name``'s config fields: path, type, default, description."""
    cls = _recipe(name).config
    lines = [
        f"`{cls.__name__}` (`from asyncflow.algorithms import {cls.__name__}`), field by field. "
        "A nested field is set by its path (`learner.lr`), as `--set learner.lr=3e-4` on the command line.",
        "",
        "| field | type | default | what it is |",
        "|---|---|---|---|",
    ]
    for path, kind, default, doc in _rows(cls, getattr(cls, "__config_defaults__", {})):
        kind = kind.replace("|", "\\|")
        lines.append(f"| `{path}` | `{kind}` | {_show(default)} | {doc} |")
    return "\n".join(lines)


def plan(name: str) -> str:
    """Algorithm ``name``'s plan: the source of its plan function, as it runs."""
    function = _recipe(name).plan
    source = textwrap.dedent(inspect.getsource(function))
    module = inspect.getmodule(function)
    where = f"{module.__name__}.{function.__name__}" if module else function.__name__
    return f"`{where}`, from the source:\n\n```python\n{source.rstrip()}\n```"


def spaces(name: str) -> str:
    """The observation and action spaces algorithm ``name`` takes, from its recipe's family."""
    from asyncflow.rl.envs.spaces import _ACTIONS

    recipe = _recipe(name)
    actions = ", ".join(f"`{space.__name__}`" for space in _ACTIONS[recipe.family])
    caps = recipe.capabilities
    takes = [what for what, ok in (("recurrent models (`model.use_lstm`)", caps.recurrent),
                                   ("vector envs (`rollouts.vector_env`)", caps.vector_env and recipe.samples),
                                   ("async envs (`AsyncEnv`)", caps.async_env and recipe.samples),
                                   ("numpy inference in the workers", caps.numpy_inference),
                                   ("bfloat16 learner precision", caps.learner_precision)) if ok]  # fmt: skip
    return "\n".join([
        "| | it takes |",
        "|---|---|",
        f"| actions | {actions} |",
        f"| observations | {OBSERVATIONS} |",
        f"| model family | `{recipe.family}` ([the protocol](../guides/models.md)) |",
        f"| also takes | {', '.join(takes) if takes else 'none of the extras'} |",
        f"| samples from an env | {'yes' if recipe.samples else 'no: it learns from a dataset'} |",
    ])  # fmt: skip


def cli(_: str = "") -> str:
    """The help of ``asyncflow`` and of each of its commands, from the parser itself."""
    from asyncflow.cli import _build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps its help to the terminal's width: the same on every machine
    parser = _build_parser()
    out = [f"```text\n$ asyncflow --help\n{parser.format_help().rstrip()}\n```"]
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, sub in subs.choices.items():
        help_text = sub.format_help().rstrip()
        out.append(f"## asyncflow {command}\n\n```text\n$ asyncflow {command} --help\n{help_text}\n```")
    return "\n\n".join(out)


def benchmark(stem: str) -> str:
    """The tables ``python benchmarks/STEM.py`` saved on its last runs, each under its command."""
    path = RESULTS / f"{stem}.md"
    if not path.exists():
        raise GenerationError(f"no saved results for benchmarks/{stem}.py (run it: it writes {path.name})")
    return path.read_text().rstrip()


GENERATORS: dict[str, Callable[[str], str]] = {
    "config": config,
    "plan": plan,
    "spaces": spaces,
    "cli": cli,
    "benchmark": benchmark,
}
