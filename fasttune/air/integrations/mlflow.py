"""MLflow tracking for Tune runs (``ray.air.integrations.mlflow``).

:class:`MLflowLoggerCallback` logs from the driver: one MLflow run per trial, with the
trial's config as params and each result's numbers as metrics. :func:`setup_mlflow`
starts an MLflow run inside the trainable instead, for logging of your own.

Example:
    >>> from fasttune.air.integrations.mlflow import MLflowLoggerCallback
    >>> callback = MLflowLoggerCallback(
    ...     tracking_uri="sqlite:///mlflow.db", experiment_name="tune", tags={"team": "a"}
    ... )
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune._support.background import BackgroundCalls
from fasttune._support.flatten import flatten_result
from fasttune._support.imports import import_optional
from fasttune.logger.logger_callback import LoggerCallback

if TYPE_CHECKING:
    from fasttune.experiment.trial import Trial

__all__ = ["MLflowLoggerCallback", "setup_mlflow"]

_MAX_PARAM_LENGTH = 6000  # MLflow refuses longer param values


def _mlflow() -> Any:
    return import_optional("mlflow", extra="mlflow", feature="MLflow tracking")


def _params(config: Mapping[str, Any]) -> dict[str, str]:
    """A config flattened with ``/`` and each value as MLflow's param string."""
    return {k: str(v)[:_MAX_PARAM_LENGTH] for k, v in flatten_result(config).items()}


def _numbers(flat: Mapping[str, Any]) -> dict[str, float]:
    """The values of ``flat`` that are numbers (bools as 0/1), as floats; others skipped."""
    return {k: float(v) for k, v in flat.items() if isinstance(v, (int, float))}


def _check_tags(owner: str, tags: Any) -> dict[str, Any]:
    if tags is None:
        return {}
    if not isinstance(tags, Mapping):
        raise TypeError(f"{owner}(tags={tags!r}): tags must be a dict of tag name to value.")
    return dict(tags)


def _experiment_id(
    client: Any, owner: str, experiment_id: str | None, experiment_name: str | None, create: bool
) -> str:
    """The MLflow experiment to log to: by id, by name (created if ``create``), or env."""
    experiment_id = experiment_id or os.environ.get("MLFLOW_EXPERIMENT_ID")
    if experiment_id is not None:
        if client.get_experiment(experiment_id) is None:  # raises for an unknown id
            raise ValueError(f"{owner}: no MLflow experiment with id {experiment_id!r}.")
        return str(experiment_id)
    experiment_name = experiment_name or os.environ.get("MLFLOW_EXPERIMENT_NAME")
    if experiment_name is None:
        return "0"  # MLflow's default experiment
    found = client.get_experiment_by_name(experiment_name)
    if found is not None:
        return str(found.experiment_id)
    if not create:
        raise ValueError(
            f"{owner}(experiment_name={experiment_name!r}): no MLflow experiment of that "
            "name exists; create it first or pass create_experiment_if_not_exists=True."
        )
    return str(client.create_experiment(experiment_name))


class MLflowLoggerCallback(LoggerCallback):
    """Log each trial to MLflow as one run: config as params, results as metrics.

    Runs beside the driver, on a thread of its own, so that a slow tracking store does
    not hold the run up (each trial's results of a step go as one batch); ``fit()``
    returns once everything is logged. Each result's numeric values (flattened with
    ``/``) are logged at step ``timesteps_total`` if reported, else
    ``training_iteration``; values that are not numbers are skipped.

    Args:
        tracking_uri: Where MLflow stores runs (``sqlite:///mlflow.db``, a server's
            ``http://...``); default: MLflow's own (``MLFLOW_TRACKING_URI``).
        registry_uri: The model registry's URI, passed to MLflow.
        experiment_name: The MLflow experiment (created if it does not exist); default:
            ``MLFLOW_EXPERIMENT_NAME`` / ``MLFLOW_EXPERIMENT_ID``, else MLflow's default.
        tags: Tags set on every trial's run (each run also gets ``trial_name``).
        tracking_token: Sets ``MLFLOW_TRACKING_TOKEN`` for an authenticated server.
        save_artifact: Upload the trial's directory as the run's artifacts at its end.
        log_params_on_trial_end: Log the config when the trial ends, not when it starts.
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        registry_uri: str | None = None,
        experiment_name: str | None = None,
        tags: dict[str, Any] | None = None,
        tracking_token: str | None = None,
        save_artifact: bool = False,
        log_params_on_trial_end: bool = False,
    ) -> None:
        owner = type(self).__name__
        for name, value in (
            ("tracking_uri", tracking_uri),
            ("registry_uri", registry_uri),
            ("experiment_name", experiment_name),
            ("tracking_token", tracking_token),
        ):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{owner}({name}={value!r}): {name} must be a str or None.")
        self.tracking_uri = tracking_uri
        self.registry_uri = registry_uri
        self.experiment_name = experiment_name
        self.tags = _check_tags(owner, tags)
        self.tracking_token = tracking_token
        self.should_save_artifact = bool(save_artifact)
        self.log_params_on_trial_end = bool(log_params_on_trial_end)
        self._client: Any = None
        self._experiment_id: str | None = None
        self._started: set[str] = set()  # trials with a run (driver side)
        self._pending: dict[str, list[Any]] = {}  # trial id -> metrics not handed over yet
        self._calls = BackgroundCalls("MLflowLoggerCallback")
        self._trial_runs: dict[str, str] = {}  # trial id -> MLflow run id (tracker side)

    def setup(self, *args: Any, **kwargs: Any) -> None:
        """Connect to the tracking store and find or create the experiment."""
        mlflow = _mlflow()
        if self.tracking_token is not None:
            os.environ["MLFLOW_TRACKING_TOKEN"] = self.tracking_token
        self._client = mlflow.tracking.MlflowClient(
            tracking_uri=self.tracking_uri, registry_uri=self.registry_uri
        )
        self._experiment_id = _experiment_id(
            self._client, type(self).__name__, None, self.experiment_name, create=True
        )

    def _ensure_setup(self) -> Any:
        if self._client is None:
            self.setup()
        return self._client

    # The driver's side: cheap, copies what the tracker needs and hands it over.

    def log_trial_start(self, trial: Trial) -> None:
        if trial.trial_id in self._started:
            return  # resumed after a pause: same run
        self._ensure_setup()
        self._started.add(trial.trial_id)
        tags = {**{k: str(v) for k, v in self.tags.items()}, "trial_name": str(trial)}
        params = None if self.log_params_on_trial_end else _params(trial.config or {})
        self._calls.submit(self._create_run, trial.trial_id, str(trial), tags, params)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        if trial.trial_id not in self._started:
            self.log_trial_start(trial)
        step = int(result.get(R.TIMESTEPS_TOTAL) or result.get(R.TRAINING_ITERATION) or iteration)
        timestamp = int(time.time() * 1000)
        flat = flatten_result(result)  # numeric config/* values too, as Ray Tune logs them
        self._pending.setdefault(trial.trial_id, []).extend(
            Metric(k, v, timestamp, step) for k, v in _numbers(flat).items()
        )

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        """Hand each trial's results of this step to the tracker as one batch."""
        if self._pending:
            pending, self._pending = self._pending, {}
            for trial_id, metrics in pending.items():
                self._calls.submit(self._log_metrics, trial_id, metrics)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        if trial.trial_id not in self._started:
            return
        self._started.discard(trial.trial_id)
        metrics = self._pending.pop(trial.trial_id, None)
        if metrics:
            self._calls.submit(self._log_metrics, trial.trial_id, metrics)
        artifacts = trial.local_path if self.should_save_artifact else None
        params = _params(trial.config or {}) if self.log_params_on_trial_end else None
        self._calls.submit(self._end_run, trial.trial_id, failed, artifacts, params)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """Wait for the tracker to have everything."""
        self.on_step_end(0, trials)
        self._calls.drain()

    # The tracker's side, on the background thread, in order.

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        batch = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(batch), 100):  # MLflow takes 100 params per batch
            self._client.log_batch(run_id, params=batch[start : start + 100])

    def _create_run(
        self, trial_id: str, name: str, tags: dict[str, str], params: dict[str, str] | None
    ) -> None:
        run = self._client.create_run(experiment_id=self._experiment_id, tags=tags, run_name=name)
        self._trial_runs[trial_id] = run.info.run_id
        if params:
            self._log_params(run.info.run_id, params)

    def _log_metrics(self, trial_id: str, metrics: list[Any]) -> None:
        run_id = self._trial_runs[trial_id]
        for start in range(0, len(metrics), 1000):  # MLflow takes 1000 metrics per batch
            self._client.log_batch(run_id, metrics=metrics[start : start + 1000])

    def _end_run(
        self, trial_id: str, failed: bool, artifacts: str | None, params: dict[str, str] | None
    ) -> None:
        run_id = self._trial_runs.pop(trial_id)
        try:
            if artifacts and os.path.isdir(artifacts):
                self._client.log_artifacts(run_id, artifacts)
            if params:
                self._log_params(run_id, params)
        finally:
            self._client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")


def setup_mlflow(
    config: dict[str, Any] | None = None,
    tracking_uri: str | None = None,
    registry_uri: str | None = None,
    experiment_id: str | None = None,
    experiment_name: str | None = None,
    tracking_token: str | None = None,
    artifact_location: str | None = None,
    run_name: str | None = None,
    create_experiment_if_not_exists: bool = False,
    tags: dict[str, Any] | None = None,
    rank_zero_only: bool = True,
) -> Any:
    """Start an MLflow run inside a trainable and return the ``mlflow`` module.

    The run is named after the trial (unless ``run_name``), tagged with ``tags`` and
    the trial id, and gets ``config`` as params; then call ``mlflow.log_metric(...)``
    etc. on the returned module.

    Args:
        config: The trial's config, logged as params (flattened with ``/``).
        tracking_uri: Where MLflow stores runs; default: ``MLFLOW_TRACKING_URI``.
        registry_uri: The model registry's URI.
        experiment_id: The MLflow experiment's id (else ``experiment_name``).
        experiment_name: The MLflow experiment's name; default:
            ``MLFLOW_EXPERIMENT_NAME``/``MLFLOW_EXPERIMENT_ID``, else MLflow's default.
        tracking_token: Sets ``MLFLOW_TRACKING_TOKEN`` for an authenticated server.
        artifact_location: The artifact location of an experiment this creates.
        run_name: The run's name; default: the trial's name.
        create_experiment_if_not_exists: Create ``experiment_name`` if missing (else a
            missing experiment is a ``ValueError``).
        tags: Tags set on the run.
        rank_zero_only: Kept for Ray's signature: a Tune trial is one worker, rank 0.

    Returns:
        The ``mlflow`` module, with the run active.

    Raises:
        ValueError: When the experiment does not exist and may not be created.
    """
    from fasttune.trainable.context import get_context

    mlflow = _mlflow()
    owner = "setup_mlflow"
    tags = _check_tags(owner, tags)
    if tracking_token is not None:
        os.environ["MLFLOW_TRACKING_TOKEN"] = tracking_token
    if tracking_uri is not None:
        mlflow.set_tracking_uri(tracking_uri)
    if registry_uri is not None:
        mlflow.set_registry_uri(registry_uri)
    client = mlflow.tracking.MlflowClient(tracking_uri=tracking_uri, registry_uri=registry_uri)
    if (
        experiment_id is None
        and experiment_name is not None
        and create_experiment_if_not_exists
        and client.get_experiment_by_name(experiment_name) is None
    ):
        experiment_id = client.create_experiment(
            experiment_name, artifact_location=artifact_location
        )
    exp_id = _experiment_id(
        client, owner, experiment_id, experiment_name, create_experiment_if_not_exists
    )
    context = get_context()
    trial_id, trial_name = context.get_trial_id(), context.get_trial_name()
    run_tags = {str(k): str(v) for k, v in tags.items()}
    if trial_id is not None:
        run_tags.setdefault("trial_id", trial_id)
    if mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.start_run(experiment_id=exp_id, run_name=run_name or trial_name, tags=run_tags)
    if config:
        mlflow.log_params(_params(config))
    return mlflow
