"""Build the ``TrialLaunch`` record that starts (or resumes) a trial on an executor."""

from __future__ import annotations

import os
from typing import Any

from fasttune import result as R
from fasttune._internal.run_spec import RunSpec
from fasttune._internal.trainable_resolution import is_function_trainable
from fasttune.executors.base import Allocation, TrialLaunch
from fasttune.executors.flow_control import CALLBACKS_ONLY, UNDECIDED
from fasttune.experiment.trial import ResumePoint, Trial
from fasttune.logger.trial_result_files import TrialFilesSpec
from fasttune.storage.filesystem import ensure_dir
from fasttune.trainable.checkpoint_io import CHECKPOINT_DIR_PATTERN, read_state
from fasttune.trainable.trial_info import STDERR_FILE, STDOUT_FILE, TRIAL_INFO, TrialInfo


def next_checkpoint_index(trial: Trial) -> int:
    """The index the trial's next reported checkpoint directory gets (never reused).

    Above every checkpoint in the trial directory and every one the trial tracks (a
    restored remote experiment's staging directory holds none of them).
    """
    indices = [-1]
    manager = trial.checkpoint_manager
    if manager is not None:
        for tracked in manager.to_json()["checkpoints"]:
            match = CHECKPOINT_DIR_PATTERN.fullmatch(tracked["dir_name"])
            if match:
                indices.append(int(match.group(1)))
    trial_dir = trial.local_path
    try:
        names = os.listdir(trial_dir) if trial_dir else []
    except (FileNotFoundError, NotADirectoryError):
        names = []  # a new trial: its worker makes the directory
    for name in names:
        match = CHECKPOINT_DIR_PATTERN.fullmatch(name)
        if match:
            indices.append(int(match.group(1)))
    return max(indices) + 1


def resume_point(trial: Trial, restore_path: str | None) -> ResumePoint | None:
    """Where a trial that ran before starts again (None for a first start).

    From ``restore_path``'s checkpoint: the metrics it was registered with, else the
    iteration its saved state records; from scratch (no checkpoint): iteration 0, when
    it reported or left result files before (a driver killed before it recorded any).
    """
    if not restore_path:
        return ResumePoint(0, 0) if trial.last_result or _has_result_files(trial) else None
    manager = trial.checkpoint_manager
    metrics = None
    if manager is not None:
        metrics = manager.metrics_of(os.path.basename(os.path.normpath(restore_path)))
    if metrics is None:
        state = read_state(restore_path) or {}
        metrics = dict(state.get("last_result") or {})
        metrics.setdefault(R.TRAINING_ITERATION, state.get("iteration", 0))
    iteration = int(metrics.get(R.TRAINING_ITERATION) or 0)
    return ResumePoint(iteration, int(metrics.get(R.TIMESTEPS_TOTAL) or iteration))


def _has_result_files(trial: Trial) -> bool:
    """Whether the trial wrote results before (a run killed before it recorded any)."""
    trial_dir = trial.local_path
    if not trial_dir:
        return False  # a new trial: its directory is not even named yet
    for name in (R.EXPR_RESULT_FILE, R.EXPR_PROGRESS_FILE):
        try:
            if os.path.getsize(os.path.join(trial_dir, name)) > 0:
                return True
        except OSError:
            pass
    return False


def make_launch(
    spec: RunSpec,
    trial: Trial,
    allocation: Allocation,
    restore_path: str | None,
    *,
    first_start: bool = False,
) -> TrialLaunch:
    """The launch of ``trial``; ``first_start``: created by this run and never launched,
    so nothing of it is on disk yet (its first checkpoint is number 0)."""
    trial_dir = trial.init_local_path()
    if spec.result_files is None:  # else the worker makes it, and writes the files
        ensure_dir(trial_dir)
    config: dict[str, Any] = dict(trial.config)
    config[TRIAL_INFO] = TrialInfo(
        trial_id=trial.trial_id,
        trial_name=str(trial),
        experiment_name=spec.name,
        trial_dir=trial_dir,
        experiment_id=spec.experiment_id,
        resources=trial.placement_group_factory,
        checkpoint_index=0 if first_start else next_checkpoint_index(trial),
    )
    stdout_file, stderr_file = spec.log_to_file
    if stdout_file:
        config[STDOUT_FILE] = stdout_file
    if stderr_file:
        config[STDERR_FILE] = stderr_file
    return TrialLaunch(
        trial_id=trial.trial_id,
        trainable_key=spec.trainable_key,
        trainable_blob=spec.trainable_blob,
        config=config,
        trial_dir=trial_dir,
        restore_path=restore_path,
        allocation=allocation,
        initial_credit=spec.flow.credit,
        lookahead_s=spec.flow.lookahead_s,
        max_buffer_length=spec.flow.max_buffer_length,
        buffer_time_s=spec.flow.buffer_time_s,
        chdir=spec.chdir,
        reuse=spec.reuse_actors,
        checkpoint_frequency=trial.checkpoint_frequency,
        stop_criteria={k: v for k, v in trial.stopping_criterion.items() if not callable(v)},
        storage=spec.storage.mirror
        if spec.storage is not None and spec.storage.is_remote
        else None,
        result_files=_result_files(spec, trial),
        last_result_only=spec.last_result_only,
        stop_when_done=_stops_when_done(spec),
    )


def _stops_when_done(spec: RunSpec) -> bool:
    """Whether a done trial stops by itself, without a stop command: nothing to save at
    the end, and no decision can come on a result (the flow says so, wherever the
    files are written); with the user's callbacks reading results, only for a function,
    whose save on a callback's request would add no checkpoint."""
    if spec.checkpoint_at_end:
        return False
    if spec.flow == UNDECIDED:
        return True
    return spec.flow == CALLBACKS_ONLY and is_function_trainable(spec.trainable_cls)


def _result_files(spec: RunSpec, trial: Trial) -> TrialFilesSpec | None:
    """What the worker writes of the trial's result files (None: the driver does)."""
    kinds = spec.result_files
    if kinds is None:
        return None
    return TrialFilesSpec(
        kinds=kinds,
        experiment_tag=trial.experiment_tag,
        hparams=trial.evaluated_params or None,
        resume_point=trial.resume_point,
        required_metrics=spec.required_metrics,
    )
