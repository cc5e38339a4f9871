"""Run configuration: ``RunConfig``, ``CheckpointConfig``, ``FailureConfig``, ``SyncConfig``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def _bad(param: str, value: Any, what: str) -> ValueError:
    return ValueError(f"{param}={value!r} is invalid: {what}")


@dataclass
class CheckpointConfig:
    """How many checkpoints to keep and when to take them.

    Args:
        num_to_keep: Keep at most this many checkpoints per trial (None keeps all).
            With a score attribute the best ones are kept, plus the latest one.
        checkpoint_score_attribute: Result key that ranks checkpoints.
        checkpoint_score_order: ``"max"`` or ``"min"``.
        checkpoint_frequency: Class trainables: save every N iterations (0 = never).
        checkpoint_at_end: Class trainables: save when the trial ends (default True
            for class trainables that implement ``save_checkpoint``).
    """

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool | None = None

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and (
            not isinstance(self.num_to_keep, int) or self.num_to_keep < 1
        ):
            raise _bad("CheckpointConfig.num_to_keep", self.num_to_keep, "use None or an int >= 1.")
        if self.checkpoint_score_order not in ("max", "min"):
            raise _bad(
                "CheckpointConfig.checkpoint_score_order",
                self.checkpoint_score_order,
                "use 'max' or 'min'.",
            )
        if not isinstance(self.checkpoint_frequency, int) or self.checkpoint_frequency < 0:
            raise _bad(
                "CheckpointConfig.checkpoint_frequency",
                self.checkpoint_frequency,
                "use an int >= 0 (0 disables periodic checkpoints).",
            )


@dataclass
class FailureConfig:
    """What to do when a trial fails.

    Args:
        max_failures: Retry a failed trial up to this many times from its latest
            checkpoint; -1 retries forever, 0 never.
        fail_fast: Stop the whole experiment at the first error; ``"raise"`` re-raises
            the trial's exception from ``fit()``.
    """

    max_failures: int = 0
    fail_fast: bool | str = False

    def __post_init__(self) -> None:
        if not isinstance(self.max_failures, int) or self.max_failures < -1:
            raise _bad(
                "FailureConfig.max_failures", self.max_failures, "use -1 (forever), 0 or more."
            )
        if self.fail_fast not in (True, False, "raise"):
            raise _bad("FailureConfig.fail_fast", self.fail_fast, "use True, False or 'raise'.")
        if self.fail_fast and self.max_failures != 0:
            raise _bad(
                "FailureConfig.max_failures",
                self.max_failures,
                "fail_fast stops at the first error, so it cannot be combined with retries; "
                "set max_failures=0 or fail_fast=False.",
            )


@dataclass
class SyncConfig:
    """How a remote experiment reaches its storage (as Ray's; only ``sync_artifacts``
    has an effect).

    With remote storage, workers upload each checkpoint as they make it, and the driver
    syncs the rest with each new checkpoint (as often as a tenth of its time allows), at
    every experiment snapshot (every 10 s, or ``TUNE_GLOBAL_CHECKPOINT_S``) and at the
    end: the result files and whatever else a trial wrote at the top of its directory,
    and with ``sync_artifacts=True`` its subdirectories too (its checkpoints aside).
    """

    sync_period: int = 300
    sync_timeout: int = 1800
    sync_artifacts: bool = False
    sync_artifacts_on_checkpoint: bool = True


@dataclass
class RunConfig:
    """Where results go, when trials stop, and what observes the run.

    Args:
        name: Experiment directory name (default: ``<trainable>_<timestamp>``).
        storage_path: Root directory or URL (``s3://bucket/prefix``, ``gs://...``, any
            fsspec URL); with ``storage_filesystem``, the path inside it. Default:
            ``$FASTTUNE_STORAGE_PATH`` or ``~/fasttune_results``. The experiment is
            ``<storage_path>/<name>``; a remote one is written through a local staging
            directory (``$FASTTUNE_STAGING_DIR``), see the README.
        storage_filesystem: A filesystem to store the experiment on, as Ray takes it: an
            fsspec filesystem (e.g. ``s3fs.S3FileSystem(endpoint_url=...)``) or a
            ``pyarrow.fs.FileSystem``.
        stop: A dict ``{metric: threshold}`` (stop once ``result[metric] >= threshold``),
            a callable ``(trial_id, result) -> bool``, or a ``Stopper``.
        callbacks: ``Callback`` objects notified of the run's events.
        verbose: 0 silent, 1 experiment status, 2 and 3 more detail.
        log_to_file: True to capture each trial's stdout/stderr in its directory, a
            file name for both, or a ``(stdout, stderr)`` pair of names.
    """

    name: str | None = None
    storage_path: str | os.PathLike[str] | None = None
    storage_filesystem: Any = None
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None
    sync_config: SyncConfig | None = None
    verbose: int | None = None
    stop: Mapping[str, Any] | Callable[[str, dict[str, Any]], bool] | Any | None = None
    callbacks: list[Any] | None = None
    progress_reporter: Any = None
    log_to_file: bool | str | tuple[str, str] = False
    local_dir: str | None = None
    _extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.failure_config = self.failure_config or FailureConfig()
        self.checkpoint_config = self.checkpoint_config or CheckpointConfig()
        self.sync_config = self.sync_config or SyncConfig()
        if self.verbose is None:
            self.verbose = 1
        elif isinstance(self.verbose, bool):  # Ray takes bools as ints (verbose=False: 0)
            self.verbose = int(self.verbose)
        if self.verbose not in (0, 1, 2, 3):
            raise _bad("RunConfig.verbose", self.verbose, "use 0, 1, 2 or 3.")
        if self.storage_path is not None:
            self.storage_path = os.fspath(self.storage_path)
        if self.local_dir is not None and self.storage_path is None:
            self.storage_path = self.local_dir
        if self.callbacks is not None and not isinstance(self.callbacks, (list, tuple)):
            raise TypeError(
                "RunConfig.callbacks must be a list of Callback objects, got "
                f"{type(self.callbacks).__name__}"
            )
        if self.name is not None and (not self.name or os.sep in self.name):
            raise _bad("RunConfig.name", self.name, "use a non-empty name without path separators.")
        log = self.log_to_file
        if not (
            isinstance(log, (bool, str))
            or (
                isinstance(log, (tuple, list))
                and len(log) == 2
                and all(isinstance(x, str) for x in log)
            )
        ):
            raise _bad(
                "RunConfig.log_to_file", log, "use a bool, a file name, or (stdout, stderr)."
            )
