"""A small real controller view over a list of trials, for decision-level scheduler tests."""

from __future__ import annotations

from typing import Any

from fasttune.experiment.trial import Trial, TrialStatus


class TrialListView:
    """Implements the ``ControllerView`` protocol over ``trials``; records requests."""

    def __init__(self, trials: list[Trial] | None = None):
        self.trials = list(trials or [])
        self.requests: list[tuple[str, str]] = []

    def get_trials(self) -> list[Trial]:
        return list(self.trials)

    def get_live_trials(self) -> list[Trial]:
        return [t for t in self.trials if not t.is_finished()]

    def get_waiting_trials(self):
        return [t for t in self.trials if t.status in (TrialStatus.PENDING, TrialStatus.PAUSED)]

    def has_resources_for_trial(self, trial: Trial) -> bool:
        return True

    search_alg = None

    def get_total_resources(self) -> dict[str, float]:
        return {"CPU": 2.0}

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        self.requests.append(("pause", trial.trial_id))

    def stop_trial(self, trial: Trial) -> None:
        self.requests.append(("stop", trial.trial_id))

    def unpause_trial(self, trial: Trial) -> None:
        self.requests.append(("unpause", trial.trial_id))

    def save_trial(self, trial: Trial) -> None:
        self.requests.append(("save", trial.trial_id))

    def exploit_trial(
        self,
        trial: Trial,
        checkpoint: Any,
        new_config: dict[str, Any],
        new_experiment_tag: str | None = None,
    ) -> None:
        self.requests.append(("exploit", trial.trial_id))

    def set_trial_resources(self, trial: Trial, resources: Any) -> None:
        self.requests.append(("resources", trial.trial_id))


def make_trials(*trial_ids: str, status: TrialStatus = TrialStatus.RUNNING) -> list[Trial]:
    trials = []
    for trial_id in trial_ids:
        trial = Trial("train", trial_id=trial_id)
        trial.set_status(status)
        trials.append(trial)
    return trials
