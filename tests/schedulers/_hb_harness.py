"""A small controller stand-in for HyperBand decision tests.

``View`` implements the ``ControllerView`` protocol over a list of real ``Trial``
records and queues requests; ``Driver`` plays the controller's part: it starts the
trial the scheduler chooses, feeds results, applies decisions and requests the way
``TuneController`` does (PAUSE -> PAUSED; STOP -> TERMINATED then
``on_trial_complete``; a stop request on a waiting trial ends it at once).
"""

from __future__ import annotations

from typing import Any

from fasttune.experiment.trial import Trial, TrialStatus


class View:
    """The read-only view plus request queue a scheduler receives."""

    def __init__(self) -> None:
        self.trials: list[Trial] = []
        self.without_resources: set[str] = set()
        self.requests: list[tuple[str, Trial]] = []

    def get_trials(self) -> list[Trial]:
        return list(self.trials)

    def get_live_trials(self) -> list[Trial]:
        return [t for t in self.trials if not t.is_finished()]

    def get_waiting_trials(self):
        return [t for t in self.trials if t.status in (TrialStatus.PENDING, TrialStatus.PAUSED)]

    def has_resources_for_trial(self, trial: Trial) -> bool:
        return trial.trial_id not in self.without_resources

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        self.requests.append(("pause", trial))

    def stop_trial(self, trial: Trial) -> None:
        self.requests.append(("stop", trial))

    def take_requests(self) -> list[tuple[str, Trial]]:
        requests, self.requests = self.requests, []
        return requests


class Driver:
    """Drives a scheduler with hand-made results (metric ``score``, time ``t``)."""

    def __init__(self, scheduler: Any, view: View | None = None, metric: str = "score"):
        self.scheduler = scheduler
        self.view = view or View()
        self.metric = metric
        self.decisions: list[tuple[str, float, str]] = []
        self.stopped_by_request: list[str] = []

    def add(self, count: int, prefix: str = "t") -> list[Trial]:
        made = []
        for _ in range(count):
            trial = Trial("train", trial_id=f"{prefix}{len(self.view.trials)}")
            self.view.trials.append(trial)
            self.scheduler.on_trial_add(self.view, trial)
            made.append(trial)
        return made

    def start_next(self) -> Trial | None:
        """Start the trial the scheduler chooses (as the controller's launch)."""
        trial = self.scheduler.choose_trial_to_run(self.view)
        self.settle()
        if trial is not None:
            trial.set_status(TrialStatus.RUNNING)
        return trial

    def report(self, trial: Trial, t: float, score: float, **extra: Any) -> str:
        """Feed one result; apply the decision and any requests; return the decision."""
        result = {"t": t, self.metric: score, **extra}
        decision = self.scheduler.on_trial_result(self.view, trial, result)
        self.decisions.append((trial.trial_id, t, decision))
        trial.last_result = result
        if decision == "PAUSE":
            trial.set_status(TrialStatus.PAUSED)
            trial.restore_path = f"{trial.trial_id}/checkpoint_{t}"  # saved at the pause
        elif decision == "STOP":
            trial.set_status(TrialStatus.TERMINATED)
            self.scheduler.on_trial_complete(self.view, trial, result)
        self.settle()
        return decision

    def settle(self) -> None:
        """Apply queued requests as the controller does after a hook returns."""
        while self.view.requests:
            for action, trial in self.view.take_requests():
                assert action == "stop", action
                if trial.status in (TrialStatus.PENDING, TrialStatus.PAUSED):
                    trial.set_status(TrialStatus.TERMINATED)
                    self.stopped_by_request.append(trial.trial_id)
                    self.scheduler.on_trial_complete(self.view, trial, trial.last_result)
                # A RUNNING trial (being paused) ignores it, as the controller does.

    def run_to(self, trial: Trial, end: int, score: float, start: int = 1) -> str:
        """Report t = start..end (stopping early on a non-CONTINUE decision)."""
        decision = "CONTINUE"
        for t in range(start, end + 1):
            decision = self.report(trial, t, score)
            if decision != "CONTINUE":
                break
        return decision

    def fail(self, trial: Trial) -> None:
        trial.set_status(TrialStatus.ERROR)
        self.scheduler.on_trial_error(self.view, trial)
        self.settle()


def statuses(trials: list[Trial]) -> list[str]:
    return [str(t.status) for t in trials]
