"""Small dictionary helpers shared by loggers, results and search spaces."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def flatten_dict(
    dt: Mapping[str, Any], delimiter: str = "/", prevent_delimiter: bool = False
) -> dict[str, Any]:
    """Flatten nested dicts into one level, joining keys with ``delimiter``.

    As Ray's: plain values keep their places and nested ones follow, one level of
    nesting after another; an empty dict leaves no key.

    >>> flatten_dict({"a": {"b": 1}, "c": 2, "d": {}})
    {'c': 2, 'a/b': 1}
    """
    out: dict[str, Any] = {}
    nested: list[tuple[str, Mapping[Any, Any]]] = []

    def take(name: str, key: Any, value: Any) -> None:
        key = str(key)
        if prevent_delimiter and delimiter in key:
            raise ValueError(
                f"Found delimiter {delimiter!r} in key {key!r} when flattening a dict; "
                "rename the key or choose another delimiter."
            )
        if isinstance(value, Mapping):
            if value:
                nested.append((name, value))
        else:
            out[name] = value

    for key, value in dt.items():
        take(str(key), key, value)
    while nested:
        level, nested = nested, []
        for prefix, mapping in level:
            for key, value in mapping.items():
                take(f"{prefix}{delimiter}{key}", key, value)
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


def validate_warmstart(
    parameter_names: list[str],
    points_to_evaluate: list[dict[str, Any] | list[Any]] | None,
    evaluated_rewards: list[Any] | None,
    validate_point_name_lengths: bool = True,
) -> None:
    """Check the warm-start inputs a searcher was given.

    Raises:
        TypeError: ``points_to_evaluate`` is not a list of dicts/lists, or
            ``evaluated_rewards`` is not a list.
        ValueError: A point has a different number of entries than
            ``parameter_names``, or rewards and points differ in number.
    """
    if points_to_evaluate:
        if not isinstance(points_to_evaluate, list):
            raise TypeError(
                f"points_to_evaluate must be a list of dicts, got "
                f"{type(points_to_evaluate).__name__}: {points_to_evaluate!r}"
            )
        for point in points_to_evaluate:
            if not isinstance(point, (dict, list)):
                raise TypeError(
                    f"points_to_evaluate must hold dicts (or lists of values), got {point!r}"
                )
            if validate_point_name_lengths and len(point) != len(parameter_names):
                raise ValueError(
                    f"The point {point!r} in points_to_evaluate has {len(point)} entries, but "
                    f"the search space has {len(parameter_names)} parameters "
                    f"({parameter_names}); give a value for each."
                )
    if points_to_evaluate and evaluated_rewards:
        if not isinstance(evaluated_rewards, list):
            raise TypeError(
                f"evaluated_rewards must be a list, got {type(evaluated_rewards).__name__}"
            )
        if len(evaluated_rewards) != len(points_to_evaluate):
            raise ValueError(
                f"evaluated_rewards has {len(evaluated_rewards)} entries but "
                f"points_to_evaluate has {len(points_to_evaluate)}; give one reward per point."
            )
