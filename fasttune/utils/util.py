"""Small dictionary helpers shared by loggers, results and search spaces."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def flatten_dict(
    dt: Mapping[str, Any], delimiter: str = "/", prevent_delimiter: bool = False
) -> dict[str, Any]:
    """Flatten nested dicts into one level, joining keys with ``delimiter``.

    >>> flatten_dict({"a": {"b": 1}, "c": 2})
    {'a/b': 1, 'c': 2}
    """
    out: dict[str, Any] = {}

    def visit(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping) and value:
            for key, sub in value.items():
                key = str(key)
                if prevent_delimiter and delimiter in key:
                    raise ValueError(
                        f"Found delimiter {delimiter!r} in key {key!r} when flattening a dict; "
                        "rename the key or choose another delimiter."
                    )
                visit(f"{prefix}{delimiter}{key}" if prefix else key, sub)
        else:
            out[prefix] = value

    for key, value in dt.items():
        if prevent_delimiter and delimiter in str(key):
            raise ValueError(
                f"Found delimiter {delimiter!r} in key {key!r} when flattening a dict; "
                "rename the key or choose another delimiter."
            )
        visit(str(key), value)
    return out


def unflatten_dict(dt: Mapping[str, Any], delimiter: str = "/") -> dict[str, Any]:
    """Inverse of :func:`flatten_dict`."""
    out: dict[str, Any] = {}
    for key, value in dt.items():
        node = out
        *parents, leaf = key.split(delimiter)
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def deep_update(original: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively update ``original`` in place with ``new`` and return it."""
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(original.get(key), dict):
            deep_update(original[key], value)
        else:
            original[key] = value
    return original


def merge_dicts(d1: Mapping[str, Any], d2: Mapping[str, Any]) -> dict[str, Any]:
    """Return a deep copy of ``d1`` recursively updated with ``d2``."""
    merged = copy.deepcopy(dict(d1))
    return deep_update(merged, d2)
