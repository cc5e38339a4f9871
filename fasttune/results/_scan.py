"""Rebuild ``Trial`` records by scanning an experiment directory's trial folders.

Used when an experiment has no state files (or they cannot be read): every
immediate subdirectory holding ``params.json`` or ``result.json`` is a trial.
"""

from __future__ import annotations

from typing import Any

from fasttune import result as R
from fasttune._internal.checkpoint_manager import CheckpointManager
from fasttune._support.gc_pause import paused_gc
from fasttune.error import ExperimentNotFoundError
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.results import _trial_files as files
from fasttune.storage.filesystem import FileSystem
from fasttune.utils.util import flatten_dict

History = tuple[list[dict[str, Any]], str | None]


def is_trial_dir(fs: FileSystem, path: str) -> bool:
    return fs.exists(fs.join(path, R.EXPR_PARAM_FILE)) or fs.exists(
        fs.join(path, R.EXPR_RESULT_FILE)
    )


@paused_gc()  # every trial and its results at once (see gc_pause)
def scan_trials(
    fs: FileSystem, experiment_path: str, *, pickles: bool = True
) -> tuple[list[Trial], dict[str, History]]:
    """The trials found under ``experiment_path``, and each one's results by trial id.

    With ``pickles=False`` configs come from ``params.json`` only (nothing unpickled).

    Raises:
        ExperimentNotFoundError: ``experiment_path`` is not a directory (a
            ``FileNotFoundError``, and a ``ValueError`` as Ray's ExperimentAnalysis raises).
        ValueError: It holds no trial directory (the message lists what it holds).
    """
    if not fs.isdir(experiment_path):
        raise ExperimentNotFoundError(
            f"Experiment directory {experiment_path!r} does not exist. Pass the experiment "
            "directory, <storage_path>/<name>."
        )
    names = [n for n in fs.listdir(experiment_path) if not n.startswith(".")]
    trial_dirs = [n for n in names if is_trial_dir(fs, fs.join(experiment_path, n))]
    if not trial_dirs:
        subdirs = [n for n in names if fs.isdir(fs.join(experiment_path, n))]
        raise ValueError(
            f"No trial directories (with {R.EXPR_PARAM_FILE} or {R.EXPR_RESULT_FILE}) in "
            f"{experiment_path!r}. Pass the experiment directory, <storage_path>/<name>; "
            f"this one holds: {subdirs[:20]}."
        )
    trials, histories = [], {}
    for name in trial_dirs:
        trial, history = _load_trial(fs, experiment_path, name, pickles)
        trials.append(trial)
        histories[trial.trial_id] = history
    trials.sort(key=lambda t: (t.trial_id, t.relative_logdir or ""))
    return trials, histories


def _load_trial(
    fs: FileSystem, experiment_path: str, name: str, pickles: bool = True
) -> tuple[Trial, History]:
    path = fs.join(experiment_path, name)
    results, source = files.read_results(fs, path)
    last = results[-1] if results else {}
    trial_id = str(last.get(R.TRIAL_ID) or name)
    marker = f"_{trial_id}"
    trainable_name = name[: name.index(marker)] if marker in name else name
    config = files.read_config(fs, path, pickles=pickles)
    trial = Trial(
        trainable_name or name,
        config=config,
        trial_id=trial_id,
        experiment_tag=str(last.get(R.EXPERIMENT_TAG) or ""),
        experiment_path=experiment_path,
        custom_trial_name=None if marker in name else name,
    )
    trial.relative_logdir = name
    for result in results:  # per-metric statistics over the whole history
        trial.update_last_result(flatten_dict({k: v for k, v in result.items() if k != R.CONFIG}))
    if results:
        trial.last_result = dict(last)
        trial.last_result.setdefault(R.CONFIG, config)
    error_txt = fs.join(path, R.EXPR_ERROR_FILE)
    error_pkl = fs.join(path, R.EXPR_ERROR_PICKLE_FILE)
    trial.error_file = error_txt if fs.exists(error_txt) else None
    trial.pickled_error_file = error_pkl if fs.exists(error_pkl) else None
    failed = trial.error_file or trial.pickled_error_file
    trial.status = TrialStatus.ERROR if failed else TrialStatus.TERMINATED
    manager = CheckpointManager(path)
    for dir_name, metrics in files.read_checkpoints(fs, path, results):
        manager.register(dir_name, metrics)
    trial.checkpoint_manager = manager
    return trial, (results, source)
