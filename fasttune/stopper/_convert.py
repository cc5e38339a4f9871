"""``make_stopper``: turn ``RunConfig.stop`` into a stopper and a per-trial criterion."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

from fasttune.stopper.function_stopper import FunctionStopper
from fasttune.stopper.stopper import Stopper


class StopCriteriaError(TypeError, ValueError):
    """``RunConfig.stop`` is none of the accepted kinds: a ``ValueError`` as Ray Tune
    raises it, and a ``TypeError`` as fasttune raised it before."""


def make_stopper(stop: Any) -> tuple[Stopper | None, dict[str, Any]]:
    """Split ``RunConfig.stop`` into ``(stopper, stopping_criterion)``.

    A dict is the per-trial criterion (stop once ``result[key] >= value``, checked by
    ``Trial.should_stop``); a :class:`Stopper` is used as is; a function
    ``(trial_id, result) -> bool`` becomes a :class:`FunctionStopper`.

    Raises:
        TypeError: For any other value, or a dict with non-string keys.
        ValueError: For an object with ``stop_all`` that is not a Stopper.

    Example:
        >>> make_stopper({"training_iteration": 10})
        (None, {'training_iteration': 10})
    """
    if stop is None:
        return None, {}
    if isinstance(stop, Mapping):
        bad = [key for key in stop if not isinstance(key, str)]
        if bad:
            raise TypeError(f"`RunConfig.stop` keys must be result keys (str), got {bad!r}.")
        for key, threshold in stop.items():
            if not (isinstance(threshold, numbers.Real) or callable(threshold)):
                raise TypeError(
                    f"RunConfig(stop={{{key!r}: {threshold!r}}}): the threshold for {key!r} "
                    f"must be a number (a trial stops once result[{key!r}] >= it), got "
                    f"{type(threshold).__name__}. Write e.g. stop={{{key!r}: 10}}."
                )
        return None, dict(stop)
    if isinstance(stop, type) and issubclass(stop, Stopper):
        raise TypeError(
            f"RunConfig(stop={stop.__name__}) is a class; pass an instance, e.g. "
            f"RunConfig(stop={stop.__name__}(...))."
        )
    if isinstance(stop, Stopper):
        return stop, {}
    if FunctionStopper.is_valid_function(stop):
        return FunctionStopper(stop), {}
    raise StopCriteriaError(
        "`RunConfig.stop` must be a dict {metric: threshold}, a Stopper, or a function "
        f"(trial_id, result) -> bool; got {type(stop).__name__}: {stop!r}."
    )
