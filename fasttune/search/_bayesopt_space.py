"""Search spaces for BayesOptSearch: named, bounded float ranges, and how to search them.

bayes_opt searches a box of continuous parameters. Each fasttune float range
becomes one :class:`BoundedParam`, keyed by its path joined with ``/``
(``"model/lr"``). A log-uniform range is searched on the log scale, and a
quantized one is rounded to its step after each suggestion.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

from fasttune.search._domains import Domain, Float
from fasttune.search._samplers import (
    LogUniform,
    Quantized,
    Uniform,
    aligned_bounds,
    round_to_multiple,
)
from fasttune.search._spec_view import is_grid_dict, path_str
from fasttune.utils.util import flatten_dict

logger = logging.getLogger(__name__)

Path = tuple[Any, ...]


@dataclass(frozen=True)
class BoundedParam:
    """A float parameter in ``[lower, upper]``, searched linearly or on a log scale.

    Attributes:
        lower: Smallest value.
        upper: Largest value.
        log: Search ``log(value)`` (for log-uniform ranges).
        q: Round suggestions to multiples of ``q`` (None: no rounding).

    Example:
        >>> param = BoundedParam(1e-4, 1e-1, log=True)
        >>> round(param.to_value(param.to_internal(0.01)), 12)
        0.01
    """

    lower: float
    upper: float
    log: bool = False
    q: float | None = None

    def bounds(self) -> tuple[float, float]:
        """The range bayes_opt searches (log bounds for a log-scale parameter)."""
        if self.log:
            return math.log(self.lower), math.log(self.upper)
        return self.lower, self.upper

    def to_value(self, internal: float) -> float:
        """The config value for a point bayes_opt suggested."""
        low, high = self.bounds()
        if internal <= low or internal >= high:  # exactly on a bound: no exp/log noise
            value = self.lower if internal <= low else self.upper
        else:
            value = math.exp(internal) if self.log else float(internal)
        lower, upper = self.lower, self.upper
        if self.q is not None:
            lower, upper = aligned_bounds(lower, upper, self.q)
            value = float(round_to_multiple(value, self.q))
        return min(max(value, lower), upper)

    def to_internal(self, value: float) -> float:
        """The point bayes_opt sees for a config value."""
        value = float(value)
        return math.log(value) if self.log else value


def params_from_param_space(spec: Mapping[str, Any]) -> dict[str, BoundedParam]:
    """The searched parameters of a Tuner ``param_space``; constants are skipped.

    Raises:
        ValueError: For grid axes and domains other than bounded float ranges
            (integers, choices, normal, ``sample_from``), naming the key.

    Example:
        >>> from fasttune.search.sample import loguniform, uniform
        >>> params = params_from_param_space({"a": {"b": uniform(0, 1)}, "lr": loguniform(1e-3, 1)})
        >>> sorted(params), params["lr"].log
        (['a/b', 'lr'], True)
    """
    params: dict[str, BoundedParam] = {}
    _walk(spec, (), params, user_space=False)
    return params


def params_from_user_space(space: Mapping[str, Any]) -> dict[str, BoundedParam]:
    """The parameters of a space given to ``BayesOptSearch(space=...)``.

    Each value is a ``(lower, upper)`` pair, a fasttune float domain, or a dict of these.

    Raises:
        ValueError: For any other value, naming the key.

    Example:
        >>> params_from_user_space({"x": (0, 2)})
        {'x': BoundedParam(lower=0.0, upper=2.0, log=False, q=None)}
    """
    params: dict[str, BoundedParam] = {}
    _walk(space, (), params, user_space=True)
    return params


def _walk(value: Any, path: Path, params: dict[str, BoundedParam], user_space: bool) -> None:
    # A space of its own may use flattened keys ("b/z": (0, 1)), nested back on
    # suggestion as Ray does; in a param_space a '/' would not come back as given.
    if path and not user_space and any("/" in str(part) for part in path):
        raise ValueError(
            f"BayesOptSearch joins nested keys with '/', so the key {path[-1]!r} (at "
            f"`{path_str(path)}`) cannot contain '/'; rename it."
        )
    if is_grid_dict(value) or (isinstance(value, Domain) and value.is_grid()):
        raise ValueError(
            f"`{path_str(path)}` uses grid_search, which BayesOptSearch cannot search. Use "
            "tune.uniform(lower, upper) instead."
        )
    if isinstance(value, Domain):
        _add(params, path, _param_of(value, path))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, (*path, key), params, user_space)
    elif user_space and path:
        _add(params, path, _pair(value, path))
    elif isinstance(value, (list, tuple)) and _holds_domain(value):
        raise ValueError(
            f"`{path_str(path)}` is a list holding search domains; BayesOptSearch only "
            "searches floats in (nested) dicts. Use one key per value."
        )


def _add(params: dict[str, BoundedParam], path: Path, param: BoundedParam) -> None:
    name = path_str(path)
    if name in params:
        raise ValueError(
            f"BayesOptSearch(space=...): `{name}` is given twice (once as a nested key, once "
            "as a '/'-joined one); keep one."
        )
    params[name] = param


def _holds_domain(value: Any) -> bool:
    if isinstance(value, Domain) or is_grid_dict(value):
        return True
    if isinstance(value, Mapping):
        return any(_holds_domain(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_domain(item) for item in value)
    return False


def _param_of(domain: Domain, path: Path) -> BoundedParam:
    sampler = domain.get_sampler()
    q = None
    if isinstance(sampler, Quantized):
        q, sampler = sampler.q, sampler.get_sampler()
    if isinstance(domain, Float) and isinstance(sampler, (Uniform, LogUniform)):
        return BoundedParam(
            float(domain.lower), float(domain.upper), isinstance(sampler, LogUniform), q
        )
    if domain.is_function():
        what = "a sample_from(...) function"
    elif isinstance(domain, Float):
        what = f"a float domain with {sampler} sampling (unbounded)"
    else:
        what = f"a {type(domain).__name__} domain"
    raise ValueError(
        f"`{path_str(path)}` is {what}; BayesOptSearch only searches bounded float ranges "
        "(tune.uniform, tune.loguniform, tune.quniform, tune.qloguniform). Search a float "
        "and convert it in the trainable, or use HyperOptSearch or OptunaSearch for "
        "integers and choices."
    )


def _pair(value: Any, path: Path) -> BoundedParam:
    ok = (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, Real) and not isinstance(v, bool) for v in value)
    )
    if ok:
        lower, upper = float(value[0]), float(value[1])
        if math.isfinite(lower) and math.isfinite(upper) and lower < upper:
            return BoundedParam(lower, upper)
    raise ValueError(
        f"BayesOptSearch(space=...): `{path_str(path)}` must be a (lower, upper) pair of "
        f"finite numbers with lower < upper, or a tune.uniform domain; got {value!r}."
    )


def point_values(params: dict[str, BoundedParam], point: dict[str, Any], index: int) -> dict:
    """A ``points_to_evaluate`` entry as ``{"a/b": float}``; unsearched keys are dropped.

    Raises:
        ValueError: A searched key is missing or not a number (naming it).

    Example:
        >>> point_values({"a/b": BoundedParam(0, 1)}, {"a": {"b": 1}, "epochs": 3}, 0)
        {'a/b': 1.0}
    """
    flat = flatten_dict(point)
    missing = [key for key in params if key not in flat]
    if missing:
        raise ValueError(
            f"points_to_evaluate[{index}] has no value for {missing}; give every searched "
            f"key ({sorted(params)}). Point: {point!r}."
        )
    unknown = sorted(key for key in flat if key not in params)
    if unknown:  # e.g. constants of the param_space, which the Tuner sets itself
        logger.debug("points_to_evaluate[%d]: %s not searched; ignored.", index, unknown)
    values = {}
    for key in params:
        value = flat[key]
        if isinstance(value, bool) or not isinstance(value, Real):
            raise ValueError(
                f"points_to_evaluate[{index}]: `{key}` must be a number, got {value!r}."
            )
        values[key] = float(value)
    return values
