"""fasttune search spaces as Ax parameters (``AxClient.create_experiment(parameters=...)``).

Each searched key becomes one Ax parameter named by its key path joined with ``/``:

- ``uniform`` / ``loguniform`` -> a float ``range`` (``log_scale`` for the latter);
- ``randint`` / ``lograndint`` -> an int ``range`` over ``[lower, upper - 1]``;
- quantized domains -> an int ``range`` over the indices of the multiples of ``q`` (so
  values stay exact and both ends are reached); with a log scale, a log ``range`` over
  the bounds, snapped to the step when decoded;
- ``choice`` -> an unordered ``choice`` of the categories themselves when they are
  distinct values of one type Ax takes (str, int, float, bool), else of their indices
  (so any category object comes back); a single category -> a ``fixed`` parameter.

``randn`` has no bounds, which Ax needs, and is refused with the key named, as are
``grid_search`` and ``sample_from``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.search._flat_space import (
    FlatSpace,
    Param,
    category_index,
    check_bounded,
    check_plain_choice,
    flatten_space,
)

_NAME = "AxSearch"
_AX_TYPES = (str, int, float, bool)


def import_ax() -> Any:
    """The ``ax`` module, or an ImportError naming ``pip install "fasttune[ax]"``."""
    return import_optional("ax", extra="ax", feature=_NAME)


@dataclass(frozen=True)
class AxParameter:
    """One Ax parameter: its definition and how its values map to the domain's."""

    param: Param
    definition: dict[str, Any]
    by_index: bool = False  # a choice of category indices
    step: float | None = None  # an index over the multiples of this step

    def decode(self, value: Any) -> Any:
        """The config value for Ax's ``value``."""
        param = self.param
        if param.kind == "choice":
            categories = param.domain.categories  # type: ignore[attr-defined]
            return categories[int(value)] if self.by_index else value
        if self.step is not None:
            return param.from_step_index(value, self.step)
        return param.decode(value)

    def encode(self, value: Any) -> Any:
        """Ax's value for a config value already checked against the domain."""
        param = self.param
        if param.kind == "choice":
            categories = param.domain.categories  # type: ignore[attr-defined]
            return category_index(categories, value) if self.by_index else value
        if self.step is not None:
            return param.step_index(value, self.step)
        return float(value) if param.kind == "float" else int(value)


def to_parameters(spec: Any) -> tuple[list[AxParameter], FlatSpace]:
    """The Ax parameters searching the domains of ``spec`` (constants are left out).

    Raises:
        ValueError: For domains Ax cannot search, naming the key.

    Example:
        >>> from fasttune.search.sample import loguniform
        >>> [p.definition for p in to_parameters({"lr": loguniform(1e-4, 1e-1)})[0]]
        [{'name': 'lr', 'type': 'range', 'bounds': [0.0001, 0.1], 'value_type': 'float', \
'log_scale': True}]
    """
    flat = flatten_space(spec, _NAME)
    return [_parameter(param) for param in flat.params], flat


def _parameter(param: Param) -> AxParameter:
    name = param.name
    if param.kind == "choice":
        check_plain_choice(param, _NAME)
        categories = list(param.domain.categories)  # type: ignore[attr-defined]
        direct = _direct_values(categories)
        values = categories if direct else list(range(len(categories)))
        if len(values) == 1:
            return AxParameter(
                param, {"name": name, "type": "fixed", "value": values[0]}, not direct
            )
        definition = {
            "name": name,
            "type": "choice",
            "values": values,
            "is_ordered": False,
        }
        return AxParameter(param, definition, by_index=not direct)
    check_bounded(param, _NAME, "Ax")
    if param.q is not None and not param.log:
        count = param.step_index(param.high, param.q)
        definition = _range(name, [0, count], "int", log=False)
        return AxParameter(param, definition, step=param.q)
    if param.kind == "int":
        bounds: list[Any] = [int(param.low), int(param.high)]
        return AxParameter(param, _range(name, bounds, "int", log=param.log))
    return AxParameter(
        param, _range(name, [float(param.low), float(param.high)], "float", param.log)
    )


def _range(name: str, bounds: list[Any], value_type: str, log: bool) -> dict[str, Any]:
    return {
        "name": name,
        "type": "range",
        "bounds": bounds,
        "value_type": value_type,
        "log_scale": log,
    }


def _direct_values(categories: list[Any]) -> bool:
    """Whether Ax can hold the categories themselves (distinct values of one plain type)."""
    kinds = {type(c) for c in categories}
    if len(kinds) != 1 or next(iter(kinds)) not in _AX_TYPES:
        return False
    if any(isinstance(c, float) and math.isnan(c) for c in categories):
        return False
    return len(set(categories)) == len(categories)
