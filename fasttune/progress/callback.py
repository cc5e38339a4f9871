"""``ProgressCallback``: the callback that drives a progress reporter during a run.

The controller adds the callback made by :func:`create_progress_callback` last in
its :class:`~fasttune.callback.CallbackList`; it reports the status after loop
steps (as often as the reporter allows) and at the end, and prints per-trial
lines at higher verbosity.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from fasttune.callback import Callback
from fasttune.logger.logger import pretty_print
from fasttune.progress._format import format_cell
from fasttune.progress.cli import CLIReporter
from fasttune.progress.jupyter import JupyterNotebookReporter, in_notebook
from fasttune.progress.reporter import ProgressReporter
from fasttune.result import AUTO_RESULT_KEYS, CHECKPOINT_DIR_NAME, TRAINING_ITERATION

logger = logging.getLogger(__name__)

RESULT_PRINT_INTERVAL = 5.0
"""At ``verbose=3``, seconds between two printed results of the same trial."""

_NOT_PRINTED = frozenset(
    (*AUTO_RESULT_KEYS, "config", "hist_stats", "experiment_tag", CHECKPOINT_DIR_NAME)
)


def _check_verbose(verbose: Any) -> int:
    if verbose not in (0, 1, 2, 3) or isinstance(verbose, bool):
        raise ValueError(f"verbose={verbose!r} is invalid: use 0, 1, 2 or 3.")
    return int(verbose)


def detect_reporter(
    verbose: int,
    progress_reporter: ProgressReporter | None = None,
    metric: str | None = None,
    mode: str | None = None,
) -> ProgressReporter | None:
    """The reporter a run uses: None at ``verbose=0``, else the user's or a default one.

    The default is a :class:`JupyterNotebookReporter` in a notebook (overwriting its
    output below ``verbose=2``) and a :class:`CLIReporter` elsewhere. The run's
    ``metric`` and ``mode`` are given to the reporter.

    Raises:
        TypeError: ``progress_reporter`` lacks ``should_report``/``report``.
        ValueError: A bad ``verbose``, or the reporter has a different metric or mode.
    """
    if _check_verbose(verbose) == 0:
        return None
    if progress_reporter is None:
        if in_notebook():
            return JupyterNotebookReporter(overwrite=verbose < 2, metric=metric, mode=mode)
        return CLIReporter(metric=metric, mode=mode)
    if not all(callable(getattr(progress_reporter, m, None)) for m in ("should_report", "report")):
        raise TypeError(
            f"progress_reporter={progress_reporter!r} is not a ProgressReporter: it needs "
            "should_report(trials, done) and report(trials, done, *sys_info) methods."
        )
    set_properties = getattr(progress_reporter, "set_search_properties", None)
    if callable(set_properties) and not set_properties(metric, mode):
        raise ValueError(
            f"progress_reporter={progress_reporter!r} refused metric={metric!r}, mode={mode!r}."
        )
    return progress_reporter


class ProgressCallback(Callback):
    """Runs a :class:`ProgressReporter` from the experiment's callback hooks.

    ``setup`` starts the reporter's clock and tells it the number of trials;
    ``on_step_end`` reports when the reporter says so; ``on_experiment_end`` makes
    the final report. From ``verbose=2`` a line is printed when a trial completes
    or fails; at ``verbose=3`` results are printed too (at most one per trial every
    :data:`RESULT_PRINT_INTERVAL` seconds, and always the last).

    Args:
        reporter: The reporter to run.
        verbose: 1, 2 or 3 (0 reports nothing; prefer no callback then).
        metric: The run's metric, passed to ``reporter.setup``.
        mode: The run's mode, passed to ``reporter.setup``.
        sys_info: Returns lines about the system (resources in use...), called only
            when a report is made.
        clock: Returns the time in seconds since the epoch; defaults to ``time.time``.
        out: Where per-trial lines go when the reporter cannot print them; defaults
            to ``sys.stdout``.
    """

    def __init__(
        self,
        reporter: ProgressReporter,
        verbose: int = 1,
        *,
        metric: str | None = None,
        mode: str | None = None,
        sys_info: Callable[[], Iterable[str]] | None = None,
        clock: Callable[[], float] | None = None,
        out: TextIO | None = None,
    ):
        import time

        self.reporter = reporter
        self.verbose = _check_verbose(verbose)
        self._metric = metric
        self._mode = mode
        self._sys_info = sys_info
        self._clock = clock or time.time
        self._out = out
        self._last_print: dict[str, float] = {}
        if self.verbose >= 3:
            # Only then does the hottest hook reach this callback (see CallbackList).
            self.on_trial_result = self._print_result  # type: ignore[method-assign]

    def _info(self) -> tuple[str, ...]:
        return tuple(self._sys_info()) if self._sys_info is not None else ()

    def _print(self, line: str) -> None:
        print_line = getattr(self.reporter, "print_line", None)
        if callable(print_line):
            print_line(line)
        else:
            out = self._out if self._out is not None else sys.stdout
            out.write(line + "\n")
            out.flush()

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        if self.verbose:
            self.reporter.setup(
                start_time=self._clock(),
                total_samples=total_num_samples,
                metric=self._metric,
                mode=self._mode,
            )

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if self.verbose and self.reporter.should_report(trials, done=False):
            self.reporter.report(trials, False, *self._info())

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        if self.verbose and self.reporter.should_report(trials, done=True):
            self.reporter.report(trials, True, *self._info())

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if self.verbose >= 2:
            self._print(f"Trial {trial} completed. Last result: {_result_str(trial.last_result)}")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if self.verbose >= 2:
            iterations = (trial.last_result or {}).get(TRAINING_ITERATION, 0)
            self._print(
                f"Trial {trial} errored after {iterations} iterations with parameters="
                f"{trial.config}. Error file: {trial.error_file}"
            )

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if self.verbose >= 2:
            self._print(
                f"Trial {trial} failed ({trial.num_failures} failures so far) and will be "
                f"retried. Error file: {trial.error_file}"
            )

    def _print_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        now = self._clock()
        last = self._last_print.get(trial.trial_id)
        if result.get("done") or last is None or now - last >= RESULT_PRINT_INTERVAL:
            self._last_print[trial.trial_id] = now
            body = pretty_print(result).rstrip("\n").replace("\n", "\n  ")
            self._print(f"Result for {trial}:\n  {body}")


def _result_str(result: dict[str, Any] | None) -> str:
    """``key=value`` pairs of the user's metrics (bookkeeping keys and None left out, as
    Ray prints them)."""
    items = (result or {}).items()
    return ",".join(
        f"{k}={format_cell(v)}" for k, v in items if k not in _NOT_PRINTED and v is not None
    )


def create_progress_callback(
    verbose: int,
    progress_reporter: ProgressReporter | None = None,
    metric: str | None = None,
    mode: str | None = None,
    sys_info: Callable[[], Iterable[str]] | None = None,
) -> ProgressCallback | None:
    """The progress callback for a run, or None at ``verbose=0``.

    Example:
        >>> create_progress_callback(0) is None
        True
        >>> type(create_progress_callback(1).reporter).__name__
        'CLIReporter'
    """
    reporter = detect_reporter(verbose, progress_reporter, metric, mode)
    if reporter is None:
        return None
    return ProgressCallback(reporter, verbose, metric=metric, mode=mode, sys_info=sys_info)
