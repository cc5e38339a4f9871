"""Argument checks that library-backed searchers share (nevergrad, BOHB, ZOOpt, HEBO, Ax).

Each message names the searcher and the parameter and shows the bad value.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from fasttune._support.metric_mode import validate_metric_mode
from fasttune._support.numeric import is_int


def check_single_metric(metric: Any, searcher: str) -> None:
    """Reject a list of metrics: these searchers optimise one result key.

    Raises:
        ValueError: If ``metric`` is not None or a string.

    Example:
        >>> check_single_metric(["a", "b"], "MySearch")
        Traceback (most recent call last):
        ...
        ValueError: MySearch optimises a single metric (a result key), got ['a', 'b'].
    """
    if metric is not None and not isinstance(metric, str):
        raise ValueError(f"{searcher} optimises a single metric (a result key), got {metric!r}.")


def take_metric_mode(searcher: Any, metric: Any, mode: Any, name: str) -> bool:
    """Check the Tuner's metric and mode and give them to ``searcher``.

    A searcher built with its own space (``searcher._own_space``) keeps the metric and
    mode it was given and takes only those it lacks; any other takes the Tuner's over
    its own.

    Returns:
        Whether the searcher has its own space (then it ignores the Tuner's).

    Raises:
        ValueError: For a bad mode, or a list of metrics.
    """
    validate_metric_mode(metric, mode)
    check_single_metric(metric, name)
    if searcher._own_space:
        searcher._metric = searcher._metric or metric
        searcher._mode = searcher._mode or mode
        return True
    searcher._metric = metric or searcher._metric
    searcher._mode = mode or searcher._mode
    return False


def check_seed(value: Any, name: str, searcher: str) -> int | None:
    """A seed: an int in ``[0, 2**32)``, or None.

    Raises:
        ValueError: Otherwise.

    Example:
        >>> check_seed(-1, "seed", "MySearch")
        Traceback (most recent call last):
        ...
        ValueError: MySearch: `seed` must be an int in [0, 2**32) or None, got -1.
    """
    if value is None:
        return None
    if not is_int(value) or not 0 <= value < 2**32:
        raise ValueError(
            f"{searcher}: `{name}` must be an int in [0, 2**32) or None, got {value!r}."
        )
    return int(value)


def check_positive_int(value: Any, name: str, searcher: str) -> int:
    """An int >= 1 (a batch size, a parallelism).

    Raises:
        ValueError: Otherwise.
    """
    if not is_int(value) or value < 1:
        raise ValueError(f"{searcher}: `{name}` must be an int >= 1, got {value!r}.")
    return int(value)


def point_value(
    point: Mapping[str, Any], name: str, searcher: str, path: Sequence[Any] | None = None
) -> Any:
    """``point[name]``, or the nested value the ``/``-joined ``name`` (or ``path``) stands for.

    Raises:
        ValueError: If the point gives no value for ``name``.

    Example:
        >>> point_value({"net": {"width": 2}}, "net/width", "MySearch")
        2
    """
    if name in point:
        return point[name]
    value: Any = point
    for key in name.split("/") if path is None else path:
        if not isinstance(value, Mapping) or key not in value:
            raise ValueError(
                f"{searcher}: a point of `points_to_evaluate` gives no value for `{name}`; "
                f"give every searched key. Point: {dict(point)!r}."
            )
        value = value[key]
    return value


def check_options(options: Any, name: str, searcher: str) -> dict[str, Any]:
    """A copy of a dict of keyword arguments for a library (``{}`` for None).

    Raises:
        TypeError: If ``options`` is not a dict.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(
            f"{searcher}: `{name}` must be a dict of keyword arguments, got "
            f"{type(options).__name__}: {options!r}."
        )
    return dict(options)


def check_points(points: Any, searcher: str) -> list[dict[str, Any]]:
    """A deep copy of ``points_to_evaluate`` as a list of dicts (``[]`` for None).

    Raises:
        ValueError: If ``points`` is not a list of dicts (Ray Tune raises ValueError).

    Example:
        >>> check_points([{"x": 1}], "MySearch")
        [{'x': 1}]
    """
    if points is None:
        return []
    if not isinstance(points, Sequence) or isinstance(points, (str, bytes)):
        raise ValueError(
            f"{searcher}: `points_to_evaluate` must be a list of config dicts, got "
            f"{type(points).__name__}: {points!r}."
        )
    if not all(isinstance(point, Mapping) for point in points):
        raise ValueError(
            f"{searcher}: `points_to_evaluate` must hold config dicts, got {points!r}."
        )
    return [copy.deepcopy(dict(point)) for point in points]


def no_space_error(searcher: str) -> RuntimeError:
    """The error for a searcher given neither its own space nor domains in ``param_space``."""
    return RuntimeError(
        f"{searcher} has no search space: pass `space` to {searcher}(...) or put search "
        "domains (tune.uniform, tune.choice, ...) in the Tuner's `param_space`. A "
        "space of constants only cannot be searched; for that leave "
        "`TuneConfig.search_alg` unset."
    )


def no_space_yet_error(searcher: str) -> RuntimeError:
    """The error for ``suggest`` called before the searcher got a space."""
    return RuntimeError(
        f"{searcher} has no search space yet: pass `space` to {searcher}(...) or a "
        "`param_space` with search domains to the Tuner."
    )
