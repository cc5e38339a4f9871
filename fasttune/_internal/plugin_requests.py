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
        trial.restore_path = os.fspath(path) if path is not None else None

    return change


def _new_resources(resources: Any) -> Any:
    from fasttune.execution.placement_groups import normalize_resources

    pgf = normalize_resources(resources)

    def change(trial: Trial) -> None:
        trial.placement_group_factory = pgf

    return change
