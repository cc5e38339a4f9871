"""Decide what each trial of a restored experiment does next."""

from __future__ import annotations

import logging
from typing import Any

from fasttune._internal.experiment_state import LoadedExperiment
from fasttune._internal.trial_state import trial_from_state
from fasttune.experiment.trial import Trial, TrialStatus

logger = logging.getLogger(__name__)


def restored_trials(
    loaded: LoadedExperiment,
    spec: Any,
    *,
    resume_unfinished: bool,
    resume_errored: bool,
    restart_errored: bool,
) -> list[Trial]:
    """Trials rebuilt from disk, with their status and restore point set for the new run.

    Trials created after the search state was last saved never started (the state is
    saved before a trial may start); they are dropped and the searcher suggests them
    again.
    """
    states = loaded.trials
    if loaded.search_state is not None and len(states) > loaded.search_num_trials:
        for state in states[loaded.search_num_trials :]:
            if state["status"] != TrialStatus.PENDING.value:
                raise RuntimeError(
                    f"Experiment state is inconsistent: trial {state['trial_id']} ran but the "
                    "search state does not know it."
                )
        states = states[: loaded.search_num_trials]
    trials = []
    for state in states:
        trial = trial_from_state(
            state, spec.experiment_path, config=loaded.configs.get(state["trial_id"])
        )
        spec.trial_factory.attach(trial)
        _decide(trial, resume_unfinished, resume_errored, restart_errored)
        trials.append(trial)
    return trials


def _decide(
    trial: Trial, resume_unfinished: bool, resume_errored: bool, restart_errored: bool
) -> None:
    latest = trial.checkpoint_manager.latest_checkpoint
    if trial.status is TrialStatus.TERMINATED:
        return
    if trial.status is TrialStatus.ERROR:
        if restart_errored:
            trial.restore_path = None
            trial.checkpoint_manager.load_json({"order": 0, "checkpoints": []})
            trial.num_failures = 0
            trial.status = TrialStatus.PENDING
        elif resume_errored:
            trial.restore_path = latest.path if latest else None
            trial.status = TrialStatus.PENDING
        return
    if resume_unfinished:
        trial.restore_path = latest.path if latest else None
        trial.status = TrialStatus.PENDING
    else:
        trial.status = TrialStatus.TERMINATED


def restore_plugin_state(controller: Any, loaded: LoadedExperiment) -> None:
    """Give searcher, scheduler and callbacks back the state saved with the experiment."""
    spec = controller.spec
    if loaded.search_state is not None:
        spec.search_alg.set_state(loaded.search_state)
        # Trials that finished after the search state was last saved: tell it now.
        for trial in controller.trials:
            if trial.is_finished() and trial.trial_id not in loaded.search_completed:
                spec.search_alg.on_trial_complete(
                    trial.trial_id, trial.last_result, error=trial.status == TrialStatus.ERROR
                )
        controller.search_completed.update(t.trial_id for t in controller.trials if t.is_finished())
    if loaded.scheduler_state is not None and hasattr(spec.scheduler, "set_state"):
        spec.scheduler.set_state(loaded.scheduler_state)
    else:
        for trial in controller.trials:
            spec.scheduler.on_trial_add(controller.view, trial)
    if loaded.callback_state is not None:
        spec.callbacks.set_state(loaded.callback_state)
