"""The bookkeeping metrics :meth:`Trainable.train` adds to every result."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune._support.process_info import hostname, node_ip, pid

if TYPE_CHECKING:
    from datetime import datetime

DATE_FORMAT = "%Y-%m-%d_%H-%M-%S"
_DEBUG_METRICS = frozenset(
    {R.TRIAL_ID, R.DATE, R.TIMESTAMP, R.PID, R.HOSTNAME, R.NODE_IP, R.CONFIG}
)


class DateCache:
    """The current time in whole seconds and as text, formatted at most once a second."""

    def __init__(self) -> None:
        self._cached: tuple[int, str] = (0, "")

    def now(self, now: datetime | None = None) -> tuple[int, str]:
        """``(seconds since the epoch, "%Y-%m-%d_%H-%M-%S")`` for ``now`` (default: now)."""
        if now is not None:
            return int(time.mktime(now.timetuple())), now.strftime(DATE_FORMAT)
        seconds = int(time.time())
        if self._cached[0] != seconds:
            self._cached = (seconds, time.strftime(DATE_FORMAT, time.localtime(seconds)))
        return self._cached


def fill_defaults(
    result: dict[str, Any],
    iteration: int,
    timesteps_total: int | float | None,
    episodes_total: int | None,
) -> None:
    """Add ``done``, the totals and ``training_iteration`` unless ``result`` has them."""
    result.setdefault(R.DONE, False)
    if timesteps_total is not None:
        result.setdefault(R.TIMESTEPS_TOTAL, timesteps_total)
    if episodes_total is not None:
        result.setdefault(R.EPISODES_TOTAL, episodes_total)
    result.setdefault(R.TRAINING_ITERATION, iteration)


def auto_filled_metrics(
    trial_id: str,
    config: dict[str, Any],
    seconds: int,
    date: str,
    timestamp: int | None,
    time_this_iter: float | None,
    time_total: float,
    time_since_restore: float,
    iterations_since_restore: int,
    timesteps_since_restore: int | float,
    *,
    debug_metrics_only: bool = False,
) -> dict[str, Any]:
    """The metrics of one result that describe the trial, host and timing.

    Args:
        seconds: Current time in seconds, the timestamp unless ``timestamp`` is set.
        date: Current time as text (see :class:`DateCache`).
        debug_metrics_only: Keep only the identity, date, host and config keys.
    """
    filled: dict[str, Any] = {
        R.TRIAL_ID: trial_id,
        R.DATE: date,
        R.TIMESTAMP: timestamp if timestamp else seconds,
        R.TIME_THIS_ITER_S: time_this_iter,
        R.TIME_TOTAL_S: time_total,
        R.PID: pid(),
        R.HOSTNAME: hostname(),
        R.NODE_IP: node_ip(),
        R.CONFIG: config,
        R.TIME_SINCE_RESTORE: time_since_restore,
        R.ITERATIONS_SINCE_RESTORE: iterations_since_restore,
    }
    if timesteps_since_restore:
        filled[R.TIMESTEPS_SINCE_RESTORE] = timesteps_since_restore
    if debug_metrics_only:
        filled = {k: v for k, v in filled.items() if k in _DEBUG_METRICS}
    return filled
