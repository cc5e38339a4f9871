"""Driver-side loggers: ``LoggerCallback`` and the JSON, CSV and TensorBoard callbacks.

Each file callback keeps one writer per running trial, opened at trial start in
the trial's directory and closed when the trial ends, so an experiment with many
trials holds only the files of the trials that are running. Writers append, so
a trial restored after a crash continues its files.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from fasttune.callback import Callback
from fasttune.logger._rewind import rewind_csv, rewind_event_files, rewind_json_lines
from fasttune.logger.csv import CSVResultWriter
from fasttune.logger.json import JsonResultWriter, write_params
from fasttune.logger.tensorboardx import (
    TBXResultWriter,
    _tensorboardx_installed,
    require_tensorboardx,
)
from fasttune.result import (
    EXPR_PARAM_FILE,
    EXPR_PARAM_PICKLE_FILE,
    EXPR_PROGRESS_FILE,
    EXPR_RESULT_FILE,
)
from fasttune.storage.filesystem import ensure_dir

if TYPE_CHECKING:
    from fasttune.experiment.trial import ResumePoint, Trial

logger = logging.getLogger(__name__)

DISABLE_AUTO_LOGGERS_ENV = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
"""Set to ``1`` to run without the default logger callbacks (as in Ray Tune)."""


class LoggerCallback(Callback):
    """A callback that logs trials: override the ``log_trial_*`` methods.

    The hooks are wired as in Ray Tune: ``on_trial_start`` -> :meth:`log_trial_start`,
    ``on_trial_restore`` -> :meth:`log_trial_restore`, ``on_trial_save`` ->
    :meth:`log_trial_save`, ``on_trial_result`` -> :meth:`log_trial_result`,
    ``on_trial_complete`` and ``on_trial_error`` -> :meth:`log_trial_end`.

    Example:
        >>> class Printer(LoggerCallback):
        ...     def log_trial_result(self, iteration, trial, result):
        ...         print(trial.trial_id, result["loss"])
        >>> from fasttune.experiment.trial import Trial
        >>> t = Trial("f", trial_id="abc_00000")
        >>> Printer().on_trial_result(iteration=1, trials=[t], trial=t, result={"loss": 1})
        abc_00000 1
    """

    _SAVED_FILE_TEMPLATES: tuple[str, ...] = ()

    def log_trial_start(self, trial: Trial) -> None:
        """Handle a trial starting (or starting again)."""

    def log_trial_restore(self, trial: Trial) -> None:
        """Handle a trial restored from a checkpoint."""

    def log_trial_save(self, trial: Trial) -> None:
        """Handle a trial having saved a checkpoint."""

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        """Handle one result of a trial."""

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        """Handle a trial ending; ``failed`` says whether it ended with an error."""

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self.log_trial_start(trial)

    def on_trial_restore(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self.log_trial_restore(trial)

    def on_trial_save(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self.log_trial_save(trial)

    def on_trial_result(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        result: dict[str, Any],
        **info: Any,
    ) -> None:
        self.log_trial_result(iteration, trial, result)

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self.log_trial_end(trial, failed=False)

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self.log_trial_end(trial, failed=True)


class _ResultWriter(Protocol):
    def write_result(self, result: dict[str, Any]) -> Any: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class _FlatResultWriter(_ResultWriter, Protocol):
    """A writer that also takes the controller's flattened result (``_takes_flat``)."""

    def write_result(
        self, result: dict[str, Any], flat: Mapping[str, Any] | None = None
    ) -> Any: ...


def _trial_dir(trial: Trial) -> str:
    path = trial.local_path or (trial.init_local_path() if trial.experiment_path else None)
    if not path:
        raise ValueError(
            f"Trial {trial} has no directory to log to (experiment_path="
            f"{trial.experiment_path!r}); the controller must set it before starting the trial."
        )
    ensure_dir(path)
    return path


class _TrialFileLoggerCallback(LoggerCallback):
    """Keeps one writer per trial id: opened at start, flushed on save, closed at end."""

    # Whether the writer accepts the controller's flattened result (``flat=``).
    _takes_flat = False
    # Whether the writer can keep lines in memory until flushed (see LineAppender).
    _can_buffer_lines = False

    def __init__(self) -> None:
        self._writers: dict[str, _ResultWriter] = {}
        self._buffer_lines = False

    def enable_write_buffering(self) -> None:
        """Keep result lines in memory until :meth:`flush_pending_writes`.

        The runner turns this on because it flushes before each change of the
        experiment state and at the end of each step (so the files never lag behind
        the state, nor a reader by more than a step); used alone, the callback hands
        every line to the operating system at once.
        """
        self._buffer_lines = self._can_buffer_lines

    def flush_pending_writes(self) -> None:
        """Hand buffered result lines to the operating system."""
        if self._buffer_lines:
            for writer in self._writers.values():
                writer.flush()

    # What each kind of file needs, without a Trial: the driver's callbacks and the
    # workers that write a trial's files themselves (trial_result_files.py) share it.
    @staticmethod
    def open_writer(logdir: str, config: dict[str, Any], buffered: bool) -> Any:
        """Open this callback's files in a trial directory; returns their writer."""
        raise NotImplementedError

    @staticmethod
    def rewind_files(trial_dir: str, point: ResumePoint) -> None:
        """Cut this callback's files back to ``point`` (the trial resumes from there)."""

    @staticmethod
    def last_words(writer: Any, params: dict[str, Any]) -> None:
        """Written before the writer closes, with the trial's params (TensorBoard's hparams)."""

    def _open(self, trial: Trial, logdir: str) -> _ResultWriter:
        return cast(_ResultWriter, self.open_writer(logdir, trial.config, self._buffer_lines))

    def _before_close(self, trial: Trial, writer: Any) -> None:
        self.last_words(writer, trial.evaluated_params or trial.config)

    def _rewind(self, trial_dir: str, point: ResumePoint) -> None:
        self.rewind_files(trial_dir, point)

    def _start(self, trial: Trial) -> _ResultWriter:
        self._close(trial)
        writer = self._writers[trial.trial_id] = self._open(trial, _trial_dir(trial))
        return writer

    def _resume(self, trial: Trial, point: ResumePoint) -> None:
        """Reopen the files of a trial that starts again, cut back to ``point``."""
        writer = self._writers.pop(trial.trial_id, None)
        if writer is not None:
            writer.close()  # no last words (hparams): the trial goes on
        self._rewind(_trial_dir(trial), point)
        self._start(trial)

    def _close(self, trial: Trial) -> None:
        writer = self._writers.pop(trial.trial_id, None)
        if writer is not None:
            try:
                self._before_close(trial, writer)
            finally:
                writer.close()

    @property
    def open_trials(self) -> list[str]:
        """Ids of the trials whose files are open."""
        return list(self._writers)

    def log_trial_start(self, trial: Trial) -> None:
        """Open the trial's files; a trial that ran before (``trial.resume_point``) has
        them cut back to where it starts again, then appended to."""
        point = getattr(trial, "resume_point", None)
        if point is not None:
            self._resume(trial, point)
        else:
            self._start(trial)

    def log_trial_restore(self, trial: Trial) -> None:
        """Reopen the trial's files cut back to the checkpoint it resumes from."""
        point = getattr(trial, "resume_point", None)
        if point is not None:
            self._resume(trial, point)
        elif trial.trial_id not in self._writers:
            self._start(trial)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        """Write ``result`` to the trial's file, opening it first if needed."""
        writer = self._writers.get(trial.trial_id)
        if writer is None:
            writer = self._start(trial)
        if result is trial.last_result and self._takes_flat:
            # The controller flattened this result already (config left out).
            cast(_FlatResultWriter, writer).write_result(result, flat=trial.last_flat_result)
        else:
            writer.write_result(result)

    def log_trial_save(self, trial: Trial) -> None:
        """Flush the trial's file, so that it matches the checkpoint."""
        writer = self._writers.get(trial.trial_id)
        if writer is not None:
            writer.flush()

    def on_checkpoint(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        checkpoint: Any,
        **info: Any,
    ) -> None:
        self.log_trial_save(trial)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        """Close the trial's file."""
        self._close(trial)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """Close the files of trials that did not end (the run was stopped)."""
        by_id = {t.trial_id: t for t in trials}
        for trial_id in list(self._writers):
            trial = by_id.get(trial_id)
            if trial is not None:
                self._close(trial)
            else:
                self._writers.pop(trial_id).close()


class JsonLoggerCallback(_TrialFileLoggerCallback):
    """Writes ``params.json``/``params.pkl`` at trial start and ``result.json`` lines.

    Example:
        >>> import tempfile
        >>> from fasttune.experiment.trial import Trial
        >>> t = Trial("f", config={"lr": 0.1}, experiment_path=tempfile.mkdtemp())
        >>> cb = JsonLoggerCallback()
        >>> cb.on_trial_start(iteration=0, trials=[t], trial=t)
        >>> cb.on_trial_result(iteration=1, trials=[t], trial=t, result={"loss": 1})
        >>> cb.on_trial_complete(iteration=2, trials=[t], trial=t)
        >>> open(os.path.join(t.local_path, "result.json")).read()
        '{"loss": 1}\\n'
    """

    _SAVED_FILE_TEMPLATES = (EXPR_RESULT_FILE, EXPR_PARAM_FILE, EXPR_PARAM_PICKLE_FILE)
    _can_buffer_lines = True

    @staticmethod
    def open_writer(logdir: str, config: dict[str, Any], buffered: bool) -> JsonResultWriter:
        write_params(logdir, config)
        return JsonResultWriter(logdir, buffered=buffered)

    @staticmethod
    def rewind_files(trial_dir: str, point: ResumePoint) -> None:
        rewind_json_lines(os.path.join(trial_dir, EXPR_RESULT_FILE), point.iteration)

    def update_config(self, trial: Trial, config: dict[str, Any]) -> None:
        """Rewrite the trial's ``params.json`` and ``params.pkl`` with ``config``."""
        write_params(_trial_dir(trial), config)


class CSVLoggerCallback(_TrialFileLoggerCallback):
    """Appends each result as a row of ``progress.csv`` (nested keys joined with ``/``).

    See :class:`~fasttune.logger.csv.CSVResultWriter` for how new keys are handled.
    """

    _SAVED_FILE_TEMPLATES = (EXPR_PROGRESS_FILE,)
    _takes_flat = True
    _can_buffer_lines = True

    @staticmethod
    def open_writer(logdir: str, config: dict[str, Any], buffered: bool) -> CSVResultWriter:
        return CSVResultWriter(logdir, buffered=buffered)

    @staticmethod
    def rewind_files(trial_dir: str, point: ResumePoint) -> None:
        rewind_csv(os.path.join(trial_dir, EXPR_PROGRESS_FILE), point.iteration)


class TBXLoggerCallback(_TrialFileLoggerCallback):
    """Writes TensorBoard event files; the hyperparameters are written at trial end.

    Needs tensorboardX (``pip install "fasttune[tensorboard]"``). Hyperparameters are
    the trial's ``evaluated_params`` (else its config), beside the last result's
    scalar metrics.

    Raises:
        MissingDependencyError: tensorboardX is not installed.
    """

    _SAVED_FILE_TEMPLATES = ("events.out.tfevents.*",)
    _takes_flat = True

    def __init__(self) -> None:
        # Checked without importing it: the events are encoded by fasttune, and
        # tensorboardX (which imports torch if installed) is imported only for images.
        require_tensorboardx("TBXLoggerCallback")
        super().__init__()

    @staticmethod
    def open_writer(logdir: str, config: dict[str, Any], buffered: bool) -> TBXResultWriter:
        return TBXResultWriter(logdir)  # events are flushed by time, not buffered lines

    @staticmethod
    def rewind_files(trial_dir: str, point: ResumePoint) -> None:
        rewind_event_files(trial_dir, point.step)

    @staticmethod
    def last_words(writer: Any, params: dict[str, Any]) -> None:
        if params:
            writer.write_hparams(params)


DEFAULT_CALLBACK_CLASSES: tuple[type[LoggerCallback], ...] = (
    CSVLoggerCallback,
    JsonLoggerCallback,
    TBXLoggerCallback,
)
"""The logger callbacks a run gets unless the user passed their own (as Ray Tune)."""


def needs_default_loggers(user_callbacks: Iterable[Any] | None) -> list[type[LoggerCallback]]:
    """The default logger classes to add next to ``user_callbacks``.

    A class is needed when no user callback is an instance of it;
    :class:`TBXLoggerCallback` only when tensorboardX is installed (found without
    importing it). None is needed when ``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1``.

    Returns:
        The classes, in the order of :data:`DEFAULT_CALLBACK_CLASSES` (an empty,
        falsy list when nothing is needed).
    """
    if os.environ.get(DISABLE_AUTO_LOGGERS_ENV, "0") == "1":
        return []
    given = list(user_callbacks or ())
    needed = []
    for cls in DEFAULT_CALLBACK_CLASSES:
        if any(isinstance(cb, cls) for cb in given):
            continue
        if cls is TBXLoggerCallback and not _tensorboardx_installed():
            logger.debug("tensorboardX is not installed: no TensorBoard files will be written.")
            continue
        needed.append(cls)
    return needed


def default_logger_callbacks(user_callbacks: Iterable[Any] | None = None) -> list[Callback]:
    """New instances of the default logger callbacks ``user_callbacks`` lack.

    Example:
        >>> [type(cb).__name__ for cb in default_logger_callbacks([JsonLoggerCallback()])][:1]
        ['CSVLoggerCallback']
    """
    callbacks: list[Callback] = []
    for cls in needs_default_loggers(user_callbacks):
        try:
            callbacks.append(cls())
        except ImportError as e:  # e.g. tensorboardX gone since it was found
            cause = f" ({e.__cause__!r})" if e.__cause__ is not None else ""
            logger.warning("Not logging with %s: %s%s", cls.__name__, e, cause)
    return callbacks
