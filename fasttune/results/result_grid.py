"""``ResultGrid``: the results of every trial of an experiment (as ``ray.tune.ResultGrid``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, overload

from fasttune import result as R
from fasttune._support.gc_pause import paused_gc
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.results import _trial_files as files
from fasttune.results._scoring import flat_row
from fasttune.results.experiment_analysis import ExperimentAnalysis
from fasttune.results.result import Result
from fasttune.storage.arrow_view import arrow_filesystem

if TYPE_CHECKING:
    import pandas as pd


class ResultGrid:
    """One :class:`~fasttune.Result` per trial, in trial order, with queries over them.

    Built by ``Tuner.fit()`` from an :class:`~fasttune.ExperimentAnalysis`; trials
    of every status are included.

    Args:
        experiment_analysis: The analysis of the experiment's trials.

    Example:
        >>> import json, os, tempfile
        >>> exp = tempfile.mkdtemp()
        >>> for i, acc in enumerate([0.7, 0.9]):
        ...     os.makedirs(f"{exp}/train_{i}")
        ...     with open(f"{exp}/train_{i}/result.json", "w") as f:
        ...         _ = f.write(json.dumps({"acc": acc, "trial_id": str(i)}) + "\\n")
        >>> grid = ResultGrid(ExperimentAnalysis(exp))
        >>> len(grid), grid.get_best_result("acc", "max").metrics["acc"]
        (2, 0.9)
    """

    def __init__(self, experiment_analysis: ExperimentAnalysis):
        self._experiment_analysis = experiment_analysis
        # Each Result is built when first asked for, then kept: a grid of 100,000
        # trials whose best result alone is read does not hold 100,000 copies of their
        # last results (a finished trial keeps its own packed, see Trial.compact).
        self._results: list[Result | None] = [None] * len(experiment_analysis.trials)

    def _result(self, index: int) -> Result:
        result = self._results[index]
        if result is None:
            trial = self._experiment_analysis.trials[index]
            result = self._results[index] = self._trial_to_result(trial)
        return result

    # ------------------------------------------------------------------ sequence
    def __len__(self) -> int:
        return len(self._results)

    @overload
    def __getitem__(self, i: int) -> Result: ...
    @overload
    def __getitem__(self, i: slice) -> list[Result]: ...
    def __getitem__(self, i: int | slice) -> Result | list[Result]:
        """The ``i``-th result (trial order)."""
        if isinstance(i, slice):
            return [self._result(j) for j in range(*i.indices(len(self._results)))]
        n = len(self._results)
        if not -n <= i < n:
            raise IndexError(f"ResultGrid index {i} out of range for {n} results")
        return self._result(i % n)

    def __iter__(self) -> Iterator[Result]:
        with paused_gc():  # many long-lived objects at once (see gc_pause)
            results = [self._result(j) for j in range(len(self._results))]
        return iter(results)

    # ------------------------------------------------------------------ properties
    @property
    def experiment_path(self) -> str:
        """The experiment directory (within :attr:`filesystem`)."""
        return self._experiment_analysis.experiment_path

    @property
    def filesystem(self) -> Any:
        """The filesystem the experiment directory lives on: a ``pyarrow.fs.FileSystem``,
        as in Ray Tune (fasttune's own :class:`~fasttune.storage.FileSystem` without
        pyarrow)."""
        return arrow_filesystem(self._experiment_analysis._fs)

    @property
    def errors(self) -> list[BaseException]:
        """The errors of the trials that failed."""
        trials = self._experiment_analysis.trials
        finished_well = TrialStatus.TERMINATED
        failed = (j for j, t in enumerate(trials) if t.status != finished_well)
        return [error for error in (self._result(j).error for j in failed) if error]

    @property
    def num_errors(self) -> int:
        """How many trials ended in ERROR."""
        return sum(t.status == TrialStatus.ERROR for t in self._experiment_analysis.trials)

    @property
    def num_terminated(self) -> int:
        """How many trials ended TERMINATED (without error)."""
        return sum(t.status == TrialStatus.TERMINATED for t in self._experiment_analysis.trials)

    # ------------------------------------------------------------------ queries
    def get_best_result(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> Result:
        """The result of the best trial by ``metric``.

        With a single trial, its result is returned without any metric.

        Args:
            metric: Result key to compare (``"a/b"`` for nested); default: the
                ``TuneConfig`` metric.
            mode: ``"min"`` or ``"max"``; default: the ``TuneConfig`` mode.
            scope: ``"last"``, ``"avg"``, ``"last-5-avg"``, ``"last-10-avg"`` or
                ``"all"`` (see :meth:`ExperimentAnalysis.get_best_trial`).
            filter_nan_and_inf: Never pick a trial whose score is NaN or infinite.

        Raises:
            ValueError: No metric or mode given and none set in ``TuneConfig``, or
                an unknown scope or mode.
            RuntimeError: No trial reported a usable value for the metric (the
                message lists the metrics that were reported).
        """
        analysis = self._experiment_analysis
        if len(analysis.trials) == 1:
            return self._result(0)
        if not metric and not analysis.default_metric:
            raise ValueError(
                "No metric given: pass `metric=` to get_best_result() or set "
                "`TuneConfig(metric=...)` in your Tuner."
            )
        if not mode and not analysis.default_mode:
            raise ValueError(
                "No mode given: pass `mode='min'` or `mode='max'` to get_best_result() or "
                "set `TuneConfig(mode=...)` in your Tuner."
            )
        best = analysis.get_best_trial(metric, mode, scope, filter_nan_and_inf)
        if best is None:
            name = metric or analysis.default_metric
            if not metric and name == R.DEFAULT_METRIC:
                raise RuntimeError(
                    f"No metric to rank the trials by: TuneConfig(mode={analysis.default_mode!r}) "
                    "was set without TuneConfig(metric=...), which ranks the number a "
                    "training function returns, and none returned one. Pass "
                    "get_best_result(metric=..., mode=...) or set TuneConfig(metric=...). "
                    f"Reported metrics: {self._reported_metrics()}."
                )
            kinds = self._value_types(name) if name else set()
            if kinds:
                raise RuntimeError(
                    f"No best trial found for the metric {name!r}: its values are not numbers "
                    f"({', '.join(sorted(kinds))}), so they cannot be ranked. Rank by a numeric "
                    f"metric; reported metrics: {self._reported_metrics()}."
                )
            why = (
                ", or all its values are NaN or infinite (pass filter_nan_and_inf=False "
                "to accept them)"
                if filter_nan_and_inf
                else ""
            )
            raise RuntimeError(
                f"No best trial found for the metric {name!r}: no trial reported it{why}. "
                f"Reported metrics: {self._reported_metrics()}."
            )
        return self._result(analysis.trials.index(best))

    def _reported_metrics(self) -> list[str]:
        keys: set[str] = set()
        for trial in self._experiment_analysis.trials:
            keys.update(
                k
                for k in flat_row(trial.last_result)
                if not k.startswith("config/") and not k.startswith("__")  # runner's own
            )
        keys.discard(R.CONFIG)
        return sorted(keys)

    def _value_types(self, metric: str) -> set[str]:
        """Type names of the values of ``metric`` that are not numbers, in last results."""
        kinds = set()
        for trial in self._experiment_analysis.trials:
            value = flat_row(trial.last_result).get(metric)
            if value is not None and not isinstance(value, (int, float)):
                kinds.add(type(value).__name__)
        return kinds

    def get_dataframe(
        self, filter_metric: str | None = None, filter_mode: str | None = None
    ) -> pd.DataFrame:
        """One row per trial: its result, ``config/<key>`` columns and ``logdir``.

        Args:
            filter_metric: With ``filter_mode``, each trial's row is its result with
                the lowest/highest value of this metric instead of its last one.
            filter_mode: ``"min"`` or ``"max"``.

        Raises:
            ValueError: ``filter_mode`` is not min/max, or is given without a metric.
        """
        return self._experiment_analysis.dataframe(metric=filter_metric, mode=filter_mode)

    # ------------------------------------------------------------------ building
    def _trial_to_result(self, trial: Trial) -> Result:
        analysis = self._experiment_analysis
        error = None
        if trial.status != TrialStatus.TERMINATED:
            error = files.read_error(
                analysis._fs, trial.local_path, trial.error_file, trial.pickled_error_file
            )
        return Result(
            metrics=dict(trial.last_result),
            checkpoint=analysis._rehome(trial, trial.checkpoint),
            error=error,
            path=trial.path or "",
            best_checkpoints=analysis._checkpoints(trial),
            _storage_filesystem=analysis._fs,
            _metrics_dataframe_loader=lambda: analysis._trial_dataframe(trial),
            _config_loader=lambda: trial.config,
        )

    def __repr__(self) -> str:
        body = ",\n".join(r._repr(indent=2) for r in self)
        return f"ResultGrid<[\n{body}\n]>"
