"""``Stopper``, the base of experiment stoppers, and ``CombinedStopper`` (logical OR)."""

from __future__ import annotations

from typing import Any


class Stopper:
    """Decides when trials, or the whole experiment, stop.

    The controller calls the stopper with each result and asks :meth:`stop_all`
    once per step. Subclasses implement ``__call__`` (and :meth:`stop_all` when they
    end the whole experiment).

    Example:
        >>> class LossBelow(Stopper):
        ...     def __call__(self, trial_id, result):
        ...         return result["loss"] < 0.1
        >>> LossBelow()("t1", {"loss": 0.05}), LossBelow().stop_all()
        (True, False)
    """

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        """Return True if trial ``trial_id`` should stop after ``result``."""
        raise NotImplementedError(f"{type(self).__name__} must implement __call__().")

    def stop_all(self) -> bool:
        """Return True if the whole experiment should stop (default: never)."""
        return False


class CombinedStopper(Stopper):
    """Stop when any of several stoppers says so.

    Every stopper sees every result (no short-circuit), so counting stoppers stay
    correct whatever their order.

    Args:
        *stoppers: The stoppers to combine.

    Raises:
        TypeError: If an argument is not a :class:`Stopper`.

    Example:
        >>> from fasttune.stopper import MaximumIterationStopper, NoopStopper
        >>> stopper = CombinedStopper(NoopStopper(), MaximumIterationStopper(max_iter=1))
        >>> stopper("t1", {})
        True
    """

    def __init__(self, *stoppers: Stopper):
        for index, stopper in enumerate(stoppers):
            if not isinstance(stopper, Stopper):
                raise TypeError(
                    f"CombinedStopper: argument {index} must be a Stopper, got "
                    f"{type(stopper).__name__}: {stopper!r}. Wrap plain functions in "
                    "FunctionStopper."
                )
        self._stoppers = tuple(stoppers)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        decisions = [stopper(trial_id, result) for stopper in self._stoppers]
        return any(decisions)

    def stop_all(self) -> bool:
        decisions = [stopper.stop_all() for stopper in self._stoppers]
        return any(decisions)
