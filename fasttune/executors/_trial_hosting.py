"""What a worker does around the trial it hosts, apart from the command loop
(:mod:`~fasttune.executors.worker_loop`): the trial's config and logger as its
Trainable sees them, its stop criteria, its checkpoint fetched from storage, its
exception made to travel, its environment variables."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any

import cloudpickle

from fasttune.logger.noop import NoopLogger
from fasttune.storage.mirror import StorageMirror
from fasttune.trainable.function_trainable import FunctionTrainable
from fasttune.trainable.trainable import Trainable
from fasttune.trainable.trial_info import STDERR_FILE, STDOUT_FILE, TRIAL_INFO

_RUNNER_KEYS = frozenset((TRIAL_INFO, STDOUT_FILE, STDERR_FILE))


def resets_quietly(trainable: Any) -> bool:
    """Whether ``trainable.reset`` runs none of the user's code (a function trainable:
    the function starts at the first ``train``)."""
    cls = type(trainable)
    return (
        isinstance(trainable, FunctionTrainable)
        and cls.reset is Trainable.reset
        and cls.reset_config is FunctionTrainable.reset_config
    )


def logger_creator(trial_dir: str) -> Callable[[dict[str, Any]], NoopLogger]:
    """Results are logged by the driver; the worker's Trainable only needs a logdir."""

    def create(config: dict[str, Any]) -> NoopLogger:
        return NoopLogger(config, trial_dir)

    return create


def user_config(config: dict[str, Any]) -> dict[str, Any]:
    """The trial's config as the user sees it (the runner's keys taken out)."""
    return {k: v for k, v in config.items() if k not in _RUNNER_KEYS}


def fetch_checkpoint(storage: StorageMirror, checkpoint_dir: str) -> None:
    """Download ``checkpoint_dir`` from storage unless this machine has it.

    Raises:
        FileNotFoundError: Neither this machine nor the storage has it.
    """
    if not storage.fetch_dir(checkpoint_dir):
        raise FileNotFoundError(
            f"The checkpoint to restore, {checkpoint_dir!r}, is neither on this machine nor "
            f"in storage ({storage.remote_path(checkpoint_dir)!r})."
        )


def pickle_exception(exc: BaseException) -> bytes | None:
    """The exception cloudpickled, or None when it does not survive a round trip."""
    try:
        blob = cloudpickle.dumps(exc, protocol=5)
        pickle.loads(blob)
    except Exception:
        return None
    return blob


def meets_criteria(result: dict[str, Any], criteria: dict[str, Any]) -> bool:
    """True if any ``result[key] >= threshold`` (``a/b`` looks into nested dicts)."""
    for key, threshold in criteria.items():
        value: Any = result
        for part in key.split("/"):
            if not isinstance(value, dict) or part not in value:
                value = None
                break
            value = value[part]
        if value is None or callable(threshold):
            continue
        try:
            if value >= threshold:
                return True
        except TypeError:
            continue
    return False


def set_env(name: str, value: str) -> None:
    """Set an environment variable unless it holds ``value`` already (a reused worker's
    next trial usually has the same: no ``putenv`` and no copy of the value)."""
    if os.environ.get(name) != value:
        os.environ[name] = value
