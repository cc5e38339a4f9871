"""The result logger of a Trainable, and where it writes when no logger creator says."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from fasttune.trainable.trial_info import TrialInfo


def create_result_logger(
    config: dict[str, Any],
    logger_creator: Callable[[dict[str, Any]], Any] | None,
    trial_info: TrialInfo | None,
    name: str,
) -> tuple[Any, str]:
    """The result logger of a trainable and its log directory.

    Args:
        config: The trainable's config, passed to the logger.
        logger_creator: Callable ``config -> Logger`` whose ``logdir`` is used; None
            makes a ``UnifiedLogger`` in :func:`default_logdir`.
        trial_info: The trial the trainable runs for, if the runner started it.
        name: The trainable's class name, prefix of a new log directory.

    Returns:
        The logger and its log directory.
    """
    if logger_creator is not None:
        result_logger = logger_creator(config)
        return result_logger, result_logger.logdir
    from fasttune.logger import UnifiedLogger

    logdir = default_logdir(trial_info, name)
    return UnifiedLogger(config, logdir, loggers=None), logdir


def default_logdir(trial_info: TrialInfo | None, name: str) -> str:
    """The trial's directory, or a new ``<name>_<date>_*`` one under the default storage path.

    Args:
        trial_info: The trial the trainable runs for, if the runner started it.
        name: Prefix of a new directory (the trainable's class name).

    Returns:
        An existing directory.
    """
    if trial_info is not None and trial_info.trial_dir:
        os.makedirs(trial_info.trial_dir, exist_ok=True)
        return trial_info.trial_dir
    import tempfile  # here: a trial's Trainable (in a worker) has its directory

    from fasttune.storage.defaults import default_local_dir

    root = default_local_dir()
    os.makedirs(root, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    return tempfile.mkdtemp(prefix=f"{name}_{stamp}_", dir=root)


def reopen_logger(old: Any, config: dict[str, Any]) -> Any:
    """A logger of the same kind as ``old`` for a new config in the same logdir."""
    try:
        return type(old)(config, old.logdir)
    except TypeError:
        return old
