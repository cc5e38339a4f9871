"""The read-only view of the controller that schedulers and searchers receive.

Plugins keep Ray's signatures (``on_trial_result(tune_controller, trial, result)``)
but get this view instead of the controller: they can look at trials and ask for
a few actions, which the controller carries out after the hook returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fasttune._internal.plugin_requests import (
    Exploit,
    Pause,
    PluginRequest,
    Save,
    SetResources,
    Stop,
    Unpause,
)
from fasttune.experiment.trial import Trial, TrialStatus


class ControllerView:
    """What a plugin may see and request while the experiment runs."""

    def __init__(
        self,
        trials: list[Trial],
        has_resources: Callable[[Trial], bool],
        search_alg: Any = None,
        total_resources: Callable[[], dict[str, float]] | None = None,
        waiting_trials: Callable[[], list[Trial]] | None = None,
        live_trials: Callable[[], list[Trial]] | None = None,
    ):
        self._trials = trials
        self._has_resources = has_resources
        self._search_alg = search_alg
        self._total_resources = total_resources
        self._waiting_trials = waiting_trials
        self._live_trials = live_trials
        self.requests: list[PluginRequest] = []
        # True while a restore shows a restored scheduler the results it missed: what it
        # decides then was decided before the crash, and logged then.
        self.replaying = False

    @property
    def search_alg(self) -> Any:
        """The experiment's search algorithm (as Ray's ``TuneController.search_alg``)."""
        return self._search_alg

    def get_total_resources(self) -> dict[str, float]:
        """This machine's resources as the runner counts them."""
        return dict(self._total_resources()) if self._total_resources else {}

    def get_trials(self) -> list[Trial]:
        """Every trial of the experiment, in creation order (the live list: do not change it)."""
        return self._trials

    def get_live_trials(self) -> list[Trial]:
        """Trials not finished yet, in creation order.

        Costs O(live trials) when the controller keeps the live set, so schedulers may
        call it on every result however many trials have finished.
        """
        if self._live_trials is not None:
            return self._live_trials()
        return [t for t in self._trials if not t.is_finished()]

    def get_waiting_trials(self) -> list[Trial]:
        """PENDING and PAUSED trials, in creation order: the candidates to start next.

        Costs O(waiting trials), not O(all trials).
        """
        if self._waiting_trials is not None:
            return self._waiting_trials()
        waiting = (TrialStatus.PENDING, TrialStatus.PAUSED)
        return [t for t in self._trials if t.status in waiting]

    def has_resources_for_trial(self, trial: Trial) -> bool:
        return self._has_resources(trial)

    # Requests, executed by the controller once the current hook has returned.
    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        self.requests.append(Pause(trial, should_checkpoint))

    def stop_trial(self, trial: Trial) -> None:
        self.requests.append(Stop(trial))

    def save_trial(self, trial: Trial) -> None:
        """Checkpoint a running trial right after its current result (it keeps running)."""
        self.requests.append(Save(trial))

    def unpause_trial(self, trial: Trial) -> None:
        """Make a PAUSED trial runnable again (it resumes from its checkpoint)."""
        self.requests.append(Unpause(trial))

    def exploit_trial(
        self,
        trial: Trial,
        checkpoint: Any,
        new_config: dict[str, Any],
        new_experiment_tag: str | None = None,
    ) -> None:
        """Restart ``trial`` from ``checkpoint`` (e.g. a better trial's) with ``new_config``.

        A running trial is stopped without saving, then resumes from ``checkpoint``
        (through ``Trainable.reset`` when its worker is reused, else a restart).
        """
        self.requests.append(Exploit(trial, checkpoint, new_config, new_experiment_tag))

    def set_trial_resources(self, trial: Trial, resources: Any) -> None:
        """Give ``trial`` new resources: it is saved, stopped and restarted with them."""
        self.requests.append(SetResources(trial, resources))

    def _set_trial_status(self, trial: Trial, status: TrialStatus) -> None:
        # Ray's schedulers flip PAUSED trials to PENDING this way.
        if trial.status is TrialStatus.PAUSED and status == TrialStatus.PENDING:
            self.unpause_trial(trial)
        else:
            raise ValueError(f"Plugins may not set trial status to {status}")

    def take_requests(self) -> list[PluginRequest]:
        """The requests made since the last call, oldest first."""
        requests, self.requests = self.requests, []
        return requests
