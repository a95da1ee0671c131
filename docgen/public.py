"""asyncflow's public API: the modules whose ``__all__`` it is, and what there lacks a docstring.

The documentation's build (``hooks.py``) and ``tests/test_exports.py`` hold the API to this.
"""

from __future__ import annotations

import importlib
import inspect

PUBLIC = (
    "asyncflow",
    "asyncflow.actors",
    "asyncflow.algorithms",
    "asyncflow.flow",
    "asyncflow.rl",
    "asyncflow.rl.offline",
    "asyncflow.experiment",
    "asyncflow.evaluate",
    "asyncflow.export",
    "asyncflow.plot",
    "asyncflow.sweep",
    "asyncflow.tune",
    "asyncflow.pbt",
    "asyncflow.search_space",
    "asyncflow.compare",
    "asyncflow.aggregate",
    "asyncflow.trackers",
    "asyncflow.config_file",
)
"""The modules whose ``__all__`` is asyncflow's public API, each with a page under ``reference/``."""


def undocumented(module_name: str) -> list[str]:
    """Public names of ``module_name`` (and public methods of its classes) without a docstring."""
    module = importlib.import_module(module_name)
    missing = [] if module.__doc__ else [module_name]
    for name in getattr(module, "__all__", []):
        obj = getattr(module, name)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and not inspect.getdoc(obj):
            missing.append(f"{module_name}.{name}")
        if inspect.isclass(obj) and obj.__module__.startswith("asyncflow"):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and inspect.isfunction(member) and not inspect.getdoc(getattr(obj, attr)):
                    missing.append(f"{module_name}.{name}.{attr}")
    return missing
