"""fasttune search spaces as nevergrad parametrizations.

Each searched key becomes one entry of an ``ng.p.Dict`` named by its key path joined
with ``/``:

- ``uniform`` -> ``ng.p.Scalar(lower, upper)``; ``loguniform`` -> ``ng.p.Log``;
- ``randn(mean, sd)`` -> an unbounded ``ng.p.Scalar`` starting at ``mean`` with
  mutation step ``sd``;
- ``randint(lower, upper)`` -> a scalar over ``[lower - 0.5, upper - 0.5]`` cast to
  int, so every allowed value gets the same share and ``upper`` stays excluded
  (``lograndint``: the same on a log scale);
- quantized domains -> the same over the first and last multiple of ``q``, widened
  by half a step; values are rounded to the step when decoded (nevergrad has no
  quantization of its own);
- ``choice`` -> ``ng.p.Choice``.

A native parametrization (``ng.p.Dict``, keyword-only ``ng.p.Instrumentation``, or an
array with a list of names) is checked and read by :func:`check_native`,
:func:`native_value` and :func:`native_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.search._flat_space import FlatSpace, Param, to_plain, unflatten
from fasttune.search._samplers import Normal
from fasttune.search._searcher_checks import point_value

# Half a step, a hair less: casting rounds, and a bound exactly halfway could round out.
_HALF = 0.5 - 1e-9


def import_nevergrad() -> Any:
    """The ``nevergrad`` module, or an ImportError naming ``pip install "fasttune[nevergrad]"``."""
    return import_optional("nevergrad", extra="nevergrad", feature="NevergradSearch")


def to_parametrization(space: FlatSpace) -> Any:
    """The ``ng.p.Dict`` searching ``space`` (one entry per parameter name).

    Example:
        >>> from fasttune.search._flat_space import flatten_space
        >>> from fasttune.search.sample import randint
        >>> param = to_parametrization(flatten_space({"n": randint(0, 10)}, "NevergradSearch"))
        >>> 0 <= param.spawn_child().value["n"] <= 9
        True
    """
    ng = import_nevergrad()
    return ng.p.Dict(**{param.name: _parameter(ng, param) for param in space.params})


def _parameter(ng: Any, param: Param) -> Any:
    if param.kind == "choice":
        return ng.p.Choice(list(param.domain.categories))  # type: ignore[attr-defined]
    if isinstance(param.sampler, Normal):
        sampler = param.sampler
        return ng.p.Scalar(init=float(sampler.mean)).set_mutation(sigma=float(sampler.sd))
    step = param.q if param.q is not None else (1 if param.kind == "int" else None)
    low, high = float(param.low), float(param.high)
    if step is not None:  # each allowed value owns the interval of half a step around it
        low, high = low - _HALF * step, high + _HALF * step
        if param.log:
            low = max(low, float(param.low) / 2)  # a log range must stay above 0
    scalar = ng.p.Log(lower=low, upper=high) if param.log else ng.p.Scalar(lower=low, upper=high)
    if param.kind == "int" and param.q is None:
        scalar = scalar.set_integer_casting()
    return scalar


def encode_value(param: Param, value: Any) -> Any:
    """A checked config value as the parametrization holds it (a float for numbers)."""
    return value if param.kind == "choice" else float(value)


# ---------------------------------------------------------------------- native spaces
def check_native(parametrization: Any, names: list[str] | None) -> None:
    """Check a parametrization given by the user: its values must name config keys.

    Args:
        parametrization: An ``ng.p.Dict``, a keyword-only ``ng.p.Instrumentation``,
            or (with ``names``) any parametrization over an array.
        names: One config key per dimension, for an array; None otherwise.

    Raises:
        ValueError: If the parametrization cannot give named values.
    """
    ng = import_nevergrad()
    if names is not None:
        if parametrization.dimension != len(names):
            raise ValueError(
                f"NevergradSearch: {len(names)} parameter names given, but the optimizer "
                f"searches {parametrization.dimension} dimensions; give one name per dimension."
            )
        return
    if isinstance(parametrization, ng.p.Instrumentation):
        if len(parametrization[0]):
            raise ValueError(
                "NevergradSearch: an ng.p.Instrumentation space must use keyword arguments "
                "only (they name the config keys), not positional ones."
            )
        return
    if not isinstance(parametrization, ng.p.Dict):
        raise ValueError(
            "NevergradSearch: a native space must be an ng.p.Dict or a keyword-only "
            "ng.p.Instrumentation (its names become config keys), got "
            f"{type(parametrization).__name__}. With an optimizer instance over an array, "
            "pass `space` as the list of parameter names."
        )


def native_value(parametrization: Any, names: list[str] | None, point: Mapping[str, Any]) -> Any:
    """A config as the value a native parametrization takes (``/`` names read nested keys).

    Raises:
        ValueError: If the point gives no value for a parameter.
    """
    ng = import_nevergrad()
    if names is not None:
        return [point_value(point, name, "NevergradSearch") for name in names]
    instrumented = isinstance(parametrization, ng.p.Instrumentation)
    keys = list((parametrization[1] if instrumented else parametrization).keys())  # not dicts
    value = {key: point_value(point, key, "NevergradSearch") for key in keys}
    return ((), value) if instrumented else value


def native_config(candidate: Any, names: list[str] | None) -> dict[str, Any]:
    """The config a candidate of a native parametrization stands for (plain Python values)."""
    ng = import_nevergrad()
    if names is not None:
        values = to_plain(candidate.args[0])
        return unflatten(dict(zip(names, values if isinstance(values, list) else [values])))
    if isinstance(candidate, ng.p.Instrumentation):
        return unflatten(candidate.kwargs)
    return unflatten(candidate.value)
