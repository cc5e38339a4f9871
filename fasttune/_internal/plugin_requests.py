"""Carry out what schedulers asked for through the controller view.

Requests are queued by :class:`~fasttune._internal.controller_view.ControllerView`
while a plugin hook runs, and applied here once it has returned.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fasttune.experiment.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from fasttune._internal.controller import TuneController


def apply_request(ctl: TuneController, action: str, trial: Trial, options: dict[str, Any]) -> None:
    if action == "stop":
        if trial.trial_id in ctl._launched:
            ctl._stop_trial(trial, TrialStatus.TERMINATED)
        elif not trial.is_finished():
            ctl._transition(trial, TrialStatus.TERMINATED)
            ctl._complete(trial)
    elif action == "pause":
        if trial.trial_id in ctl._launched:
            ctl._stop_trial(trial, TrialStatus.PAUSED, save=options.get("should_checkpoint", True))
    elif action == "save":
        if trial.trial_id in ctl._launched and trial.trial_id not in ctl._stopping:
            ctl.spec.executor.save_trial(trial.trial_id)
    elif action == "unpause":
        if trial.status is TrialStatus.PAUSED:
            ctl._transition(trial, TrialStatus.PENDING)
    elif action == "exploit":
        ctl.restart_trial(trial, save=False, change=_exploit(options))
    elif action == "resources":
        ctl.restart_trial(trial, save=True, change=_new_resources(options["resources"]))
    else:
        raise ValueError(f"Unknown plugin request {action!r}")


def _exploit(options: dict[str, Any]) -> Any:
    checkpoint = options["checkpoint"]
    path = getattr(checkpoint, "path", checkpoint)

    def change(trial: Trial) -> None:
        trial.set_config(options["config"])
        if options.get("experiment_tag") is not None:
            trial.set_experiment_tag(options["experiment_tag"])
        trial.restore_path = None
        if path is not None:
            # The donor's checkpoint becomes this trial's latest one: copied into its own
            # directory, so a retry or Tuner.restore resumes from it and the donor's
            # num_to_keep cannot delete it underneath.
            trial.restore_path = adopt_checkpoint(trial, os.fspath(path))

    return change


def adopt_checkpoint(trial: Trial, source: str) -> str:
    """Copy the checkpoint directory ``source`` into ``trial``'s directory and register it."""
    import shutil

    from fasttune._internal.launcher import next_checkpoint_index
    from fasttune.trainable.checkpoint_io import checkpoint_dir_name

    trial_dir = trial.init_local_path()
    os.makedirs(trial_dir, exist_ok=True)
    name = checkpoint_dir_name(next_checkpoint_index(trial))
    target = os.path.join(trial_dir, name)
    shutil.copytree(source, target)
    removed = trial.checkpoint_manager.register(name, dict(trial.last_result))
    trial.checkpoint_manager.delete_files(removed)
    return target


def _new_resources(resources: Any) -> Any:
    from fasttune.execution.placement_groups import normalize_resources

    pgf = normalize_resources(resources)

    def change(trial: Trial) -> None:
        trial.placement_group_factory = pgf

    return change
