"""Search-space primitives, as in ``ray.tune.search.sample``.

The functions here (``uniform``, ``loguniform``, ``randint``, ``choice``, ...)
build :class:`Domain` objects for a ``param_space``; ``grid_search`` and
``sample_from`` mark grid axes and computed values. Sampled values are plain
Python ``float``/``int``. numpy is imported only when sampling, not on import.

Example:
    >>> from fasttune.search import sample
    >>> space = {"lr": sample.loguniform(1e-4, 1e-1), "layers": sample.randint(1, 4)}
    >>> 1 <= space["layers"].sample(random_state=0) < 4
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fasttune.search._checks import (
    check_base,
    check_bounds,
    check_int,
    check_log_bounds,
    check_positive,
    check_real,
)
from fasttune.search._domains import Categorical, Domain, Float, Integer, _as_categories
from fasttune.search._function import Function
from fasttune.search._rng import RandomState
from fasttune.search._samplers import (
    BaseSampler,
    Grid,
    LogUniform,
    Normal,
    Quantized,
    Sampler,
    Uniform,
)
from fasttune.search._spec_view import RecursiveDependencyError

__all__ = [
    "BaseSampler",
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Grid",
    "Integer",
    "LogUniform",
    "Normal",
    "Quantized",
    "RandomState",
    "RecursiveDependencyError",
    "Sampler",
    "Uniform",
    "choice",
    "grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "uniform",
]


def _float_range(where: str, lower: Any, upper: Any, *, log: bool = False) -> tuple[float, float]:
    lower = check_real(where, "lower", lower)
    upper = check_real(where, "upper", upper)
    (check_log_bounds if log else check_bounds)(where, lower, upper)
    return lower, upper


def _int_range(where: str, lower: Any, upper: Any, *, log: bool = False) -> tuple[int, int]:
    lower = check_int(where, "lower", lower)
    upper = check_int(where, "upper", upper)
    (check_log_bounds if log else check_bounds)(where, lower, upper)
    return lower, upper


def uniform(lower: float, upper: float) -> Float:
    """Sample a float uniformly from ``[lower, upper)``.

    Raises:
        ValueError: If ``lower >= upper``.

    Example:
        >>> 2.0 <= uniform(2, 3).sample(random_state=1) < 3.0
        True
    """
    return Float(*_float_range("uniform", lower, upper)).uniform()


def quniform(lower: float, upper: float, q: float) -> Float:
    """Sample a float uniformly, rounded to a multiple of ``q``; ``upper`` is reachable.

    Raises:
        ValueError: If ``lower >= upper``, ``q <= 0`` or a bound is not a multiple of ``q``.

    Example:
        >>> quniform(0, 1, 0.25).sample(random_state=0) in (0.0, 0.25, 0.5, 0.75, 1.0)
        True
    """
    lower, upper = _float_range("quniform", lower, upper)
    q = check_positive("quniform", "q", q)
    return Float(lower, upper).uniform().quantized(q)


def loguniform(lower: float, upper: float, base: float = 10) -> Float:
    """Sample a float log-uniformly from ``[lower, upper)``: each decade is equally likely.

    Args:
        lower: Lower bound, greater than 0 (e.g. 1e-4).
        upper: Upper bound (e.g. 1e-1).
        base: Accepted for compatibility; it does not change the distribution.

    Raises:
        ValueError: If ``lower <= 0`` or ``lower >= upper``.

    Example:
        >>> 1e-4 <= loguniform(1e-4, 1e-1).sample(random_state=0) < 1e-1
        True
    """
    check_base("loguniform", base)
    return Float(*_float_range("loguniform", lower, upper, log=True)).loguniform(base)


def qloguniform(lower: float, upper: float, q: float, base: float = 10) -> Float:
    """Sample a float log-uniformly, rounded to a multiple of ``q``; ``upper`` is reachable.

    Raises:
        ValueError: If ``lower <= 0``, ``lower >= upper``, ``q <= 0`` or a bound
            is not a multiple of ``q``.
    """
    check_base("qloguniform", base)
    lower, upper = _float_range("qloguniform", lower, upper, log=True)
    q = check_positive("qloguniform", "q", q)
    return Float(lower, upper).loguniform(base).quantized(q)


def randn(mean: float = 0.0, sd: float = 1.0) -> Float:
    """Sample a float from a normal distribution.

    Raises:
        ValueError: If ``sd <= 0``.

    Example:
        >>> isinstance(randn(10, 2).sample(random_state=0), float)
        True
    """
    mean = check_real("randn", "mean", mean)
    sd = check_positive("randn", "sd", sd)
    return Float(None, None).normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Float:
    """Sample a float from a normal distribution, rounded to a multiple of ``q``.

    Raises:
        ValueError: If ``sd <= 0`` or ``q <= 0``.
    """
    mean = check_real("qrandn", "mean", mean)
    sd = check_positive("qrandn", "sd", sd)
    q = check_positive("qrandn", "q", q)
    return Float(None, None).normal(mean, sd).quantized(q)


def randint(lower: int, upper: int) -> Integer:
    """Sample an int uniformly; ``lower`` is included and ``upper`` excluded.

    Raises:
        ValueError: If ``lower >= upper``.

    Example:
        >>> randint(0, 3).sample(random_state=0) in (0, 1, 2)
        True
    """
    return Integer(*_int_range("randint", lower, upper)).uniform()


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """Sample an int uniformly among the multiples of ``q``; both bounds are included.

    Raises:
        ValueError: If ``lower >= upper``, ``q <= 0`` or no multiple of ``q`` is in range.

    Example:
        >>> qrandint(0, 10, 5).sample(random_state=0) in (0, 5, 10)
        True
    """
    lower, upper = _int_range("qrandint", lower, upper)
    q = check_int("qrandint", "q", q)
    check_positive("qrandint", "q", q)
    return Integer(lower, upper).uniform().quantized(q)


def lograndint(lower: int, upper: int, base: float = 10) -> Integer:
    """Sample an int log-uniformly; ``lower`` (> 0) is included and ``upper`` excluded.

    Raises:
        ValueError: If ``lower <= 0`` or ``lower >= upper``.
    """
    check_base("lograndint", base)
    return Integer(*_int_range("lograndint", lower, upper, log=True)).loguniform(base)


def qlograndint(lower: int, upper: int, q: int, base: float = 10) -> Integer:
    """Sample an int log-uniformly, rounded to a multiple of ``q``; both bounds included.

    Raises:
        ValueError: If ``lower <= 0``, ``lower >= upper``, ``q <= 0`` or no multiple
            of ``q`` is in range.
    """
    check_base("qlograndint", base)
    lower, upper = _int_range("qlograndint", lower, upper, log=True)
    q = check_int("qlograndint", "q", q)
    check_positive("qlograndint", "q", q)
    return Integer(lower, upper).loguniform(base).quantized(q)


def choice(categories: Iterable[Any]) -> Categorical:
    """Sample one of ``categories`` uniformly at random.

    Raises:
        TypeError: If ``categories`` is not a list-like of values.
        ValueError: If ``categories`` is empty.

    Example:
        >>> choice(["adam", "sgd"]).sample(random_state=0) in ("adam", "sgd")
        True
    """
    return Categorical(categories).uniform()


def grid_search(values: Iterable[Any]) -> dict[str, Any]:
    """Mark a grid axis: every value gets its own variant (combined as a cartesian product).

    Returns ``{"grid_search": values}``, the plain-dict form Ray Tune uses, so
    specs stay JSON-friendly (``values`` copied into a list of Python values).

    Raises:
        TypeError: If ``values`` is not a list-like of values.
        ValueError: If ``values`` is empty.

    Example:
        >>> grid_search([1, 2])
        {'grid_search': [1, 2]}
    """
    return {"grid_search": _as_categories(values)}


def sample_from(func: Callable[..., Any]) -> Function:
    """Compute a value with ``func``, which may read other values of the config.

    ``func`` takes no argument or one: the config, readable as ``config["a"]``
    or, as in older Ray Tune code, ``spec.config.a``.

    Raises:
        TypeError: If ``func`` is not callable.

    Example:
        >>> from fasttune.search.variant_generator import generate_variants
        >>> space = {"a": 2, "b": sample_from(lambda spec: spec.config.a * 10)}
        >>> next(generate_variants(space))[1]
        {'a': 2, 'b': 20}
    """
    return Function(func)
