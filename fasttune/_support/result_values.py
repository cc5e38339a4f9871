"""Reported values of any numeric type turned into plain Python numbers, once.

A training loop reports what its framework hands it: numpy scalars (``np.float32``),
0-d arrays, torch 0-d tensors, ``Decimal``. Ray Tune accepts them all, and so must
every consumer of a result (JSON and CSV lines, TensorBoard, schedulers, searchers,
stoppers, statistics). Rather than teach each of them every type, a Trainable turns
such values into ``int``/``float``/``bool`` when the result is made, on the worker,
before it is pickled to the driver (so the driver never needs torch to read it).

Values that are not numbers (strings, lists, arrays of more than one element) are kept
as they are: JSON keeps them, and consumers that need a number skip them.

Neither numpy nor torch is imported here: values are recognised by the module of their
type, and converted with their own ``item()``.
"""

from __future__ import annotations

import sys
from typing import Any

# Types left untouched; the common case (all values plain) costs one set lookup per key.
_PLAIN = frozenset((float, int, str, bool, type(None), list, tuple, bytes))
_MAX_DEPTH = 20


def _convert(value: Any) -> Any:
    """``value`` as a Python number when it is a one-element numeric value, else itself."""
    cls = type(value)
    module = cls.__module__
    if module == "numpy" or module.startswith("torch"):
        size = getattr(value, "size", None)
        if module != "numpy":  # torch: size is a method, numel the element count
            numel = getattr(value, "numel", None)
            size = numel() if callable(numel) else None
        if size == 1 and getattr(value, "ndim", 0) == 0:
            try:
                item = value.item()
            except Exception:
                return value
            if isinstance(item, (bool, int, float)):
                return item
            if isinstance(item, complex):
                return value
        return value
    # decimal is not imported here (~2 ms at start): without it no Decimal exists.
    decimal = sys.modules.get("decimal")
    if decimal is not None and isinstance(value, decimal.Decimal):
        return float(value)
    return value


def _normalize_dict(values: dict[Any, Any], depth: int) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in values.items():
        cls = type(value)
        if cls in _PLAIN:
            out[key] = value
        elif cls is dict:
            out[key] = _normalize_dict(value, depth + 1) if depth < _MAX_DEPTH else value
        else:
            out[key] = _convert(value)
    return out


def plain_result(result: dict[Any, Any]) -> dict[Any, Any]:
    """A copy of ``result`` with numeric values of any type as Python numbers.

    numpy scalars and 0-d arrays, torch 0-d tensors and ``Decimal`` become ``int``,
    ``float`` or ``bool`` (``np.bool_`` becomes ``bool``); nested dicts are converted
    too. Anything else (strings, lists, larger arrays, objects) is kept unchanged.

    Args:
        result: A result as reported by the training function or ``step()``.

    Returns:
        A new dict; ``result`` itself is not changed.

    Example:
        >>> import numpy as np
        >>> from decimal import Decimal
        >>> plain_result({"a": np.float32(0.5), "b": {"c": np.int64(2)}, "d": Decimal("1.5")})
        {'a': 0.5, 'b': {'c': 2}, 'd': 1.5}
    """
    if _PLAIN.issuperset(map(type, result.values())):  # the common case, in C
        return dict(result)
    return _normalize_dict(result, 0)
