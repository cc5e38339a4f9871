"""fasttune search spaces as HEBO design spaces (``DesignSpace().parse([...])``).

Each searched key becomes one HEBO parameter named by its key path joined with ``/``:

- ``uniform`` -> ``num``; ``loguniform`` -> ``pow`` (searched on the log scale);
- ``randint`` -> ``int`` over ``[lower, upper - 1]``; ``lograndint`` -> ``pow_int``;
- quantized domains -> an ``int`` over the indices of the multiples of ``q`` (values
  stay exact and both ends are reached); with a log scale, ``pow`` over the bounds,
  snapped to the step when decoded;
- ``choice`` -> ``cat`` over the indices of the categories, so any category object
  comes back.

``randn`` has no bounds and is refused with the key named, as are ``grid_search`` and
``sample_from``.
"""

from __future__ import annotations

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

_NAME = "HEBOSearch"


def import_hebo() -> Any:
    """HEBO's ``HEBO`` optimizer module, or an ImportError naming the extra to install."""
    import_optional("hebo", extra="hebo", feature=_NAME)
    return import_optional("hebo.optimizers.hebo", extra="hebo", feature=_NAME)


def design_space_class() -> Any:
    """HEBO's ``DesignSpace`` class."""
    return import_optional(
        "hebo.design_space.design_space", extra="hebo", feature=_NAME
    ).DesignSpace


@dataclass(frozen=True)
class HeboParameter:
    """One HEBO parameter: its definition and how its values map to the domain's."""

    param: Param
    definition: dict[str, Any]
    step: float | None = None  # an index over the multiples of this step

    def decode(self, value: Any) -> Any:
        """The config value for HEBO's ``value``."""
        param, value = self.param, plain(value)
        if param.kind == "choice":
            return param.domain.categories[int(value)]  # type: ignore[attr-defined]
        if self.step is not None:
            return param.from_step_index(value, self.step)
        return param.decode(value)

    def encode(self, value: Any) -> Any:
        """HEBO's value for a config value already checked against the domain."""
        param = self.param
        if param.kind == "choice":
            return category_index(param.domain.categories, value)  # type: ignore[attr-defined]
        if self.step is not None:
            return param.step_index(value, self.step)
        return value


def to_parameters(spec: Any) -> tuple[list[HeboParameter], FlatSpace]:
    """The HEBO parameters searching the domains of ``spec`` (constants are left out).

    Raises:
        ValueError: For domains HEBO cannot search, naming the key.

    Example:
        >>> from fasttune.search.sample import qrandint
        >>> [p.definition for p in to_parameters({"n": qrandint(0, 20, 5)})[0]]
        [{'name': 'n', 'type': 'int', 'lb': 0, 'ub': 4}]
    """
    flat = flatten_space(spec, _NAME)
    return [_parameter(param) for param in flat.params], flat


def _parameter(param: Param) -> HeboParameter:
    name = param.name
    if param.kind == "choice":
        check_plain_choice(param, _NAME)
        count = len(param.domain.categories)  # type: ignore[attr-defined]
        return HeboParameter(param, {"name": name, "type": "cat", "categories": list(range(count))})
    check_bounded(param, _NAME, "HEBO")
    if param.q is not None and not param.log:
        count = param.step_index(param.high, param.q)
        return HeboParameter(param, {"name": name, "type": "int", "lb": 0, "ub": count}, param.q)
    if param.log:
        kind = "pow_int" if param.kind == "int" and param.q is None else "pow"
        definition = {"name": name, "type": kind, "lb": param.low, "ub": param.high, "base": 10}
        return HeboParameter(param, definition)
    kind = "int" if param.kind == "int" else "num"
    return HeboParameter(param, {"name": name, "type": kind, "lb": param.low, "ub": param.high})
