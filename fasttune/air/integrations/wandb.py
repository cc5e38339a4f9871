"""Weights & Biases tracking for Tune runs (``ray.air.integrations.wandb``).

:class:`WandbLoggerCallback` logs from the driver: one W&B run per trial (id = the
trial id, name = the trial name, group = the experiment), with the config and each
result's numbers. :func:`setup_wandb` starts a W&B run inside the trainable instead.
Both work offline (``WANDB_MODE=offline``): runs are written under the trial
directory's ``wandb/`` folder, for ``wandb sync`` later.

Example:
    >>> from fasttune.air.integrations.wandb import WandbLoggerCallback
    >>> callback = WandbLoggerCallback(project="my-project", excludes=["time_this_iter_s"])
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune._support.background import BackgroundCalls
from fasttune._support.flatten import flatten_result
from fasttune._support.imports import import_optional
from fasttune.logger.logger_callback import LoggerCallback

if TYPE_CHECKING:
    from fasttune.experiment.trial import Trial

__all__ = ["WandbLoggerCallback", "setup_wandb"]

WANDB_ENV_VAR = "WANDB_API_KEY"
WANDB_PROJECT_ENV_VAR = "WANDB_PROJECT_NAME"
WANDB_GROUP_ENV_VAR = "WANDB_GROUP_NAME"


def _wandb() -> Any:
    return import_optional("wandb", extra="wandb", feature="W&B tracking")


def _set_api_key(owner: str, api_key_file: str | None, api_key: str | None) -> None:
    """Put the key from ``api_key`` or ``api_key_file`` where wandb reads it."""
    if api_key_file is not None:
        path = os.path.expanduser(api_key_file)
        if not os.path.isfile(path):
            raise ValueError(
                f"{owner}(api_key_file={api_key_file!r}): no such file; give the path of "
                "a file holding your W&B API key, or api_key=..."
            )
        with open(path) as f:
            api_key = f.read().strip()
    if api_key:
        os.environ[WANDB_ENV_VAR] = api_key


def _loggable(value: Any) -> bool:
    """Numbers, and wandb's own media objects (``wandb.Image``...)."""
    return isinstance(value, (int, float)) or type(value).__module__.startswith("wandb")


class WandbLoggerCallback(LoggerCallback):
    """Log each trial to W&B as one run: the config, and each result's numbers.

    Runs beside the driver, on a thread of its own (a W&B run takes most of a second
    to start); ``fit()`` returns once everything is logged.

    Args:
        project: The W&B project (or ``WANDB_PROJECT_NAME`` / ``WANDB_PROJECT``).
        group: The run group; default ``WANDB_GROUP_NAME``, else the experiment's name.
        api_key_file: A file holding the W&B API key.
        api_key: The W&B API key (else wandb's own login, or offline mode).
        excludes: Result keys (flattened with ``/``) not to log.
        log_config: Also log the result's ``config`` entry each step (for PBT).
        upload_checkpoints: Log each checkpoint as a W&B artifact of type ``model``.
        save_checkpoints: Ray's older name for ``upload_checkpoints``.
        upload_timeout: Kept for Ray's signature (W&B uploads in its own process).
        video_kwargs: Kept for Ray's signature.
        image_kwargs: Kept for Ray's signature.
        **kwargs: Passed to ``wandb.init`` (``mode``, ``entity``, ``tags``, ``notes``...).
    """

    AUTO_CONFIG_KEYS = [
        R.TRIAL_ID,
        R.EXPERIMENT_TAG,
        R.NODE_IP,
        R.EXPERIMENT_ID,
        R.HOSTNAME,
        R.PID,
        R.DATE,
    ]
    _EXCLUDE = frozenset((*AUTO_CONFIG_KEYS, R.DONE, R.CONFIG, "should_checkpoint"))

    def __init__(
        self,
        project: str | None = None,
        group: str | None = None,
        api_key_file: str | None = None,
        api_key: str | None = None,
        excludes: list[str] | None = None,
        log_config: bool = False,
        upload_checkpoints: bool = False,
        save_checkpoints: bool = False,
        upload_timeout: int = 1800,
        video_kwargs: dict[str, Any] | None = None,
        image_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        owner = type(self).__name__
        if excludes is not None and (
            not isinstance(excludes, (list, tuple)) or not all(isinstance(e, str) for e in excludes)
        ):
            raise TypeError(f"{owner}(excludes={excludes!r}): excludes must be a list of keys.")
        self.project = project
        self.group = group
        self.api_key_path = api_key_file
        self.api_key = api_key
        self.excludes = list(excludes or [])
        self.log_config = bool(log_config)
        self.upload_checkpoints = bool(upload_checkpoints or save_checkpoints)
        self.upload_timeout = upload_timeout
        self.video_kwargs = video_kwargs or {}
        self.image_kwargs = image_kwargs or {}
        self.kwargs = kwargs
        self._started: set[str] = set()  # trials with a run (driver side)
        # one thread for every run: W&B's run start is not safe from several at once
        self._calls = BackgroundCalls("WandbLoggerCallback")
        self._runs: dict[str, Any] = {}  # trial id -> wandb Run (tracker side)

    def setup(self, *args: Any, **kwargs: Any) -> None:
        """Check the project and set the API key before any trial starts."""
        owner = type(self).__name__
        self.project = (
            self.project or os.environ.get(WANDB_PROJECT_ENV_VAR) or os.environ.get("WANDB_PROJECT")
        )
        if not self.project:
            raise ValueError(
                f"{owner}(project=None): name the W&B project, with project=... or the "
                f"{WANDB_PROJECT_ENV_VAR} environment variable."
            )
        self.group = self.group or os.environ.get(WANDB_GROUP_ENV_VAR)
        _set_api_key(owner, self.api_key_path, self.api_key)

    # The driver's side: cheap, copies what the tracker needs and hands it over.

    def log_trial_start(self, trial: Trial) -> None:
        if trial.trial_id in self._started:
            return  # resumed after a pause: same run
        if not self.project:
            self.setup()
        _wandb()  # a missing wandb fails here, on the driver
        self._started.add(trial.trial_id)
        experiment = os.path.basename(trial.experiment_path or "") or None
        init = {
            "id": trial.trial_id,
            "name": str(trial),
            "project": self.project,
            "group": self.group or experiment,
            "config": dict(trial.config or {}),
            "dir": trial.local_path,
            "resume": "allow",
            "reinit": "create_new",  # one run per trial, several at once
            **self.kwargs,
        }
        self._calls.submit(self._init_run, trial.trial_id, init)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        if trial.trial_id not in self._started:
            self.log_trial_start(trial)
        flat = flatten_result(result, self._EXCLUDE)
        config = None
        if self.log_config and isinstance(result.get(R.CONFIG), Mapping):
            config = dict(result[R.CONFIG])
        excludes = self.excludes
        metrics = {
            k: v
            for k, v in flat.items()
            if _loggable(v) and k not in excludes and k.split("/", 1)[0] not in excludes
        }
        step = flat.get(R.TRAINING_ITERATION)
        self._calls.submit(self._log, trial.trial_id, metrics, config, step)

    def on_checkpoint(
        self, iteration: int, trials: list[Trial], trial: Trial, checkpoint: Any, **info: Any
    ) -> None:
        path = getattr(checkpoint, "path", None)
        if self.upload_checkpoints and trial.trial_id in self._started and path:
            self._calls.submit(self._upload, trial.trial_id, path)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        if trial.trial_id in self._started:
            self._started.discard(trial.trial_id)
            self._calls.submit(self._finish, trial.trial_id, 1 if failed else 0)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """Finish the runs still open and wait for the tracker to have everything."""
        for trial_id in self._started:
            self._calls.submit(self._finish, trial_id, 0)
        self._started.clear()
        self._calls.drain()

    # The tracker's side, on the background thread, in order.

    def _init_run(self, trial_id: str, init: dict[str, Any]) -> None:
        if init.get("dir"):
            os.makedirs(init["dir"], exist_ok=True)
        self._runs[trial_id] = _wandb().init(**init)

    def _log(
        self, trial_id: str, metrics: dict[str, Any], config: dict[str, Any] | None, step: Any
    ) -> None:
        run = self._runs[trial_id]
        if config is not None:
            run.config.update(config, allow_val_change=True)
        # W&B's step is the training iteration, as Ray Tune logs it (W&B then drops a
        # step that goes back, after a PBT exploit or a restore, as there).
        run.log(metrics, step=step if isinstance(step, int) else None)

    def _upload(self, trial_id: str, path: str) -> None:
        if not os.path.isdir(path):
            return
        artifact = _wandb().Artifact(name=f"checkpoint_{trial_id}", type="model")
        artifact.add_dir(path)
        self._runs[trial_id].log_artifact(artifact)

    def _finish(self, trial_id: str, exit_code: int) -> None:
        run = self._runs.pop(trial_id, None)
        if run is not None:
            run.finish(exit_code=exit_code)


def setup_wandb(
    config: dict[str, Any] | None = None,
    api_key: str | None = None,
    api_key_file: str | None = None,
    rank_zero_only: bool = True,
    **kwargs: Any,
) -> Any:
    """Start a W&B run inside a trainable and return it (``wandb.init``'s ``Run``).

    The run gets the trial's id, name and experiment (as group) unless ``kwargs`` say
    otherwise, and ``config`` as its config (a ``"wandb"`` entry in ``config`` is taken
    as more ``wandb.init`` arguments, as in Ray).

    Args:
        config: The trial's config.
        api_key: The W&B API key.
        api_key_file: A file holding the W&B API key.
        rank_zero_only: Kept for Ray's signature: a Tune trial is one worker, rank 0.
        **kwargs: Passed to ``wandb.init`` (``project``, ``mode``, ``tags``...).

    Returns:
        The ``wandb`` run; call ``run.log({...})`` and ``run.finish()`` on it.
    """
    from fasttune.trainable.context import get_context

    wandb = _wandb()
    _set_api_key("setup_wandb", api_key_file, api_key)
    config = dict(config or {})
    extra = config.pop("wandb", None)
    context = get_context()
    init: dict[str, Any] = {
        "id": context.get_trial_id(),
        "name": context.get_trial_name(),
        "group": context.get_experiment_name(),
        "project": os.environ.get(WANDB_PROJECT_ENV_VAR) or os.environ.get("WANDB_PROJECT"),
        "config": config,
        "resume": "allow",
        "reinit": "create_new",
    }
    if isinstance(extra, Mapping):
        init.update(extra)
    init.update(kwargs)
    if init.get("dir") is None and not os.environ.get("WANDB_DIR"):
        # The trial's working directory, as each Ray actor's is its own: W&B keeps the
        # directory of a process's first run, and a reused worker hosts many trials.
        init["dir"] = os.getcwd()
    return wandb.init(**{k: v for k, v in init.items() if v is not None})
