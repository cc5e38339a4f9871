"""Trial failures: the policy (retry, error, stop everything) and the error files.

Pure decisions and file writes: the controller asks :func:`failure_action` what to do
with a failed trial and carries it out through the trial lifecycle.
"""

from __future__ import annotations

import enum
import logging
import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fasttune.result import EXPR_ERROR_FILE, EXPR_ERROR_PICKLE_FILE
from fasttune.storage.filesystem import atomic_write_bytes

if TYPE_CHECKING:
    from fasttune.executors.base import TrialFailed
    from fasttune.experiment.trial import Trial

logger = logging.getLogger(__name__)


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


def failure_action(trial: Any, fail_fast: bool | str) -> FailureAction:
    """Apply ``FailureConfig`` to a trial whose ``num_failures`` was just counted.

    A trial that failed while being paused, or while being stopped before its last
    save was made, is retried as a failure at any other moment would be.
    """
    if fail_fast == "raise":
        return FailureAction.RAISE
    if fail_fast:
        return FailureAction.STOP_EXPERIMENT
    if trial.should_recover():
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
    from fasttune.error import TuneError

    return TuneError(error_text)


RESTORE_RETRY_ENV = "TUNE_RESTORE_RETRY_NUM"
"""Restores of a checkpoint a trial may retry before it starts from scratch (Ray's name)."""


def record_failure(trial: Trial, event: TrialFailed) -> None:
    """Count the failure on ``trial`` and append it to the trial's ``error.txt``.

    A failed restore of a checkpoint is not counted against ``max_failures`` while the
    trial has restore retries left (``TUNE_RESTORE_RETRY_NUM``, default 0, as Ray); once
    they are used up it counts, and the trial's next run starts from scratch.
    """
    if event.during == "restore":
        if trial.num_restore_failures < _restore_retries():
            trial.num_restore_failures += 1
        else:
            trial.num_failures += 1
            trial.restore_from_scratch = True
    else:
        trial.num_failures += 1
    trial.error_msg = short_error(event.error)
    trial.error_file = write_error_files(
        trial.init_local_path(), trial.num_failures, event.error, event.exception
    )


def prepare_retry(trial: Trial) -> None:
    """Point a failed trial at its latest checkpoint (or none: from scratch) to run again."""
    latest = trial.checkpoint_manager.latest_checkpoint
    if trial.restore_from_scratch:  # its checkpoint could not be restored
        trial.restore_from_scratch = False
        trial.num_restore_failures = 0
        latest = None
    trial.restore_path = latest.path if latest is not None else None
    logger.warning(
        "Trial %s failed (%s); retrying %s (failure %d of %s allowed).",
        trial,
        trial.error_msg,
        "from its latest checkpoint" if latest else "from scratch",
        trial.num_failures,
        "unlimited" if trial.max_failures < 0 else trial.max_failures,
    )


def _restore_retries() -> int:
    value = os.environ.get(RESTORE_RETRY_ENV, "0")
    try:
        retries = int(value)
    except ValueError:
        raise ValueError(
            f"{RESTORE_RETRY_ENV}={value!r} is not a whole number: set it to how many times "
            "a trial may retry restoring its checkpoint before it starts from scratch (e.g. 2)."
        ) from None
    return max(retries, 0)
