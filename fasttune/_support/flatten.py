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


def _flatten_into(out: dict[str, Any], prefix: str, dt: Mapping[Any, Any]) -> None:
    for key, value in dt.items():
        key = prefix + (key if type(key) is str else str(key))
        cls = type(value)
        if cls not in _NOT_MAPPINGS and _is_mapping(cls) and value:
            _flatten_into(out, key + "/", value)
        else:
            out[key] = value


def flatten_result(result: Mapping[Any, Any], exclude: Container[str] = ()) -> dict[str, Any]:
    """Flatten ``result`` like ``flatten_dict(result, delimiter="/")``, minus ``exclude``.

    Gives the same keys, values and order as :func:`fasttune.utils.util.flatten_dict`
    about three times faster: the ``Mapping`` check is cached per type.

    Args:
        result: The result to flatten.
        exclude: Top-level keys to leave out.
    """
    out: dict[str, Any] = {}
    for key, value in result.items():
        if key in exclude:
            continue
        name = key if type(key) is str else str(key)
        cls = type(value)
        if cls not in _NOT_MAPPINGS and _is_mapping(cls) and value:
            _flatten_into(out, name + "/", value)
        else:
            out[name] = value
    return out
