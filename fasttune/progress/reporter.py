"""``ProgressReporter`` and ``TuneReporterBase``, the shared logic of the default reporters."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

from fasttune.progress import _bar, _tables
from fasttune.progress._format import Format, get_format, is_number, time_passed_str
from fasttune.progress._settled import SettledTrials
from fasttune.result import AUTO_RESULT_KEYS, DEFAULT_METRIC

Columns = list[str] | dict[str, str]
_Init = TypeVar("_Init", bound=Callable[..., None])


class ProgressReporter:
    """Decides when to report an experiment's progress, and reports it.

    The run calls :meth:`should_report` after each step of its loop and, when it
    answers True (always when ``done``), :meth:`report`.
    """

    def setup(
        self,
        start_time: float | None = None,
        total_samples: int | None = None,
        metric: str | None = None,
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Called once when the run starts, with what is only known then.

        Args:
            start_time: When the run started (seconds since the epoch).
            total_samples: How many trials the run will create, if known.
            metric: The metric the run optimizes.
            mode: ``"min"`` or ``"max"``.
            **kwargs: Other keyword arguments, for forward compatibility.
        """

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        """Whether :meth:`report` should be called now."""
        raise NotImplementedError

    def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
        """Report the progress of ``trials``; ``sys_info`` are lines about the system."""
        raise NotImplementedError

    def set_search_properties(self, metric: str | None, mode: str | None) -> bool:
        """Take note of the run's metric and mode; True when accepted."""
        return True

    def set_total_samples(self, total_samples: int | None) -> None:
        """Take note of how many trials the run will create."""


def extends_init(base_init: Callable[..., None]) -> Callable[[_Init], _Init]:
    """Give a subclass ``__init__`` that forwards ``*args, **kwargs`` the full signature.

    The decorated ``__init__(self, [own parameters,] *args, [own keywords,] **kwargs)``
    passes ``args`` and ``kwargs`` to ``base_init``; ``inspect.signature`` (``help``,
    notebook tooltips) shows its own parameters and ``base_init``'s in the order a
    written-out signature would have: positional ones first, then keyword-only ones.
    """

    def decorate(init: _Init) -> _Init:
        own = inspect.signature(init).parameters.values()
        base = list(inspect.signature(base_init).parameters.values())[1:]  # without self
        positional, keyword = (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        )
        params = [
            *(p for p in own if p.kind is positional),
            *(p for p in base if p.kind is positional),
            *(p for p in own if p.kind is keyword),
            *(p for p in base if p.kind is keyword),
        ]
        init.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return init

    return decorate


def _check_positive(name: str, value: Any, allow_zero: bool = False) -> None:
    low = 0 if allow_zero else 1
    if not is_number(value) or value < low:
        raise ValueError(f"{name}={value!r} is invalid: use a number >= {low}.")


class TuneReporterBase(ProgressReporter):
    """The status report shared by :class:`CLIReporter` and :class:`JupyterNotebookReporter`.

    Without ``metric_columns``, the table shows the :attr:`DEFAULT_COLUMNS` that
    trials report, the run's metric, and up to ``infer_limit`` other numeric keys
    found in the results.

    Args:
        metric_columns: Result keys to show: a list, or a dict of key -> header.
        parameter_columns: Config keys to show (``/`` for nested keys): a list, or a
            dict of key -> header. Defaults to every key of ``evaluated_params``.
        total_samples: How many trials the run will create (set by the run).
        max_progress_rows: Trials shown in intermediate tables (all at the end).
        max_error_rows: Errored trials shown in intermediate error tables.
        max_column_length: Longer headers and values are shortened with ``...``.
        max_report_frequency: Report at most once per this many seconds.
        infer_limit: How many result keys to add to the default columns.
        print_intermediate_tables: Show the trial table in intermediate reports
            (default True); the last report always shows it.
        metric: The metric that ranks trials (for the best trial line).
        mode: ``"min"`` or ``"max"``.
        sort_by_metric: List terminated trials best first.
        clock: Returns the time in seconds since the epoch; defaults to ``time.time``.

    Raises:
        ValueError: A bad ``mode`` or a row count or frequency below its minimum.
    """

    DEFAULT_COLUMNS: Mapping[str, str] = {
        "mean_accuracy": "acc",
        "mean_loss": "loss",
        "training_iteration": "iter",
        "time_total_s": "total time (s)",
        "timesteps_total": "ts",
        "episode_reward_mean": "reward",
    }
    DEFAULT_REPORT_FREQUENCY = 5.0

    def __init__(
        self,
        metric_columns: Columns | None = None,
        parameter_columns: Columns | None = None,
        total_samples: int | None = None,
        max_progress_rows: int = 20,
        max_error_rows: int = 20,
        max_column_length: int = 20,
        max_report_frequency: float | None = None,
        infer_limit: int = 3,
        print_intermediate_tables: bool | None = None,
        metric: str | None = None,
        mode: str | None = None,
        sort_by_metric: bool = False,
        *,
        clock: Callable[[], float] | None = None,
    ):
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode={mode!r} is invalid: use 'min', 'max' or None.")
        _check_positive("max_progress_rows", max_progress_rows)
        _check_positive("max_error_rows", max_error_rows)
        _check_positive("max_column_length", max_column_length)
        _check_positive("infer_limit", infer_limit, allow_zero=True)
        if max_report_frequency is not None:
            _check_positive("max_report_frequency", max_report_frequency, allow_zero=True)
        self._metrics_override = metric_columns is not None
        self._metric_columns: Columns = (
            metric_columns if metric_columns is not None else dict(self.DEFAULT_COLUMNS)
        )
        self._parameter_columns: Columns = parameter_columns or []
        self._inferred: dict[str, str] = {}
        self._settled = SettledTrials()
        self._total_samples = total_samples
        self._max_progress_rows = max_progress_rows
        self._max_error_rows = max_error_rows
        self._max_column_length = max_column_length
        self._max_report_frequency = max_report_frequency
        self._infer_limit = infer_limit
        self._print_intermediate_tables = (
            True if print_intermediate_tables is None else print_intermediate_tables
        )
        self._metric = metric
        self._mode = mode
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC
        self._sort_by_metric = sort_by_metric
        self._clock = clock or time.time
        self._start_time = self._clock()
        self._last_report_time = -float("inf")

    # ------------------------------------------------------------------ run set-up
    def setup(
        self,
        start_time: float | None = None,
        total_samples: int | None = None,
        metric: str | None = None,
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.set_start_time(start_time)
        if total_samples is not None:
            self.set_total_samples(total_samples)
        self.set_search_properties(metric, mode)

    def set_search_properties(self, metric: str | None, mode: str | None) -> bool:
        """Use the run's ``metric`` and ``mode`` unless the reporter has its own.

        Raises:
            ValueError: The reporter was built with a different metric or mode.
        """
        if (metric and self._metric not in (None, DEFAULT_METRIC, metric)) or (
            mode and self._mode not in (None, mode)
        ):
            raise ValueError(
                f"The run's metric={metric!r}, mode={mode!r} differ from the reporter's "
                f"metric={self._metric!r}, mode={self._mode!r}. Pass them to the reporter "
                "or to the run, not both."
            )
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC
        return True

    def set_total_samples(self, total_samples: int | None) -> None:
        self._total_samples = total_samples

    def set_start_time(self, timestamp: float | None = None) -> None:
        """Count the running time from ``timestamp`` (default: now)."""
        self._start_time = self._clock() if timestamp is None else timestamp

    # ------------------------------------------------------------------ columns
    def add_metric_column(self, metric: str, representation: str | None = None) -> None:
        """Show ``metric`` in the table, under ``representation`` (default: its name).

        Raises:
            ValueError: The column exists, or a representation is given for a list.
        """
        self._metrics_override = True
        _add_column(self._metric_columns, metric, representation, "metric")

    def add_parameter_column(self, parameter: str, representation: str | None = None) -> None:
        """Show the config value ``parameter`` in the table (``/`` for nested keys).

        Raises:
            ValueError: The column exists, or a representation is given for a list.
        """
        _add_column(self._parameter_columns, parameter, representation, "parameter")

    # ------------------------------------------------------------------ reporting
    @property
    def max_report_frequency(self) -> float:
        """Seconds between two reports."""
        if self._max_report_frequency is None:
            return self.DEFAULT_REPORT_FREQUENCY
        return float(self._max_report_frequency)

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        """True when ``done`` or when the last report is older than the frequency."""
        now = self._clock()
        if done or now - self._last_report_time >= self.max_report_frequency:
            self._last_report_time = now
            return True
        return False

    def _base_columns(self) -> dict[str, str]:
        """The metric columns asked for, and the run's metric."""
        columns = dict(self._metric_columns)  # type: ignore[arg-type]
        if self._metric and self._metric != DEFAULT_METRIC:
            columns.setdefault(self._metric, self._metric)
        return columns

    def _columns(self, trials: Sequence[Any]) -> Columns:
        if self._metrics_override:
            return self._metric_columns
        columns = self._base_columns()
        for trial in trials:
            if len(self._inferred) >= self._infer_limit:
                break
            self._infer(trial.last_result or {}, columns)
        for key in self._inferred:
            columns.setdefault(key, key)
        return columns

    def _infer(self, result: Mapping[str, Any], columns: Columns) -> None:
        """Take the numeric keys of ``result`` as metric columns, up to the limit."""
        for key, value in result.items():
            if len(self._inferred) >= self._infer_limit:
                return
            if (
                key not in columns
                and key not in AUTO_RESULT_KEYS
                and not key.startswith("__")
                and (value is None or is_number(value))
            ):
                self._inferred[key] = key

    def _best_metric(self) -> str | None:
        if self._metric:
            return self._metric
        return next(iter(self._inferred)) if len(self._inferred) == 1 else None

    def _progress_str(
        self,
        trials: list[Any],
        done: bool,
        *sys_info: str,
        fmt: str | Format = "text",
        progress_bar: bool = False,
    ) -> str:
        """The whole report: status, system info, best trial, trial and error tables.

        ``progress_bar`` adds a line of trials done out of the total, with an ETA
        (the live report on a terminal); ``fmt`` may be any object with ``text``,
        ``table`` and ``delim`` (and ``bar``), as the terminal's rich format.
        """
        f = get_format(fmt)
        # The leading finished trials are read once (progress/_settled.py), the rest at
        # each report.
        settled = self._settled
        metric = self._best_metric()
        if self._metrics_override or len(self._inferred) >= self._infer_limit:
            settled.read(trials, metric, self._mode, _ignore)
        else:
            base = self._base_columns()
            settled.read(trials, metric, self._mode, lambda result: self._infer(result, base))
        unsettled = trials[settled.count :]
        columns = self._columns(unsettled)
        now = self._clock()
        lines = [f.text("== Status =="), f.text(time_passed_str(self._start_time, now))]
        if progress_bar:
            progress = _bar.trial_progress(trials, self._total_samples, now - self._start_time)
            draw = getattr(f, "bar", None)
            lines.append(draw(progress) if draw else f.text(_bar.text_bar(progress)))
        lines += [f.text(str(info)) for info in sys_info if info]
        if self._best_metric() == metric:
            best = _tables.best_trial(unsettled, metric, self._mode, settled.best)
        else:  # just inferred: the settled trials were read for another metric
            metric = self._best_metric()
            best = _tables.best_trial(trials, metric, self._mode)
        if best is not None and metric is not None:
            lines.append(f.text(_tables.best_trial_str(best, metric, self._parameter_columns)))
        if trials:
            lines.append(f.text(_tables.trial_count_str(trials, self._total_samples)))
            if done or self._print_intermediate_tables:
                lines += _tables.progress_table(
                    trials,
                    f,
                    columns,
                    self._parameter_columns,
                    None if done else self._max_progress_rows,
                    self._max_column_length,
                    metric,
                    self._mode,
                    self._sort_by_metric,
                )
            lines += _tables.error_table(trials, f, None if done else self._max_error_rows)
        return f.delim.join(lines) + f.delim


def _ignore(result: Mapping[str, Any]) -> None:
    pass


def _add_column(columns: Columns, key: str, representation: str | None, what: str) -> None:
    if key in columns:
        raise ValueError(f"The {what} column {key!r} already exists.")
    if isinstance(columns, MutableMapping):
        columns[key] = representation or key
    else:
        if representation is not None and representation != key:
            raise ValueError(
                f"representation={representation!r} cannot differ from the {what} name "
                f"{key!r}: the reporter was built with a list of columns; pass a dict "
                "of name -> representation instead."
            )
        columns.append(key)
