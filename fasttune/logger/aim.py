"""Aim tracking for Tune runs (``ray.tune.logger.aim``).

:class:`AimLoggerCallback` logs each trial as one Aim run, from the driver: the
trial's sampled hyperparameters as the run's ``hparams``, and each result's numbers as
Aim metrics named ``ray/tune/<metric>`` (flattened with ``/``), as Ray Tune names them.
Open the repo with ``aim up --repo <experiment dir>`` or read it with ``aim.Repo``.

Example:
    >>> from fasttune.logger.aim import AimLoggerCallback
    >>> callback = AimLoggerCallback(experiment_name="tune", metrics=["loss"])
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune._support.background import BackgroundCalls
from fasttune._support.flatten import flatten_result
from fasttune._support.imports import import_optional
from fasttune.logger.logger_callback import LoggerCallback

if TYPE_CHECKING:
    from fasttune.experiment.trial import Trial

__all__ = ["AimLoggerCallback"]

logger = logging.getLogger(__name__)

# Result keys not logged (as in Ray); ``context`` and ``epoch`` are given to Aim's track.
_SKIPPED = frozenset((R.CONFIG, R.PID, R.TIMESTAMP, R.TIME_TOTAL_S, R.TRAINING_ITERATION))
_METRIC_PREFIX = "ray/tune/"


def _aim_run_class() -> Any:
    return import_optional("aim.sdk", extra="aim", feature="Aim tracking").Run


def _close_run(run: Any) -> None:
    try:
        run.close()
    except Exception:
        logger.warning("AimLoggerCallback: closing an Aim run failed", exc_info=True)


def _hparam(value: Any) -> Any:
    """A value Aim stores as a param (numpy scalars as Python ones), or None to skip."""
    if isinstance(value, (str, bool, int, float, list, type(None))):
        return value
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays
    return tolist() if callable(tolist) else None


class AimLoggerCallback(LoggerCallback):
    """Log each trial to an Aim repo as one run: hyperparameters and metrics.

    Runs beside the driver, on a thread of its own (Aim opens a repo and a run in tens
    to hundreds of milliseconds); ``fit()`` returns once everything is written.

    Args:
        repo: The Aim repo's directory (or an ``aim.Repo``); default: the experiment's
            directory, one level above the trial directories.
        experiment_name: Each run's Aim ``experiment``; default: the Tune experiment's
            name (``RunConfig(name=...)``).
        metrics: The result keys (flattened with ``/``) to track; default: every
            number reported.
        **aim_run_kwargs: Passed to ``aim.Run`` (``system_tracking_interval``,
            ``log_system_params``, ``capture_terminal_logs``...).

    Raises:
        ValueError, TypeError: On a bad argument, naming it.
        ImportError: When aim is not installed (``pip install "fasttune[aim]"``).
    """

    VALID_HPARAMS = (str, bool, int, float, list, type(None))

    def __init__(
        self,
        repo: Any = None,
        experiment_name: str | None = None,
        metrics: list[str] | None = None,
        **aim_run_kwargs: Any,
    ) -> None:
        owner = type(self).__name__
        if isinstance(repo, os.PathLike):
            repo = os.fspath(repo)
        if repo is not None and (
            repo == "" or (not isinstance(repo, str) and not hasattr(repo, "path"))
        ):
            raise TypeError(
                f"{owner}(repo={repo!r}): repo must be an Aim repo's directory (str), an "
                "aim.Repo, or None for the experiment's directory."
            )
        if experiment_name is not None and not isinstance(experiment_name, str):
            raise TypeError(f"{owner}(experiment_name={experiment_name!r}) must be a str or None.")
        if metrics is not None and (
            not isinstance(metrics, (list, tuple))
            or not metrics
            or not all(isinstance(m, str) for m in metrics)
        ):
            raise ValueError(
                f"{owner}(metrics={metrics!r}): metrics must be a non-empty list of result "
                "keys to track, or None to track every number reported."
            )
        self._repo_path = repo
        self._experiment_name = experiment_name
        self._metrics = None if metrics is None else frozenset(metrics)
        self._aim_run_kwargs = aim_run_kwargs
        self._started: set[str] = set()  # trials with an open run (driver side)
        self._calls = BackgroundCalls(owner)
        self._runs: dict[str, Any] = {}  # trial id -> aim Run (tracker side)
        self._closing: list[threading.Thread] = []  # runs closing (tracker side)
        _aim_run_class()  # a missing aim fails here, naming the extra

    # The driver's side: cheap, copies what the tracker needs and hands it over.

    def log_trial_start(self, trial: Trial) -> None:
        run_class = _aim_run_class()
        experiment_dir = os.path.dirname(trial.init_local_path())
        info = {"trial_id": trial.trial_id, "trial_log_dir": trial.local_path}
        hparams = None
        if trial.evaluated_params:
            flat = flatten_result(trial.evaluated_params)
            hparams = {k: _hparam(v) for k, v in flat.items()}
        kwargs = {
            "repo": self._repo_path or experiment_dir,
            "experiment": self._experiment_name or os.path.basename(experiment_dir),
            **self._aim_run_kwargs,
        }
        if trial.trial_id in self._started:  # restarted: a new run, as in Ray
            self._calls.submit(self._close, trial.trial_id)
        self._started.add(trial.trial_id)
        self._calls.submit(self._create, run_class, trial.trial_id, kwargs, info, hparams)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        if trial.trial_id not in self._started:
            self.log_trial_start(trial)
        step = result.get(R.TIMESTEPS_TOTAL) or result.get(R.TRAINING_ITERATION) or iteration
        context = result.get("context")
        epoch = result.get("epoch")
        skipped = _SKIPPED | {"context", "epoch"}
        values = {
            _METRIC_PREFIX + k: v
            for k, v in flatten_result(result, skipped).items()
            if isinstance(v, (int, float))
            and math.isfinite(v)
            and (self._metrics is None or k in self._metrics)
        }
        self._calls.submit(self._track, trial.trial_id, values, step, epoch, context)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        if trial.trial_id in self._started:
            self._started.discard(trial.trial_id)
            self._calls.submit(self._close, trial.trial_id)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """Close the runs still open and wait for Aim to have everything."""
        for trial_id in self._started:
            self._calls.submit(self._close, trial_id)
        self._started.clear()
        self._calls.drain()
        for thread in self._closing:
            thread.join()
        self._closing.clear()

    # The tracker's side, on the background thread, in order.

    def _create(
        self,
        run_class: Any,
        trial_id: str,
        kwargs: dict[str, Any],
        info: dict[str, Any],
        hparams: dict[str, Any] | None,
    ) -> None:
        run = run_class(**kwargs)
        for key, value in info.items():
            run[key] = value
        if hparams is not None:
            run["hparams"] = {k: v for k, v in hparams.items() if v is not None}
        self._runs[trial_id] = run

    def _track(
        self, trial_id: str, values: dict[str, Any], step: int, epoch: Any, context: Any
    ) -> None:
        run = self._runs[trial_id]
        for name, value in values.items():
            run.track(value, name=name, step=step, epoch=epoch, context=context)

    def _close(self, trial_id: str) -> None:
        """Close the run on a thread of its own: ``close()`` mostly waits for Aim's own
        threads to stop, and the next trials' runs need not wait with it."""
        run = self._runs.pop(trial_id, None)
        if run is not None:
            self._closing = [t for t in self._closing if t.is_alive()]
            thread = threading.Thread(target=_close_run, args=(run,), name=f"aim-close-{trial_id}")
            thread.start()
            self._closing.append(thread)
