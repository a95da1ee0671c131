"""Names a package loads on first use (PEP 562), so that importing it imports none of its modules."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_loader(package: str, modules: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """What the package's ``__getattr__`` calls: ``name`` imported from ``modules[name]`` (relative to
    ``package``, or an absolute ``asyncflow.`` path) and kept in ``namespace``, so it loads once."""

    def load(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = module if module.startswith("asyncflow.") else f".{module}"
        value = getattr(importlib.import_module(where, package), name)
        namespace[name] = value
        return value

    return load
