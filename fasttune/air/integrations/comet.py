"""Comet tracking for Tune runs (``ray.air.integrations.comet``).

:class:`CometLoggerCallback` logs each trial as one Comet experiment, from the driver:
its config as parameters, each result's numbers as metrics at step
``training_iteration``, the trial's ids as "others" and its host facts as system info,
as Ray Tune does. ``online=False`` writes ``comet_ml.OfflineExperiment`` archives
(one ``<experiment key>.zip`` per trial in ``offline_directory``) for
``comet upload`` later, with no network and no API key.

Example:
    >>> from fasttune.air.integrations.comet import CometLoggerCallback
    >>> callback = CometLoggerCallback(
    ...     online=False, tags=["tune"], project_name="demo", offline_directory="comet"
    ... )
"""

from __future__ import annotations

import logging
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

__all__ = ["CometLoggerCallback"]

logger = logging.getLogger(__name__)


def _comet() -> Any:
    # Comet patches ML libraries on import unless told not to (as Ray does)
    os.environ.setdefault("COMET_DISABLE_AUTO_LOGGING", "1")
    return import_optional("comet_ml", extra="comet", feature="Comet tracking")


def _end_experiment(experiment: Any) -> None:
    try:
        experiment.end()
    except Exception:
        logger.warning("CometLoggerCallback: ending a Comet experiment failed", exc_info=True)


def _matches(key: str, names: tuple[str, ...]) -> bool:
    """``key`` is one of ``names`` or below one (``name/...``)."""
    return any(key == name or key.startswith(name + "/") for name in names)


class CometLoggerCallback(LoggerCallback):
    """Log each trial to Comet as one experiment: config, metrics, ids, system info.

    Runs beside the driver, on a thread of its own (a Comet experiment takes about a
    second to start; ending it waits two on Comet's threads, so each ends on a thread of
    its own); ``fit()`` returns once everything is written.
    Result values that are not numbers are skipped.

    Args:
        online: ``True``: ``comet_ml.Experiment`` (needs an API key: ``api_key=...``,
            ``COMET_API_KEY`` or Comet's config file); ``False``:
            ``comet_ml.OfflineExperiment``, archives in ``offline_directory``.
        tags: Tags added to every trial's experiment.
        save_checkpoints: Log each checkpoint as a Comet artifact of type ``model``
            (online only: Comet keeps artifacts of online experiments only).
        **experiment_kwargs: Passed to the experiment class (``project_name``,
            ``workspace``, ``api_key``, ``offline_directory``...). Comet's automatic
            output, git, code and CPU/GPU logging are off unless turned on here.

    Raises:
        TypeError, ValueError: On a bad argument, naming it.
        ImportError: When comet_ml is not installed (``pip install "fasttune[comet]"``).
    """

    # Comet's automatic logging that throttles many experiments at once, off by default
    # (as in Ray); and log_code: the "source" Comet finds from the driver's thread is this
    # module, not the user's script, and finding it costs ~0.13 s a trial.
    _exclude_autolog = (
        "auto_output_logging",
        "log_git_metadata",
        "log_git_patch",
        "log_env_cpu",
        "log_env_gpu",
        "log_code",
    )
    _exclude_results = ("done", "should_checkpoint")
    _system_results = (R.NODE_IP, R.HOSTNAME, R.PID, R.DATE)
    _other_results = (R.TRIAL_ID, R.EXPERIMENT_ID, R.EXPERIMENT_TAG)
    _episode_results = ("hist_stats/episode_reward", "hist_stats/episode_lengths")

    def __init__(
        self,
        online: bool = True,
        tags: list[str] | None = None,
        save_checkpoints: bool = False,
        **experiment_kwargs: Any,
    ) -> None:
        owner = type(self).__name__
        if tags is not None and (
            not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags)
        ):
            raise TypeError(f"{owner}(tags={tags!r}): tags must be a list of strings or None.")
        if save_checkpoints and not online:
            raise ValueError(
                f"{owner}(online=False, save_checkpoints=True): Comet keeps artifacts of "
                "online experiments only; use online=True or save_checkpoints=False."
            )
        comet = _comet()  # a missing comet_ml fails here, naming the extra
        if online and not (
            experiment_kwargs.get("api_key") or comet.config.get_config("comet.api_key")
        ):
            raise ValueError(
                f"{owner}(online=True): no Comet API key; pass api_key=..., set "
                "COMET_API_KEY, or use online=False to write offline archives."
            )
        self.online = bool(online)
        self.tags = list(tags or [])
        self.save_checkpoints = bool(save_checkpoints)
        self.experiment_kwargs = dict(experiment_kwargs)
        for option in self._exclude_autolog:
            self.experiment_kwargs.setdefault(option, False)
        self._started: set[str] = set()  # trials with an experiment (driver side)
        self._calls = BackgroundCalls(owner)
        self._experiments: dict[str, Any] = {}  # trial id -> Comet experiment (tracker side)
        self._ending: list[threading.Thread] = []  # experiments ending (tracker side)

    # The driver's side: cheap, copies what the tracker needs and hands it over.

    def log_trial_start(self, trial: Trial) -> None:
        config = dict(trial.config or {})
        config.pop("callbacks", None)
        if trial.trial_id not in self._started:
            self._started.add(trial.trial_id)
            self._calls.submit(self._create, trial.trial_id)
        self._calls.submit(self._describe, trial.trial_id, str(trial), config)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        if trial.trial_id not in self._started:
            self.log_trial_start(trial)
        step = result.get(R.TRAINING_ITERATION) or iteration
        config = dict(result.get(R.CONFIG) or {})
        config.pop("callbacks", None)
        params = flatten_result(config)
        others: dict[str, Any] = {}
        metrics: dict[str, Any] = {}
        system: dict[str, Any] = {}
        episodes: dict[str, Any] = {}
        for key, value in flatten_result(result, (R.CONFIG,)).items():
            if _matches(key, self._exclude_results):
                continue
            if _matches(key, self._other_results):
                others[key] = value
            elif _matches(key, self._system_results):
                system[key] = value
            elif _matches(key, self._episode_results):
                episodes[key] = value
            elif isinstance(value, (int, float)):
                metrics[key] = value
        self._calls.submit(
            self._log, trial.trial_id, step, params, others, metrics, system, episodes
        )

    def on_checkpoint(
        self, iteration: int, trials: list[Trial], trial: Trial, checkpoint: Any, **info: Any
    ) -> None:
        path = getattr(checkpoint, "path", None)
        if self.save_checkpoints and trial.trial_id in self._started and path:
            self._calls.submit(self._upload, trial.trial_id, str(trial), path)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        if trial.trial_id in self._started:
            self._started.discard(trial.trial_id)
            self._calls.submit(self._end, trial.trial_id)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """End the experiments still open and wait for Comet to have everything."""
        for trial_id in self._started:
            self._calls.submit(self._end, trial_id)
        self._started.clear()
        self._calls.drain()
        for thread in self._ending:
            thread.join()
        self._ending.clear()

    # The tracker's side, on the background thread, in order.

    def _create(self, trial_id: str) -> None:
        comet = _comet()
        cls = comet.Experiment if self.online else comet.OfflineExperiment
        self._experiments[trial_id] = cls(**self.experiment_kwargs)
        # several experiments at once: none is the process's global one
        comet.config.set_global_experiment(None)

    def _describe(self, trial_id: str, name: str, config: dict[str, Any]) -> None:
        experiment = self._experiments[trial_id]
        experiment.set_name(name)
        experiment.add_tags(self.tags)
        experiment.log_other("Created from", "Ray")
        experiment.log_parameters(config)

    def _log(
        self,
        trial_id: str,
        step: int,
        params: dict[str, Any],
        others: dict[str, Any],
        metrics: dict[str, Any],
        system: dict[str, Any],
        episodes: dict[str, Any],
    ) -> None:
        experiment = self._experiments[trial_id]
        if params:
            experiment.log_parameters(params, step=step)
        experiment.log_others(others)
        experiment.log_metrics(metrics, step=step)
        for key, value in system.items():
            experiment.log_system_info(key, value)
        for key, value in episodes.items():
            experiment.log_curve(key, x=list(range(len(value))), y=value, step=step)

    def _upload(self, trial_id: str, name: str, path: str) -> None:
        if not os.path.isdir(path):
            return
        artifact = _comet().Artifact(name=f"checkpoint_{name}", artifact_type="model")
        for root, _dirs, files in os.walk(path):
            for file in files:
                local = os.path.join(root, file)
                artifact.add(local, logical_path=os.path.relpath(local, path))
        self._experiments[trial_id].log_artifact(artifact)

    def _end(self, trial_id: str) -> None:
        """End the experiment on a thread of its own: ``end()`` mostly waits (~2 s) for
        Comet's own threads, and the next trials' experiments need not wait with it."""
        experiment = self._experiments.pop(trial_id, None)
        if experiment is not None:
            self._ending = [t for t in self._ending if t.is_alive()]
            thread = threading.Thread(
                target=_end_experiment, args=(experiment,), name=f"comet-end-{trial_id}"
            )
            thread.start()
            self._ending.append(thread)
