"""The public API: every name in each package's __all__ exists, and every
public function and class there has a docstring."""

from __future__ import annotations

import importlib
import inspect

import pytest


@pytest.mark.parametrize(
    "package",
    [
        "asyncflow",
        "asyncflow.flow",
        "asyncflow.rl",
        "asyncflow.algorithms",
        "asyncflow.experiment",
        "asyncflow.evaluate",
        "asyncflow.plot",
        "asyncflow.config_file",
    ],
)
def test_exports_exist_and_are_documented(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__doc__
    undocumented = []
    for name in module.__all__:
        obj = getattr(module, name)  # raises if an export is missing
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and not inspect.getdoc(obj):
            undocumented.append(name)
        if inspect.isclass(obj) and obj.__module__.startswith("asyncflow"):
            for attr, member in vars(obj).items():
                # getdoc through the class: an override documented by its base counts.
                if not attr.startswith("_") and inspect.isfunction(member) and not inspect.getdoc(getattr(obj, attr)):
                    undocumented.append(f"{name}.{attr}")
    assert undocumented == []
    assert sorted(module.__all__) == sorted(set(module.__all__))
