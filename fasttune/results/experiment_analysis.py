"""``ExperimentAnalysis``: query an experiment's trials (as ``ray.tune.ExperimentAnalysis``)."""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune._support.flatten import flatten_result
from fasttune._support.gc_pause import paused_gc
from fasttune.checkpoint import Checkpoint
from fasttune.experiment.trial import Trial
from fasttune.results import _scan
from fasttune.results import _trial_files as files
from fasttune.results._scoring import (
    best_checkpoint,
    best_row,
    check_mode,
    check_scope,
    flat_row,
    is_better,
    metric_stats,
    normalized_row,
    pandas,
    results_dataframe,
    score,
)
from fasttune.results._trial_files import resolve_filesystem

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)

# Trials whose last results a data frame reads at once (concurrently from object stores).
_ROWS_READ_TOGETHER = 256


class ExperimentAnalysis:
    """Analyse the trials of an experiment, live or loaded from its directory.

    Args:
        experiment_checkpoint_path: The experiment directory (or a ``.json`` state
            file inside it), local or a URL.
        storage_filesystem: The filesystem serving that path (inferred if omitted).
        trials: The trials to analyse; by default they are loaded from the
            experiment's state files, or rebuilt from its trial directories.
        default_metric: Metric used when a method is given none.
        default_mode: ``"min"`` or ``"max"``, used when a method is given none.

    Raises:
        ValueError: ``default_mode`` is not min/max, or the directory holds no trial.
        FileNotFoundError: The experiment directory does not exist.

    Example:
        >>> import json, os, tempfile
        >>> exp = tempfile.mkdtemp()
        >>> for i, loss in enumerate([0.3, 0.1]):
        ...     os.makedirs(f"{exp}/train_{i}")
        ...     with open(f"{exp}/train_{i}/result.json", "w") as f:
        ...         _ = f.write(json.dumps({"loss": loss, "trial_id": str(i)}) + "\\n")
        >>> analysis = ExperimentAnalysis(exp, default_metric="loss", default_mode="min")
        >>> analysis.best_trial.trial_id, analysis.best_result["loss"]
        ('1', 0.1)
    """

    def __init__(
        self,
        experiment_checkpoint_path: str | os.PathLike[str],
        *,
        storage_filesystem: Any = None,
        trials: list[Trial] | None = None,
        default_metric: str | None = None,
        default_mode: str | None = None,
    ):
        check_mode(default_mode, "default_mode")
        self.default_metric = default_metric
        self.default_mode = default_mode
        if default_metric is None and default_mode is not None:
            self.default_metric = R.DEFAULT_METRIC  # a mode alone ranks the anonymous metric
        self._fs, path = resolve_filesystem(experiment_checkpoint_path, storage_filesystem)
        self._experiment_fs_path = os.path.dirname(path) if path.endswith(".json") else path
        self._histories: dict[str, _scan.History] = {}
        self._stats_cache: dict[tuple[str, str], dict[str, float] | None] = {}
        self._dataframes: dict[str, pd.DataFrame] = {}
        # Trials handed over by a running experiment keep exact statistics in
        # ``metric_analysis``; loaded ones only know their last result, so their
        # statistics are recomputed from the result files.
        self._live_trials = trials is not None
        self.trials: list[Trial] = list(trials) if trials is not None else self._load_trials()
        with paused_gc():  # a loader per trial: 100,000 of them set off full collections
            for trial in self.trials:
                if trial.stats_partial:  # rebuilt from saved state: its results are in files
                    trial.load_stats_when_asked(functools.partial(self._flat_results, trial))

    # ------------------------------------------------------------------ loading
    # Whether configs may be unpickled (exact values); readers for display (the command
    # line, the dashboard: ExperimentView) read them from params.json instead.
    _unpickle_configs = True

    def _load_trials(self) -> list[Trial]:
        from fasttune._internal.state_loading import load_trials

        path = self._experiment_fs_path
        fs = self._fs
        read_config = None
        if not self._unpickle_configs:
            # Every trial folder's params.json in one batch (concurrent on object stores)
            try:
                listed = set(fs.listdir(path))
            except (FileNotFoundError, NotADirectoryError):
                listed = set()
            configs = files.read_json_configs(fs, path, sorted(listed))

            def read_config(folder: str) -> dict[str, Any]:
                if folder in listed:  # (a folder not made yet has no config file)
                    return configs.get(folder, {})
                return files.read_config(fs, fs.join(path, folder), pickles=False)

        try:
            if self._fs.is_local:
                return list(load_trials(path, read_config=read_config))
            # Remote: the committed state files, downloaded (a few objects, whatever
            # the number of trials); the trials stay in storage.
            from fasttune.storage.state_commit import download_state

            with tempfile.TemporaryDirectory(prefix="fasttune_state_") as local:
                if download_state(self._fs, path, local) is not None:
                    return list(load_trials(local, trials_path=path, read_config=read_config))
        except FileNotFoundError:
            pass
        logger.debug("No experiment state in %s: scanning its trial directories.", path)
        trials, self._histories = _scan.scan_trials(self._fs, path, pickles=self._unpickle_configs)
        return trials

    def _history(self, trial: Trial) -> _scan.History:
        """All results of ``trial`` from its files (its last result if it has none)."""
        history = self._histories.get(trial.trial_id)
        if history is None:
            history = self._histories[trial.trial_id] = self._read_history(trial)
        return history

    def _read_history(self, trial: Trial) -> _scan.History:
        results: list[dict[str, Any]] = []
        source = None
        if trial.local_path:
            results, source = files.read_results(self._fs, trial.local_path)
        if source is None and trial.last_result:
            results, source = [dict(trial.last_result)], files.SOURCE_JSON
        return results, source

    def _flat_results(self, trial: Trial) -> list[dict[str, Any]]:
        """Every result of ``trial`` from its files, flattened with ``/`` (no config)."""
        results, _ = self._history(trial)
        return [flatten_result(r, (R.CONFIG,)) for r in results]

    def _find_trial(self, trial: Trial | str) -> Trial:
        if isinstance(trial, Trial):
            return trial
        for candidate in self.trials:
            if trial in (candidate.local_path, candidate.trial_id):
                return candidate
        raise ValueError(f"No trial with path or id {trial!r} in {self._experiment_fs_path!r}.")

    # ------------------------------------------------------------------ paths, configs
    @property
    def experiment_path(self) -> str:
        """The experiment directory (within the experiment's filesystem)."""
        return self._experiment_fs_path

    def get_all_configs(self, prefix: bool = False) -> dict[str, dict[str, Any]]:
        """Trial id -> config; with ``prefix``, flattened as ``config/<key>``."""
        return {
            t.trial_id: flatten_result({R.CONFIG: t.config}) if prefix else t.config
            for t in self.trials
        }

    # ------------------------------------------------------------------ validation
    def _validate_metric(self, metric: str | None) -> str:
        if not metric and not self.default_metric:
            raise ValueError(
                "No `metric` was passed and no default metric is set: pass `metric=...` "
                "or set `TuneConfig(metric=...)`."
            )
        return metric or self.default_metric  # type: ignore[return-value]

    def _validate_mode(self, mode: str | None) -> str:
        if not mode and not self.default_mode:
            raise ValueError(
                "No `mode` was passed and no default mode is set: pass `mode='min'` or "
                "`mode='max'`, or set `TuneConfig(mode=...)`."
            )
        check_mode(mode)
        return mode or self.default_mode  # type: ignore[return-value]

    def _require_defaults(self, what: str, alternative: str) -> None:
        if not self.default_metric or not self.default_mode:
            raise ValueError(
                f"To get `{what}`, pass `metric` and `mode` to the Tuner's TuneConfig (or "
                f"to tune.run). Otherwise use `{alternative}` with an explicit metric and mode."
            )

    # ------------------------------------------------------------------ best trial
    def _metric_stats(self, trial: Trial, metric: str) -> dict[str, float] | None:
        # Read once: a finished trial's statistics are unpacked at each read.
        if self._live_trials:
            live = trial.metric_analysis.get(metric)
            if live is not None:
                return live
        key = (trial.trial_id, metric)
        if key not in self._stats_cache:
            results, _ = self._history(trial)
            stats = metric_stats(files.lookup(r, metric) for r in results)
            if stats is None:
                stats = trial.metric_analysis.get(metric)
            self._stats_cache[key] = stats
        return self._stats_cache[key]

    def get_best_trial(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> Trial | None:
        """The trial with the best ``metric``, compared over ``scope``.

        A single trial is returned as is, without looking at any metric.

        Args:
            metric: Result key to compare (``"a/b"`` for nested); default
                :attr:`default_metric`.
            mode: ``"min"`` or ``"max"``; default :attr:`default_mode`.
            scope: ``"last"`` (last value), ``"avg"`` (mean of all values),
                ``"last-5-avg"``, ``"last-10-avg"``, or ``"all"`` (each trial's
                min or max value, following ``mode``).
            filter_nan_and_inf: Never pick a trial whose score is NaN or infinite.

        Returns:
            The best trial, or None when no trial reported ``metric`` (with a
            usable value).

        Raises:
            ValueError: No metric/mode given nor defaulted, or an unknown scope.
        """
        if len(self.trials) == 1:
            return self.trials[0]
        metric = self._validate_metric(metric)
        mode = self._validate_mode(mode)
        check_scope(scope)
        best_trial, best_score = None, None
        for trial in self.trials:
            stats = self._metric_stats(trial, metric)
            if stats is None:
                continue
            value = score(stats, scope, mode)
            if filter_nan_and_inf and not files.is_finite(value):
                continue
            if best_trial is None or is_better(value, best_score, mode):
                best_trial, best_score = trial, value
        if best_trial is None:
            logger.warning("Could not find a best trial for metric %r: check its name.", metric)
        return best_trial

    def get_best_config(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last"
    ) -> dict[str, Any] | None:
        """The config of :meth:`get_best_trial`, or None."""
        trial = self.get_best_trial(metric, mode, scope)
        return trial.config if trial else None

    @property
    def best_trial(self) -> Trial | None:
        """:meth:`get_best_trial` with the default metric and mode."""
        self._require_defaults("best_trial", "get_best_trial(metric, mode)")
        return self.get_best_trial(self.default_metric, self.default_mode)

    @property
    def best_config(self) -> dict[str, Any] | None:
        """The config of :attr:`best_trial`."""
        self._require_defaults("best_config", "get_best_config(metric, mode)")
        return self.get_best_config(self.default_metric, self.default_mode)

    @property
    def best_result(self) -> dict[str, Any]:
        """The last result of :attr:`best_trial`."""
        self._require_defaults("best_result", "get_best_trial(metric, mode).last_result")
        return self._best_trial_or_raise().last_result

    @property
    def best_checkpoint(self) -> Checkpoint | None:
        """The best checkpoint (by the default metric) of :attr:`best_trial`."""
        self._require_defaults("best_checkpoint", "get_best_checkpoint(trial, metric, mode)")
        return self.get_best_checkpoint(
            self._best_trial_or_raise(), self.default_metric, self.default_mode
        )

    @property
    def best_dataframe(self) -> pd.DataFrame:
        """All results of :attr:`best_trial` as a DataFrame."""
        self._require_defaults("best_dataframe", "get_best_trial(metric, mode)")
        return self._trial_dataframe(self._best_trial_or_raise())

    @property
    def best_result_df(self) -> pd.DataFrame:
        """The last result of :attr:`best_trial`, flattened, as a one-row DataFrame."""
        self._require_defaults("best_result_df", "get_best_trial(metric, mode).last_result")
        trial = self._best_trial_or_raise()
        return pandas().DataFrame.from_records([self._last_row(trial)], index=R.TRIAL_ID)

    def _best_trial_or_raise(self) -> Trial:
        trial = self.best_trial
        if trial is None:
            raise ValueError(
                f"No best trial found for the default metric {self.default_metric!r} "
                f"({self.default_mode}): no trial reported a usable value for it."
            )
        return trial

    # ------------------------------------------------------------------ checkpoints
    def _checkpoints(
        self, trial: Trial, include_latest: bool = False
    ) -> list[tuple[Checkpoint, dict[str, Any]]]:
        """The trial's kept best checkpoints (and its latest one, if asked) with metrics."""
        manager = trial.checkpoint_manager
        if manager is None:
            return []
        pairs = manager.best_checkpoints()
        latest = manager.latest
        if include_latest and latest is not None:
            checkpoint = manager.latest_checkpoint
            if all(c != checkpoint for c, _ in pairs):
                pairs.append((checkpoint, latest.metrics))
        return [(self._rehome(trial, c), m) for c, m in pairs]  # type: ignore[misc]

    def _rehome(self, trial: Trial, checkpoint: Checkpoint | None) -> Checkpoint | None:
        """``checkpoint`` on this experiment's filesystem (for remote experiments)."""
        if checkpoint is None or self._fs.is_local or not trial.local_path:
            return checkpoint
        name = os.path.basename(checkpoint.path.rstrip("/"))
        return Checkpoint(self._fs.join(trial.local_path, name), filesystem=self._fs)

    def get_best_checkpoint(
        self, trial: Trial | str, metric: str | None = None, mode: str | None = None
    ) -> Checkpoint | None:
        """The best of ``trial``'s kept checkpoints by ``metric`` (NaN values left out).

        Args:
            trial: A trial, or its directory or id.
            metric: Default: :attr:`default_metric`, else ``training_iteration``.
            mode: ``"min"`` or ``"max"``; default :attr:`default_mode`.

        Returns:
            The checkpoint, or None if no checkpoint has a value for ``metric``.
        """
        metric = metric or self.default_metric or R.TRAINING_ITERATION
        mode = self._validate_mode(mode)
        trial = self._find_trial(trial)
        best = best_checkpoint(self._checkpoints(trial), metric, mode)
        if best is None:
            logger.warning("No checkpoint of trial %s has a value for %r.", trial, metric)
        return best

    def get_last_checkpoint(
        self,
        trial: Trial | str | None = None,
        metric: str = R.TRAINING_ITERATION,
        mode: str = "max",
    ) -> Checkpoint | None:
        """The checkpoint of ``trial`` with the highest ``training_iteration``.

        The latest checkpoint counts even when it is not among the kept best ones.
        Without a trial, the best trial by ``metric``/``mode`` is used.
        """
        chosen = self._find_trial(trial) if trial is not None else self.get_best_trial(metric, mode)
        if chosen is None:
            return None
        pairs = self._checkpoints(chosen, include_latest=True)
        best = best_checkpoint(pairs, R.TRAINING_ITERATION, "max")
        return best if best is not None else self._rehome(chosen, chosen.checkpoint)

    # ------------------------------------------------------------------ results
    @property
    def results(self) -> dict[str, dict[str, Any]]:
        """Trial id -> last result."""
        return {t.trial_id: t.last_result for t in self.trials}

    def _last_row(self, trial: Trial) -> dict[str, Any]:
        row = flat_row(trial.last_result)
        row.setdefault(R.TRIAL_ID, trial.trial_id)
        return row

    @property
    def results_df(self) -> pd.DataFrame:
        """The last result of every trial, flattened with ``/``, indexed by trial id."""
        rows = [self._last_row(t) for t in self.trials]
        return pandas().DataFrame.from_records(rows, index=R.TRIAL_ID)

    @property
    def trial_dataframes(self) -> dict[str, pd.DataFrame]:
        """Trial id -> DataFrame of all its results (read once, on first access)."""
        return {t.trial_id: self._trial_dataframe(t) for t in self.trials}

    def _trial_dataframe(self, trial: Trial) -> pd.DataFrame:
        frame = self._dataframes.get(trial.trial_id)
        if frame is None:
            frame = self._dataframes[trial.trial_id] = results_dataframe(*self._history(trial))
        return frame

    def dataframe(self, metric: str | None = None, mode: str | None = None) -> pd.DataFrame:
        """One row per trial: a result flattened with ``/``, ``config/...`` and ``logdir``.

        The row is the trial's last result, or with ``metric`` and ``mode`` the
        result where ``metric`` was lowest/highest (the last one if it never had a
        finite value). Trials without results are left out. Defaults are not used
        here, as in Ray.

        Raises:
            ValueError: ``mode`` is not min/max, or ``mode`` is given without ``metric``.
        """
        check_mode(mode)
        if mode and not metric:
            raise ValueError("`dataframe(mode=...)` needs a `metric` too.")
        with paused_gc():  # a row per trial, all alive until the frame is built
            return self._dataframe(metric, mode)

    def _dataframe(self, metric: str | None, mode: str | None) -> pd.DataFrame:
        """Rows as Ray Tune's, which picks each from the trial's whole data frame: a key
        some result reported is a column even where the chosen result lacks it (a
        validation metric reported every few epochs), blank in that row. Those keys
        come from each trial's ``progress.csv`` header (its start alone is read); for a
        trial without one, from its statistics (numbers only) or, loaded from saved
        state, from all its results."""
        configs = self.get_all_configs(prefix=True)
        rows = []
        reported: dict[str, None] = {}  # keys of every result, beyond the rows' own
        for start in range(0, len(self.trials), _ROWS_READ_TOGETHER):
            trials = self.trials[start : start + _ROWS_READ_TOGETHER]
            last_results: dict[str, dict[str, Any] | None] = {}
            headers: dict[str, list[str]] = {}
            if metric is None or mode is None:  # each row a last result: its line alone
                unread = [t.local_path for t in trials if t.trial_id not in self._histories]
                last_results = files.read_last_results(self._fs, [p for p in unread if p])
                # Its other keys from its header (a trial read whole below has them all).
                headers = files.read_csv_headers(self._fs, [p for p in unread if p])
            for trial in trials:
                header = headers.get(trial.local_path or "")
                chosen = last_results.get(trial.local_path or "")
                results = None
                if chosen is None:
                    results = self._results_of(trial)
                    if not results:
                        continue
                    chosen = best_row(results, metric, mode)
                if header is not None:
                    reported.update(dict.fromkeys(header))
                elif results is None and not trial.stats_partial:
                    reported.update(dict.fromkeys(trial.keys_with_stats()))
                else:
                    reported.update(_keys_of(results or self._results_of(trial)))
                row = normalized_row(chosen)  # columns in the order of Ray's rows
                row.update(configs[trial.trial_id])
                row["logdir"] = trial.local_path
                rows.append(row)
        frame = pandas().DataFrame.from_records(rows)
        missing = [key for key in reported if key not in frame.columns]
        if missing and len(frame):
            frame = frame.reindex(columns=[*frame.columns, *missing])
        return frame

    def _results_of(self, trial: Trial) -> list[dict[str, Any]]:
        """All results of ``trial``, as :meth:`_history` but not kept (a data frame of
        many trials would hold every result of each)."""
        history = self._histories.get(trial.trial_id) or self._read_history(trial)
        return history[0]

    def __repr__(self) -> str:
        return (
            f"ExperimentAnalysis(path={self._experiment_fs_path!r}, "
            f"trials={len(self.trials)}, default_metric={self.default_metric!r}, "
            f"default_mode={self.default_mode!r})"
        )


def _keys_of(results: list[dict[str, Any]]) -> dict[str, None]:
    """The keys of ``results`` flattened with ``/`` (config left out), in order of first
    appearance; a result is flattened only if its keys differ from those already seen
    or it nests values."""
    keys: dict[str, None] = {}
    shapes: set[tuple[str, ...]] = set()
    for result in results:
        shape = tuple(result)
        if shape in shapes and not any(isinstance(v, dict) for v in result.values()):
            continue
        shapes.add(shape)
        keys.update(dict.fromkeys(flatten_result(result, (R.CONFIG,))))
    return keys
