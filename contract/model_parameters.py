"""Typed `parameters` of our Triton models.

The renderer writes them with `to_parameters`, the models read them with `from_parameters`;
both sides use these dataclasses, so a key can be neither misspelt nor forgotten.  A wrong
or missing value fails model load with a message naming the model, the key and what is
allowed.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

T = TypeVar("T")


class ParameterError(ValueError):
    pass


def parse_bool(field: str, text: str) -> bool:
    """The one boolean parser of the project."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ParameterError(f"'{field}' must be true or false, got {text!r}")


def _parse_value(field: str, kind: Any, text: str) -> Any:
    if kind is bool:
        return parse_bool(field, text)
    if kind is int or kind is float:
        try:
            return kind(text)
        except ValueError:
            raise ParameterError(
                f"'{field}' must be {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
    if kind is Path:
        if not text.strip():
            raise ParameterError(f"'{field}' must be a path, got an empty string")
        return Path(text)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        allowed = [m.value for m in kind]
        try:
            return kind(text)
        except ValueError:
            raise ParameterError(f"'{field}' must be one of {allowed}, got {text!r}") from None
    if kind is str:
        return text
    raise TypeError(f"unsupported parameter type {kind!r} for '{field}'")


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def from_parameters(cls: type[T], model_name: str, raw: Mapping[str, Any]) -> T:
    """Build `cls` from Triton's `parameters` map ({key: {"string_value": ...}} or {key: str})."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    errors: list[str] = []
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        errors.append(f"unknown parameter(s) {unknown}; allowed: {sorted(fields)}")
    for name, f in fields.items():
        if name not in raw:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                errors.append(f"missing required parameter '{name}'")
            continue
        entry = raw[name]
        text = entry.get("string_value", "") if isinstance(entry, Mapping) else str(entry)
        try:
            values[name] = _parse_value(name, hints[name], text)
        except ParameterError as e:
            errors.append(str(e))
    if errors:
        raise ParameterError(f"model '{model_name}': " + "; ".join(errors))
    obj = cls(**values)
    validate = getattr(obj, "validate", None)
    if validate is not None:
        try:
            validate()
        except ValueError as e:
            raise ParameterError(f"model '{model_name}': {e}") from None
    return obj


def to_parameters(obj: Any) -> dict[str, str]:
    return {f.name: _format_value(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
