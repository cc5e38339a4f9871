"""``TimeoutStopper``: stop the experiment once a time budget is spent."""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from numbers import Real
from typing import Any

from fasttune.stopper.stopper import Stopper

logger = logging.getLogger(__name__)


class TimeoutStopper(Stopper):
    """Stop all trials once ``timeout`` has elapsed.

    The budget is counted from the first :meth:`stop_all` call (so start-up time is
    free), between consecutive calls. Pickling keeps the budget left, so a resumed
    experiment gets only the remaining time.

    Args:
        timeout: Seconds, or a ``datetime.timedelta``.
        clock: Clock in seconds (injected in tests); by default the wall clock,
            ``time.time()``, read at each call, as Ray's stopper reads it.

    Raises:
        TypeError: If ``timeout`` is neither a number nor a timedelta.
        ValueError: If ``timeout`` is negative.

    Example:
        >>> now = [0.0]
        >>> stopper = TimeoutStopper(10, clock=lambda: now[0])
        >>> stopper.stop_all()
        False
        >>> now[0] = 10.0
        >>> stopper.stop_all()
        True
    """

    def __init__(
        self,
        timeout: float | datetime.timedelta,
        *,
        clock: Callable[[], float] | None = None,
    ):
        if isinstance(timeout, datetime.timedelta):
            seconds = timeout.total_seconds()
        elif isinstance(timeout, Real) and not isinstance(timeout, bool):
            seconds = float(timeout)
        else:
            raise TypeError(
                "`timeout` must be a number of seconds or a datetime.timedelta, got "
                f"{type(timeout).__name__}: {timeout!r}."
            )
        if seconds < 0:
            raise ValueError(f"`timeout` must be >= 0 seconds, got {seconds}.")
        self._timeout_seconds = seconds
        self._budget = seconds
        self._last_check: float | None = None
        self._clock = clock

    @property
    def budget_left(self) -> float:
        """Seconds left (may be negative once spent)."""
        if self._last_check is None:
            return self._budget
        return self._budget - (self._now() - self._last_check)

    def _now(self) -> float:
        return time.time() if self._clock is None else self._clock()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        now = self._now()
        if self._last_check is not None:
            self._budget -= now - self._last_check
        self._last_check = now
        if self._budget <= 0:
            logger.info("Reached the timeout of %s s; stopping all trials.", self._timeout_seconds)
            return True
        return False

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_budget"] = self.budget_left
        state["_last_check"] = None  # counting resumes at the next stop_all()
        return state
