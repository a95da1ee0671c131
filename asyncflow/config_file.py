"""Reading algorithm configs from YAML, TOML or JSON files.

A file holds a mapping of config fields (``lr: 0.001``, ``hidden: [64, 64]``).
Errors name the file and the field, and are raised before any process starts.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["load_config_file"]


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The fields in ``path`` (``.yaml``/``.yml``, ``.toml`` or ``.json``)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"--config: cannot read {path}: {exc.strerror or exc}") from exc
    suffix = path.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"--config: {path}: use a .yaml, .yml, .toml or .json file")
    except ConfigError:
        raise
    except Exception as exc:  # each parser has its own error types
        raise ConfigError(f"--config: {path} is not valid {suffix[1:].upper()}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ConfigError(f"--config: {path} must hold a mapping of config fields, not {type(data).__name__}")
    return data
