"""Argument checks that library-backed searchers share (nevergrad, BOHB).

Each message names the searcher and the parameter and shows the bad value.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any


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
