"""fasttune search spaces as ZOOpt dimensions (``zoopt.Dimension2`` tuples).

Each searched key becomes one coordinate, named by its key path joined with ``/``:

- ``uniform`` -> ``(CONTINUOUS, [lower, upper], 1e-12)``;
- ``randint`` -> ``(DISCRETE, [lower, upper - 1], True)`` (ordered integers);
- quantized domains -> an ordered ``DISCRETE`` index over the multiples of ``q``, so
  every value a suggestion takes is one the domain allows, and both ends are reached;
- ``loguniform``, ``lograndint`` and their quantized forms -> a ``CONTINUOUS``
  coordinate over the logarithm of the range (widened by half a step for integers and
  steps), values snapped into the domain when decoded;
- ``choice`` -> ``(GRID, [0, 1, ...])`` over the indices of the categories, so any
  category (a dict, a list, None) comes back as the very object given.

``randn`` has no bounds, which ZOOpt needs, and is refused with the key named, as are
``grid_search`` and ``sample_from`` (:func:`~fasttune.search._flat_space.flatten_space`).
A native ``dim_dict`` entry (a ZOOpt tuple) is used as is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.search._checks import plain
from fasttune.search._flat_space import (
    FlatSpace,
    Param,
    category_index,
    check_bounded,
    check_plain_choice,
    flatten_space,
)
from fasttune.search._spec_view import contains_unresolved

_NAME = "ZOOptSearch"
_PRECISION = 1e-12  # ZOOpt rounds continuous values to this many decimals (as Ray's)
_HALF = 0.5 - 1e-9  # half a step, a hair less, so a widened bound never rounds outside
# zoopt.ValueType's values (an int enum-like class): kept here so that checking a
# native dim_dict does not import zoopt before it is needed.
DISCRETE, CONTINUOUS, GRID = 0, 1, 2


def import_zoopt() -> Any:
    """The ``zoopt`` module, or an ImportError naming ``pip install "fasttune[zoopt]"``."""
    return import_optional("zoopt", extra="zoopt", feature=_NAME)


@dataclass(frozen=True)
class Coordinate:
    """One ZOOpt dimension: its name, the config path it fills and how values map.

    ``param`` is the fasttune domain's parameter (None for a native ``dim_dict``
    entry, whose values are used as ZOOpt gives them); ``log`` and ``step`` say how a
    ZOOpt value maps to the domain's: ``exp(x)`` on a log coordinate, ``low + x * step``
    on a quantized one.
    """

    name: str
    path: tuple[Any, ...]
    spec: tuple[Any, ...]
    param: Param | None = None
    log: bool = False
    step: float | None = None

    def decode(self, x: Any) -> Any:
        """The config value for ZOOpt's ``x`` (a plain Python value in the domain)."""
        x = plain(x)
        param = self.param
        if param is None:
            return x
        if param.kind == "choice":
            return param.domain.categories[int(x)]  # type: ignore[attr-defined]
        if self.log:
            return param.decode(math.exp(x))
        if self.step is not None:
            return param.from_step_index(x, self.step)
        return param.decode(x)

    def encode(self, value: Any) -> Any:
        """ZOOpt's ``x`` for a config value already checked against the domain."""
        param = self.param
        if param is None:
            return plain(value)
        if param.kind == "choice":
            return category_index(param.domain.categories, value)  # type: ignore[attr-defined]
        if self.log:
            return float(math.log(value))
        if self.step is not None:
            return param.step_index(value, self.step)
        return value


def coordinates(spec: Mapping[str, Any]) -> tuple[list[Coordinate], FlatSpace]:
    """The coordinates of a space: native ZOOpt tuples and fasttune domains, in order.

    Raises:
        ValueError: For domains ZOOpt cannot search, constants in the searcher's own
            space and malformed native tuples; the message names the key.
    """
    native = {key: value for key, value in spec.items() if is_native(value)}
    rest = {key: value for key, value in spec.items() if key not in native}
    for key, value in rest.items():
        if not contains_unresolved(value):
            raise ValueError(
                f"{_NAME}: `dim_dict` entry {key!r} is {value!r}, neither a search domain "
                "(tune.uniform, tune.choice, ...) nor a ZOOpt dimension tuple such as "
                "(ValueType.CONTINUOUS, [0, 1], 1e-6). Put constants in the Tuner's "
                "`param_space`."
            )
    flat = flatten_space(rest, _NAME)
    converted = {param.name: from_param(param) for param in flat.params}
    out = []
    for key in spec:
        if key in native:
            out.append(_native(key, native[key]))
        else:
            out.extend(c for c in converted.values() if c.path[0] == key)
    return out, flat


def param_space_coordinates(config: Mapping[str, Any]) -> tuple[list[Coordinate], FlatSpace]:
    """The coordinates of a Tuner's ``param_space`` (its constants are left to the Tuner).

    Raises:
        ValueError: For domains ZOOpt cannot search, naming the key.
    """
    flat = flatten_space(config, _NAME)
    return [from_param(param) for param in flat.params], flat


def from_param(param: Param) -> Coordinate:
    """The coordinate searching a fasttune domain.

    Raises:
        ValueError: For ``randn`` domains (unbounded), naming the key.
    """
    if param.kind == "choice":
        check_plain_choice(param, _NAME)
        count = len(param.domain.categories)  # type: ignore[attr-defined]
        return Coordinate(param.name, param.path, (GRID, list(range(count))), param)
    check_bounded(param, _NAME, "ZOOpt")
    step = param.q if param.q is not None else (1 if param.kind == "int" else None)
    if param.log:
        low, high = float(param.low), float(param.high)
        if step is not None:  # each allowed value owns the half step around it
            low, high = max(low - _HALF * step, low / 2), high + _HALF * step
        spec = (CONTINUOUS, [math.log(low), math.log(high)], _PRECISION)
        return Coordinate(param.name, param.path, spec, param, log=True)
    if param.q is not None:
        count = param.step_index(param.high, param.q)
        return Coordinate(param.name, param.path, (DISCRETE, [0, count], True), param, step=param.q)
    if param.kind == "int":
        spec = (DISCRETE, [int(param.low), int(param.high)], True)
        return Coordinate(param.name, param.path, spec, param)
    spec = (CONTINUOUS, [float(param.low), float(param.high)], _PRECISION)
    return Coordinate(param.name, param.path, spec, param)


def is_native(value: Any) -> bool:
    """Whether ``value`` looks like a ZOOpt dimension tuple (``(ValueType.X, ...)``)."""
    return (
        isinstance(value, tuple)
        and len(value) in (2, 3)
        and type(value[0]) is int
        and value[0] in (DISCRETE, CONTINUOUS, GRID)
    )


def _native(name: Any, spec: tuple[Any, ...]) -> Coordinate:
    kind, region = spec[0], spec[1]
    shown = f"{_NAME}: `dim_dict` entry {name!r}: {spec!r}"
    if kind == GRID:
        if len(spec) != 2 or not isinstance(region, (list, tuple)) or not region:
            raise ValueError(f"{shown} must be (ValueType.GRID, [value, ...]).")
    elif (
        len(spec) != 3
        or not isinstance(region, (list, tuple))
        or len(region) != 2
        or not region[0] <= region[1]
    ):
        raise ValueError(
            f"{shown} must be (ValueType.CONTINUOUS, [lower, upper], precision) or "
            "(ValueType.DISCRETE, [lower, upper], has_order), lower <= upper."
        )
    path = tuple(name.split("/")) if isinstance(name, str) else (name,)
    return Coordinate(str(name), path, (kind, list(region), *spec[2:]))


def check_native_value(coordinate: Coordinate, value: Any) -> Any:
    """A point's value for a native coordinate, checked against its region.

    Raises:
        ValueError: If the value lies outside the region (or is not a grid value).
    """
    kind, region = coordinate.spec[0], coordinate.spec[1]
    value = plain(value)
    if kind == GRID:
        category_index(region, value)
        return value
    if not isinstance(value, (int, float)) or not region[0] <= value <= region[1]:
        raise ValueError(f"`{coordinate.name}` is {value!r}, outside [{region[0]}, {region[1]}]")
    return value
