"""``MaximumIterationStopper``: stop each trial after a number of results."""

from __future__ import annotations

from typing import Any

from fasttune._support.numeric import is_int
from fasttune.stopper.stopper import Stopper


class MaximumIterationStopper(Stopper):
    """Stop a trial once it has reported ``max_iter`` results.

    Results are counted per trial as this stopper sees them.

    Args:
        max_iter: Results after which the trial stops.

    Raises:
        TypeError: If ``max_iter`` is not an int.
        ValueError: If ``max_iter`` is negative.

    Example:
        >>> stopper = MaximumIterationStopper(max_iter=2)
        >>> [stopper("t1", {}) for _ in range(2)]
        [False, True]
    """

    def __init__(self, max_iter: int):
        if not is_int(max_iter):
            raise TypeError(f"`max_iter` must be an int, got {max_iter!r}.")
        if max_iter < 0:
            raise ValueError(f"`max_iter` must be >= 0, got {max_iter}.")
        self._max_iter = int(max_iter)
        self._iter: dict[str, int] = {}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._iter[trial_id] = count = self._iter.get(trial_id, 0) + 1
        return count >= self._max_iter

    def stop_all(self) -> bool:
        return False
