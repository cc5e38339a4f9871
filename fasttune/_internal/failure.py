"""Trial failures: the policy (retry, error, stop everything) and the error files."""

from __future__ import annotations

import enum
import os
from datetime import datetime
from typing import Any

from fasttune.result import EXPR_ERROR_FILE, EXPR_ERROR_PICKLE_FILE
from fasttune.storage.filesystem import atomic_write_bytes


def write_error_files(
    trial_dir: str, failure_number: int, error_text: str, exception_blob: bytes | None
) -> str:
    """Append the failure to ``error.txt`` (and pickle the exception); return its path."""
    os.makedirs(trial_dir, exist_ok=True)
    path = os.path.join(trial_dir, EXPR_ERROR_FILE)
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"Failure # {failure_number} (occurred at {stamp})\n{error_text.rstrip()}\n\n")
    if exception_blob is not None:
        atomic_write_bytes(os.path.join(trial_dir, EXPR_ERROR_PICKLE_FILE), exception_blob)
    return path


def short_error(error_text: str) -> str:
    """The last non-empty line of a traceback (the exception and its message)."""
    lines = [line for line in error_text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"


class FailureAction(enum.Enum):
    """What happens to a trial after it failed."""

    RETRY = "retry"  # back to PENDING, from its latest checkpoint (or from scratch)
    ERROR = "error"  # the trial ends in ERROR; the experiment goes on
    STOP_EXPERIMENT = "stop_experiment"  # fail_fast: the trial errors and the run ends
    RAISE = "raise"  # fail_fast="raise": as STOP_EXPERIMENT, then fit() re-raises


def failure_action(trial: Any, fail_fast: bool | str, was_stopping: bool) -> FailureAction:
    """Apply ``FailureConfig`` to a trial whose ``num_failures`` was just counted.

    A trial that failed while being stopped is not retried.
    """
    if fail_fast == "raise":
        return FailureAction.RAISE
    if fail_fast:
        return FailureAction.STOP_EXPERIMENT
    if trial.should_recover() and not was_stopping:
        return FailureAction.RETRY
    return FailureAction.ERROR


def exception_of(exception_blob: bytes | None, error_text: str) -> BaseException:
    """The trial's exception, unpickled when possible, else a ``TuneError`` with the text."""
    if exception_blob is not None:
        import cloudpickle

        try:
            exc = cloudpickle.loads(exception_blob)
            if isinstance(exc, BaseException):
                return exc
        except Exception:
            pass
    from fasttune.errors import TuneError

    return TuneError(error_text)
