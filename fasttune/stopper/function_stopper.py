"""``FunctionStopper``: a plain ``(trial_id, result) -> bool`` function as a stopper."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fasttune.stopper.stopper import Stopper


class FunctionStopper(Stopper):
    """Stop a trial when ``function(trial_id, result)`` returns True.

    Args:
        function: Called with the trial id and each result.

    Raises:
        TypeError: If ``function`` is not callable or cannot take two positional
            arguments.
        ValueError: If it looks like a stopper (has ``stop_all``) without being one.

    Example:
        >>> stopper = FunctionStopper(lambda trial_id, result: result["acc"] > 0.9)
        >>> stopper("t1", {"acc": 0.95}), stopper.stop_all()
        (True, False)
    """

    def __init__(self, function: Callable[[str, dict[str, Any]], bool]):
        if not self.is_valid_function(function):
            raise TypeError(
                f"FunctionStopper: `function` must be a callable (trial_id, result) -> bool, "
                f"got {type(function).__name__}: {function!r}."
            )
        _check_arity(function)
        self._fn = function

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self._fn(trial_id, result))

    def stop_all(self) -> bool:
        return False

    @classmethod
    def is_valid_function(cls, fn: Any) -> bool:
        """Whether ``fn`` is a plain callable (not a :class:`Stopper`).

        Raises:
            ValueError: If ``fn`` has a ``stop_all`` method but is not a Stopper.
        """
        is_function = callable(fn) and not isinstance(fn, Stopper)
        if is_function and hasattr(fn, "stop_all"):
            raise ValueError(
                f"{type(fn).__name__} has stop_all() but does not subclass "
                "fasttune.stopper.Stopper, so its stop_all() would never be called. "
                "Subclass Stopper."
            )
        return is_function


def _check_arity(function: Callable[..., Any]) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some builtins have no signature: trust them
        return
    try:
        signature.bind("trial_id", {})
    except TypeError:
        name = getattr(function, "__qualname__", repr(function))
        raise TypeError(
            f"FunctionStopper: `function` must accept two arguments (trial_id, result); "
            f"{name}{signature} does not."
        ) from None
