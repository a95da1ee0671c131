"""Frozen config classes made of fields and parts, checked when built.

A config class is a frozen, keyword-only dataclass whose fields carry their allowed range
(``field(0.99, min=0, max=1)``) and whose values are checked against their type hints; a
field may hold a *part*, another config class (``learner: LearnerConfig``), built from a
mapping or an instance. Bad input is a ``ConfigError`` that names the field by its whole
path (``learner.lr: must be > 0``), and an unknown name gets the closest known one::

    @config_class
    class LearnerConfig:
        lr: float = field(3e-4, min=0, exclusive_min=True)
        '''Adam learning rate.'''

    @config_class(defaults={"learner.lr": 3e-3}, shorthands={"lr": "learner.lr"})
    class PPOConfig:
        learner: LearnerConfig = part(default_factory=LearnerConfig)

    PPOConfig(learner={"lr": 1e-3}) == PPOConfig(lr=1e-3) == PPOConfig(**{"learner.lr": 1e-3})
    PPOConfig().learner.lr == PPOConfig().lr == 3e-3

``defaults`` change what a subclass's parts start from without redeclaring a field;
``shorthands`` are flat names for nested fields, read and written (a config file's
``lr: 0.001`` and ``--set lr=0.001`` both work). Both are inherited and may be extended.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from .errors import ConfigError

__all__ = ["Fields", "config_class", "field", "is_config", "part", "to_dict"]

C = TypeVar("C", bound=type)


def field(*, default: Any, min: float | None = None, max: float | None = None, exclusive_min: bool = False) -> Any:
    """A config field with an optional allowed range."""
    return dataclasses.field(default=default, metadata={"min": min, "max": max, "exclusive_min": exclusive_min})


def part(*, default_factory: type) -> Any:
    """A field holding a part (a config class), by default built with its own defaults."""
    return dataclasses.field(default_factory=default_factory, metadata={"part": default_factory})


def is_config(value: Any) -> bool:
    """Whether ``value`` (a class or an instance) is a config class made by ``config_class``."""
    return hasattr(value, "__config_paths__")


def _parts(cls: type) -> dict[str, type]:
    return {f.name: f.metadata["part"] for f in dataclasses.fields(cls) if "part" in f.metadata}


def _paths(cls: type, prefix: str = "") -> Iterator[str]:
    """Every field's path, parts opened (``learner.lr``, ...)."""
    for f in dataclasses.fields(cls):
        sub = f.metadata.get("part")
        if sub is not None:
            yield from _paths(sub, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}"


def _unknown(cls: type, name: str, known: set[str]) -> ConfigError:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"{cls.__name__}: unknown field {name!r}{hint}")


def _nest(cls: type, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` as this class's fields: shorthands and dotted names become nested mappings
    under their part; a name that is neither is a ConfigError with the closest known one."""
    names = {f.name for f in dataclasses.fields(cls)}
    shorthands: dict[str, str] = cls.__config_shorthands__  # type: ignore[attr-defined]
    parts = _parts(cls)
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        path = shorthands.get(key, key)
        head, _, rest = path.partition(".")
        if head not in names or (rest and head not in parts):
            raise _unknown(cls, key, names | set(shorthands) | set(cls.__config_paths__))  # type: ignore[attr-defined]
        if not rest:
            earlier = out.get(head)
            if isinstance(earlier, dict) and isinstance(value, Mapping):
                out[head] = {**earlier, **value}
            elif isinstance(earlier, dict) and head in parts:  # fields of a part, then the whole part: merged
                out[head] = {**to_dict(_build_part(head, parts[head], value), nested=False), **earlier}
            else:
                out[head] = value
            continue
        sub = out.setdefault(head, {})
        if not isinstance(sub, dict):  # a whole part given (model=MyNet), and a field of it too: the field wins
            sub = out[head] = to_dict(_build_part(head, parts[head], sub), nested=False)
        sub[rest] = value
    return out


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@typing.dataclass_transform(
    kw_only_default=True, frozen_default=True, field_specifiers=(dataclasses.field, field, part)
)
def config_class(
    cls: C | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    shorthands: Mapping[str, str] | None = None,
) -> Any:
    """Make ``cls`` a frozen keyword-only config dataclass (see the module docstring)."""

    def make(cls: C) -> C:
        cls = dataclasses.dataclass(frozen=True, kw_only=True)(cls)  # type: ignore[assignment]
        inherited_defaults: dict[str, Any] = dict(getattr(cls, "__config_defaults__", {}))
        inherited_shorthands: dict[str, str] = dict(getattr(cls, "__config_shorthands__", {}))
        cls.__config_shorthands__ = {**inherited_shorthands, **(shorthands or {})}  # type: ignore[attr-defined]
        cls.__config_paths__ = frozenset(_paths(cls))  # type: ignore[attr-defined]
        given = {cls.__config_shorthands__.get(k, k): v for k, v in (defaults or {}).items()}  # type: ignore[attr-defined]
        cls.__config_defaults__ = _nest(cls, {**inherited_defaults, **given})  # type: ignore[attr-defined]
        generated = cls.__init__  # type: ignore[misc]

        def __init__(self: Any, **kwargs: Any) -> None:
            try:
                values = _merge(type(self).__config_defaults__, _nest(type(self), kwargs))
                parts = _parts(type(self))
                for name, sub in parts.items():
                    if name in values:
                        values[name] = _build_part(name, sub, values[name])
                generated(self, **values)
            except ConfigError as exc:
                raise _as_given(exc, kwargs, type(self).__config_shorthands__) from exc.__cause__

        cls.__init__ = __init__  # type: ignore[misc]
        cls.__getattr__ = _read_shorthand  # type: ignore[attr-defined]
        return cls

    return make if cls is None else make(cls)


def _as_given(exc: ConfigError, given: Mapping[str, Any], shorthands: Mapping[str, str]) -> ConfigError:
    """``exc``, whose message starts with a field's path, naming the shorthand too where the
    field was given by one (``learner.lr: must be > 0, got -1.0 (given as lr)``)."""
    message = str(exc)
    for name in given:
        path = shorthands.get(name)
        if path is not None and message.startswith(f"{path}:"):
            return ConfigError(f"{message} (given as {name})")
    return exc


def _build_part(name: str, cls: type, value: Any) -> Any:
    """A part from what was given for it: an instance (taken as it is), a mapping of its
    fields, or what the part class's ``coerce`` turns into one (a model class for ``model``)."""
    if isinstance(value, cls):
        return value
    coerce: Callable[[Any], Any] | None = getattr(cls, "coerce", None)
    if not isinstance(value, Mapping) and coerce is not None:
        value = coerce(value)
        if isinstance(value, cls):
            return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a {cls.__name__} or a mapping of its fields, not {type(value).__name__} "
                          f"{value!r:.80}")  # fmt: skip
    try:
        return cls(**value)
    except ConfigError as exc:
        message = str(exc)
        if message.startswith(f"{cls.__name__}: unknown field"):
            raise ConfigError(
                message.replace("field '", f"field '{name}.").replace("mean '", f"mean '{name}.")
            ) from None
        raise ConfigError(message if message.startswith(f"{name}.") else f"{name}.{message}") from None


def _read_shorthand(self: Any, name: str) -> Any:
    """``config.lr`` reads ``config.learner.lr``: a shorthand is read as it is written."""
    path = type(self).__config_shorthands__.get(name) if not name.startswith("__") else None
    if path is None:
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
    value = self
    for step in path.split("."):
        value = getattr(value, step)
    return value


class Fields:
    """The base of config classes: fields checked after they are set (``check_fields``; a
    subclass's ``__post_init__`` calls ``super().__post_init__()`` first), ``replace``."""

    field_prefix: typing.ClassVar[str] = ""
    """What errors put before a field's name (``"model."``: a part built on its own still
    names its fields as a config holding it does)."""

    def __post_init__(self) -> None:
        check_fields(self)

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed (shorthands and dotted names too), checked the same way."""
        return type(self).build(to_dict(self), **changes)

    @classmethod
    def build(cls, values: Mapping[str, Any], **changes: Any) -> Any:
        """A config from ``values`` (nested mappings of fields, or shorthands) with ``changes``
        applied before anything is checked."""
        try:
            return cls(**_merge(_nest(cls, values), _nest(cls, changes)))
        except ConfigError as exc:
            raise _as_given(exc, {**values, **changes}, cls.__config_shorthands__) from exc.__cause__  # type: ignore[attr-defined]


def to_dict(config: Any, *, nested: bool = True) -> dict[str, Any]:
    """The fields as a mapping; parts as mappings too (``nested``) or as they are."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        out[f.name] = to_dict(value) if nested and is_config(value) else value
    return out


def flatten(mapping: Mapping[str, Any], sep: str = ".", prefix: str = "") -> dict[str, Any]:
    """A nested mapping on one level: ``{"learner": {"lr": 3e-4}}`` -> ``{"learner.lr": 3e-4}``."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, sep, f"{prefix}{key}{sep}"))
        else:
            out[f"{prefix}{key}"] = value
    return out


_YAML_WORDS = {"true": True, "false": False, "null": None, "~": None}


def parse_value(raw: str) -> Any:
    """A field's value given as text (``--set``, ``--grid``): a Python literal (``1e-3``,
    ``(64, 64)``, ``None``, ``True``), YAML's ``true``, ``false`` and ``null`` as a config
    file writes them, else the text itself. ``ast.literal_eval`` runs no code."""
    word = raw.strip()
    if word.lower() in _YAML_WORDS:
        return _YAML_WORDS[word.lower()]
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def check_fields(config: Any) -> None:
    """Check every field's type (ints become floats where a float is declared), finiteness and
    range; raise ``ConfigError`` naming the field."""
    hints = typing.get_type_hints(type(config))
    prefix: str = getattr(config, "field_prefix", "")
    for f in dataclasses.fields(config):
        if "part" in f.metadata:
            continue
        name = prefix + f.name
        value = _check_type(name, getattr(config, f.name), hints[f.name])
        object.__setattr__(config, f.name, value)
        for number in _numbers(value):
            if not math.isfinite(number):
                raise ConfigError(f"{name}: must be a finite number, got {value!r}")
        if _is_sizes(hints[f.name]) and isinstance(value, tuple) and any(n < 1 for n in value):
            raise ConfigError(f"{name}: sizes must be >= 1, got {value}")
        low, high = f.metadata.get("min"), f.metadata.get("max")
        if isinstance(value, int | float) and not isinstance(value, bool):
            if low is not None and (value < low or (f.metadata.get("exclusive_min") and value == low)):
                op = ">" if f.metadata.get("exclusive_min") else ">="
                raise ConfigError(f"{name}: must be {op} {low}, got {value}")
            if high is not None and value > high:
                raise ConfigError(f"{name}: must be <= {high}, got {value}")


def _is_sizes(hint: Any) -> bool:
    """Whether ``hint`` is ``tuple[int, ...]`` (layer sizes), optional or not."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_is_sizes(option) for option in typing.get_args(hint))
    return typing.get_origin(hint) is tuple and typing.get_args(hint)[:1] == (int,)


def _check_type(name: str, value: Any, hint: Any) -> Any:
    """``value`` (ints become floats where a float is declared), or a ConfigError."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return _check_type(name, value, option)
            except ConfigError:
                continue
        raise ConfigError(f"{name}: expected {hint}, got {type(value).__name__} {value!r}")
    if hint is type(None):
        if value is None:
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint in (str, bool):
        if isinstance(value, hint):
            return value
    elif origin is tuple:
        if isinstance(value, tuple | list):
            args = typing.get_args(hint)
            inner = args[0]
            return tuple(_check_type(name, v, inner) for v in value)
    elif origin is Callable or hint is Callable:
        if callable(value):
            return value
    else:
        return value
    raise ConfigError(f"{name}: expected {getattr(hint, '__name__', hint)}, got {type(value).__name__} {value!r}")


def _numbers(value: Any) -> list[float]:
    """The ints and floats in a field's value (itself, or the items of a tuple)."""
    items = value if isinstance(value, tuple) else (value,)
    return [v for v in items if isinstance(v, int | float) and not isinstance(v, bool)]
