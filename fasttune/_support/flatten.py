"""A fast ``flatten_dict`` for results, the hot path of the CSV and TensorBoard loggers."""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any

_NOT_MAPPINGS = frozenset((int, float, str, bool, type(None), list, tuple, bytes))
_is_mapping_cache: dict[type, bool] = {dict: True}


def _is_mapping(cls: type) -> bool:
    found = _is_mapping_cache.get(cls)
    if found is None:
        found = _is_mapping_cache[cls] = issubclass(cls, Mapping)
    return found


def flatten_result(result: Mapping[Any, Any], exclude: Container[str] = ()) -> dict[str, Any]:
    """Flatten ``result`` like ``flatten_dict(result, delimiter="/")``, minus ``exclude``.

    Gives the same keys, values and order as :func:`fasttune.utils.util.flatten_dict`
    about three times faster: the ``Mapping`` check is cached per type. As Ray's, the
    plain values keep their places and nested ones follow, one level of nesting after
    another; an empty dict leaves no key.

    Args:
        result: The result to flatten.
        exclude: Top-level keys to leave out.
    """
    out: dict[str, Any] = {}
    nested = _take(out, "", result, exclude)
    while nested:  # a level of nesting per round, in order, as Ray's flatten_dict
        deeper: list[tuple[str, Mapping[Any, Any]]] = []
        for prefix, mapping in nested:
            deeper += _take(out, prefix, mapping, ())
        nested = deeper
    return out


def _take(
    out: dict[str, Any], prefix: str, mapping: Mapping[Any, Any], exclude: Container[str]
) -> list[tuple[str, Mapping[Any, Any]]]:
    """Put ``mapping``'s plain values in ``out``; return its non-empty nested ones."""
    nested: list[tuple[str, Mapping[Any, Any]]] = []
    for key, value in mapping.items():
        if key in exclude:
            continue
        name = prefix + (key if type(key) is str else str(key))
        cls = type(value)
        if cls not in _NOT_MAPPINGS and _is_mapping(cls):
            if value:
                nested.append((name + "/", value))
        else:
            out[name] = value
    return nested
