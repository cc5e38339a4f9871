"""Where each trial is in its life, and the only code that moves it.

Statuses are Ray's (:class:`TrialStatus`); the controller needs two more facts: whether
a RUNNING trial is *launched* (known to the executor, holding resources), and, while it
is being stopped, its *stop intent* (what it becomes once the executor confirms). This
class keeps those facts and changes them only through the transitions below. Each
transition does its own side effects, so no caller can forget one:

==========  ====================  ==========  =========================================
from        transition            to          side effects
==========  ====================  ==========  =========================================
(new)       :meth:`add`           PENDING     config logged; journal
PENDING,    :meth:`launch`        RUNNING     config logged if replaced; executor
                                              START; journal
PAUSED
PENDING     :meth:`queue`         PENDING **  config logged if replaced; executor QUEUE
PENDING **  :meth:`adopt`         RUNNING     journal (the executor started it behind
                                              the trial ahead, with its resources)
PENDING **  :meth:`unqueued`      PENDING     none (waiting again)
RUNNING     :meth:`stop`          RUNNING *   executor SAVE (if asked) and STOP
RUNNING *   :meth:`stopped`       intent      resources released; journal (a change
                                              waiting for the pause makes it PENDING)
RUNNING     :meth:`failed`        RUNNING     resources released (the failure policy
                                              then calls :meth:`retry` or :meth:`error`)
RUNNING     :meth:`retry`         PENDING     journal (one that failed while pausing:
                                              PAUSED, or its change applied and PENDING)
RUNNING     :meth:`error`         ERROR       journal
PENDING,    :meth:`end_waiting`   TERMINATED  journal
PAUSED
PAUSED      :meth:`unpause`       PENDING     journal
PENDING,    :meth:`restart`       PENDING     journal (after a change: new config...)
PAUSED
finished    :meth:`told`          finished    journal: the callbacks heard of the end
==========  ====================  ==========  =========================================

(*) still RUNNING, with a stop intent: PAUSE, TERMINATE or INTERRUPT (Ctrl-C: the
trial stays RUNNING on disk and ``Tuner.restore`` resumes it).
(**) *queued*: still PENDING to everyone (status, journal, callbacks), but neither
waiting nor launched: the executor holds its launch behind a running trial
(``Executor.queue_trial``) and starts it the moment that trial stops, without the
round trip through the controller; it holds no resources until then.

Invariants (checked by :meth:`_set_status` and the transitions):

- a trial is *waiting* (PENDING or PAUSED, not launched), *queued* (PENDING),
  *launched* (RUNNING) or finished (TERMINATED, ERROR); only an interrupted run leaves
  a trial RUNNING and not launched;
- a launched trial holds one allocation, released exactly once: when the executor
  confirms it stopped or failed;
- only a launched trial has a stop intent, at most one; TERMINATE overrides PAUSE;
- every status change is journaled at once (the store flushes result lines first);
- finished is final: nothing moves a TERMINATED or ERROR trial (restore does, before
  the run).

The plugin and callback notifications of a trial ending (scheduler, searcher,
``on_trial_complete``/``on_trial_error``) are the controller's: it calls them right
after the transition that ends the trial.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fasttune.experiment.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from fasttune._internal.experiment_state import ExperimentStateStore

PENDING, RUNNING, PAUSED = TrialStatus.PENDING, TrialStatus.RUNNING, TrialStatus.PAUSED
TERMINATED, ERROR = TrialStatus.TERMINATED, TrialStatus.ERROR

# Every status change the runner makes; anything else is a bug, raised at once.
ALLOWED_TRANSITIONS: dict[TrialStatus, frozenset[TrialStatus]] = {
    PENDING: frozenset({RUNNING, PENDING, TERMINATED}),
    PAUSED: frozenset({RUNNING, PENDING, TERMINATED}),
    RUNNING: frozenset({PENDING, PAUSED, TERMINATED, ERROR}),
    TERMINATED: frozenset(),
    ERROR: frozenset(),
}

Change = Callable[[Trial], None]


class StopIntent(enum.Enum):
    """What a trial being stopped becomes once the executor confirms."""

    PAUSE = "pause"  # PAUSED, resumable from the checkpoint saved on the way
    TERMINATE = "terminate"  # TERMINATED
    INTERRUPT = "interrupt"  # stays RUNNING on disk: the run was interrupted


class InvalidTransition(RuntimeError):
    """A status change outside :data:`ALLOWED_TRANSITIONS` (a bug in the runner)."""


class TrialLifecycle:
    """The trials of one run and their place in the lifecycle (see the module doc).

    Args:
        trials: The trials already known (a restored run), in creation order.
        positions: Creation position by trial id, shared with ``state`` (kept here).
        state: The experiment state store: every transition journals the trial, and a
            trial's config is logged whenever it is new (a new trial, a change).
        executor: Where trials run (``start_trial``, ``save_trial``, ``stop_trial``).
        resource_manager: Holds each launched trial's allocation (``release``).
    """

    def __init__(
        self,
        trials: Iterable[Trial],
        *,
        positions: dict[str, int],
        state: ExperimentStateStore,
        executor: Any,
        resource_manager: Any,
    ):
        self.trials: list[Trial] = list(trials)
        self.by_id = {t.trial_id: t for t in self.trials}
        # Creation order of each trial: waiting and live trials are listed in it.
        self.position = positions
        positions.update((t.trial_id, i) for i, t in enumerate(self.trials))
        self._state = state
        self._executor = executor
        self._resources = resource_manager
        self._waiting: dict[str, Trial] = {
            t.trial_id: t for t in self.trials if t.status in (PENDING, PAUSED)
        }
        self._waiting_order: list[Trial] | None = None  # _waiting sorted, while unchanged
        self._launched: set[str] = set()
        self._queued: dict[str, Trial] = {}
        self._restoring: set[str] = set()  # launched from a checkpoint, not started yet
        self._stopping: dict[str, StopIntent] = {}
        self._after_pause: dict[str, Change] = {}
        self._saving: set[str] = set()  # being stopped after a save not confirmed yet
        # The config last written to the configs log, per trial (PBT replaces configs).
        self._recorded_configs: dict[str, Any] = {}

    # ------------------------------------------------------------------ queries
    def is_launched(self, trial: Trial) -> bool:
        return trial.trial_id in self._launched

    @property
    def num_launched(self) -> int:
        return len(self._launched)

    @property
    def any_launched_or_stopping(self) -> bool:
        return bool(self._launched or self._stopping or self._queued)

    @property
    def any_queued(self) -> bool:
        return bool(self._queued)

    def is_queued(self, trial: Trial) -> bool:
        return trial.trial_id in self._queued

    def queued_trials(self) -> list[Trial]:
        """Queued trials in creation order."""
        return self._in_creation_order(self._queued.values())

    @property
    def any_waiting(self) -> bool:
        return bool(self._waiting)

    def stop_intent(self, trial: Trial) -> StopIntent | None:
        """The stop intent of a trial being stopped, None otherwise."""
        return self._stopping.get(trial.trial_id)

    def ends_whole(self, trial: Trial) -> bool:
        """Whether ``trial`` is being stopped for good with nothing left to save: all it
        was to give is in, so a failure now loses nothing."""
        trial_id = trial.trial_id
        return self._stopping.get(trial_id) is StopIntent.TERMINATE and trial_id not in self._saving

    def accepts_results(self, trial: Trial) -> bool:
        """Whether results of ``trial`` still count (it runs and is not being stopped)."""
        return trial.trial_id not in self._stopping and trial.status is RUNNING

    def num_pending(self) -> int:
        return sum(1 for t in self._waiting.values() if t.status is PENDING)

    def any_pending(self) -> bool:
        """Whether a trial is PENDING (the first waiting one, as a rule: O(1) then)."""
        return any(t.status is PENDING for t in self._waiting.values())

    def waiting_trials(self) -> list[Trial]:
        """PENDING and PAUSED trials in creation order, in O(waiting trials) (sorted
        again only after a change: the loop asks for them several times a step)."""
        if self._waiting_order is None:
            self._waiting_order = self._in_creation_order(self._waiting.values())
        return list(self._waiting_order)

    def live_trials(self) -> list[Trial]:
        """Unfinished trials in creation order, in O(live trials)."""
        by_id = self.by_id
        running = (by_id[i] for i in self._launched if i not in self._waiting)
        return self._in_creation_order([*self._waiting.values(), *self._queued.values(), *running])

    def launched_trials(self) -> list[Trial]:
        """Launched trials in creation order."""
        return self._in_creation_order(self.by_id[i] for i in self._launched)

    def _in_creation_order(self, trials: Iterable[Trial]) -> list[Trial]:
        return sorted(trials, key=lambda t: self.position[t.trial_id])

    # ------------------------------------------------------------------ transitions
    def add(self, trial: Trial) -> None:
        """A new PENDING trial joins the run."""
        self.position[trial.trial_id] = len(self.trials)
        self.trials.append(trial)
        self.by_id[trial.trial_id] = trial
        self._waiting[trial.trial_id] = trial
        self._waiting_order = None
        self._record_config(trial)
        self._state.record_trial(trial)

    def launch(self, trial: Trial, launch: Any) -> None:
        """Start a waiting trial on the executor with ``launch`` (its resources are held)."""
        self._record_config(trial)  # e.g. replaced by PBT while it waited
        self._executor.start_trial(launch)
        if launch.restore_path:
            self._restoring.add(trial.trial_id)
        self._launched.add(trial.trial_id)
        trial.ending_told = False  # a trial run again ends again
        self._set_status(trial, RUNNING, start=True)

    def queue(self, trial: Trial, after_trial_id: str, launch: Any) -> bool:
        """Queue a PENDING trial behind launched trial ``after_trial_id``; False (and
        nothing changed) when the executor cannot."""
        self._record_config(trial)
        if not self._executor.queue_trial(after_trial_id, launch):
            return False
        del self._waiting[trial.trial_id]
        self._waiting_order = None
        self._queued[trial.trial_id] = trial
        return True

    def adopt(self, trial: Trial) -> None:
        """A queued trial started behind the trial ahead (its resources are held)."""
        del self._queued[trial.trial_id]
        self._launched.add(trial.trial_id)
        trial.ending_told = False
        self._set_status(trial, RUNNING, start=True)

    def unqueued(self, trial: Trial) -> None:
        """A queued trial waits again (the executor gave it back)."""
        if self._queued.pop(trial.trial_id, None) is not None:
            self._waiting[trial.trial_id] = trial
            self._waiting_order = None

    def started(self, trial: Trial) -> bool:
        """The executor started ``trial``; True when it resumed from a checkpoint."""
        if trial.trial_id in self._restoring:
            self._restoring.discard(trial.trial_id)
            return True
        return False

    def stop(
        self, trial: Trial, intent: StopIntent, *, save: bool, after_pause: Change | None = None
    ) -> None:
        """Ask the executor to stop a launched trial (saving it first if ``save``).

        A trial already being stopped keeps its first intent, except that TERMINATE
        overrides PAUSE (a stop while pausing ends the trial). ``after_pause`` is a
        change applied once it has paused; the trial then waits PENDING.
        """
        trial_id = trial.trial_id
        if trial_id not in self._launched:
            return
        current = self._stopping.get(trial_id)
        if current is not None:
            if current is StopIntent.PAUSE and intent is StopIntent.TERMINATE:
                self._stopping[trial_id] = intent
                self._after_pause.pop(trial_id, None)
            return
        self._stopping[trial_id] = intent
        if after_pause is not None:
            self._after_pause[trial_id] = after_pause
        if save:
            self._saving.add(trial_id)
            self._executor.save_trial(trial_id)
        self._executor.stop_trial(trial_id)

    def saved(self, trial: Trial) -> None:
        """The executor confirmed a save (of a trial being stopped, or on request)."""
        self._saving.discard(trial.trial_id)

    def stopped(
        self, trial: Trial, *, interrupted: bool, nothing_to_tell: bool = False
    ) -> TrialStatus:
        """The executor stopped ``trial``: release it and apply its stop intent.

        With ``nothing_to_tell`` (no callback listens to endings) a trial that ends is
        journaled as told at once, one record instead of two (see :meth:`told`).

        Returns:
            The trial's status now. With ``interrupted`` (and no pause intent) it stays
            RUNNING on disk, for ``Tuner.restore`` to resume.
        """
        intent = self._stopping.pop(trial.trial_id, StopIntent.TERMINATE)
        self._release(trial)
        if intent is StopIntent.INTERRUPT or (interrupted and intent is not StopIntent.PAUSE):
            self._after_pause.pop(trial.trial_id, None)
            self._state.record_trial(trial)
            return trial.status
        change = self._after_pause.pop(trial.trial_id, None)
        if not self._paused(trial, intent, change):
            trial.ending_told = nothing_to_tell
            self._set_status(trial, TERMINATED)
        return trial.status

    def failed(self, trial: Trial) -> tuple[StopIntent | None, Change | None]:
        """The trial's worker failed: release it; returns the stop intent it had and the
        change it was to get once paused (pass both to :meth:`retry`)."""
        intent = self._stopping.pop(trial.trial_id, None)
        change = self._after_pause.pop(trial.trial_id, None)
        self._release(trial)
        return intent, change

    def retry(
        self, trial: Trial, intent: StopIntent | None = None, change: Change | None = None
    ) -> None:
        """A failed trial waits to run again (from ``trial.restore_path`` if set).

        One that failed while being paused ends up as the pause would have left it:
        PAUSED, or with its ``change`` applied and PENDING (a scheduler that paused it
        still decides when it goes on).
        """
        if not self._paused(trial, intent, change):
            self._set_status(trial, PENDING)

    def _paused(self, trial: Trial, intent: StopIntent | None, change: Change | None) -> bool:
        """Leave a trial that was being paused as the pause does: with the change it was
        paused for applied and PENDING, else PAUSED. False if it was not being paused."""
        if change is not None:
            self._change(trial, change)
            self._set_status(trial, PENDING)
        elif intent is StopIntent.PAUSE:
            self._set_status(trial, PAUSED)
        else:
            return False
        return True

    def error(self, trial: Trial) -> None:
        """A failed trial ends in ERROR."""
        self._set_status(trial, ERROR)

    def told(self, trial: Trial) -> None:
        """The callbacks were told that ``trial`` ended: journal it, so that a restore
        tells them only about endings they may have missed (at least once)."""
        if not trial.ending_told:  # else journaled as told when it ended (nothing to tell)
            trial.ending_told = True
            self._state.record_trial(trial)
        if trial.is_finished():
            trial.compact()  # told and journaled: it keeps less from now on

    def end_waiting(self, trial: Trial) -> None:
        """A PENDING or PAUSED trial ends without running again."""
        self._set_status(trial, TERMINATED)

    def unpause(self, trial: Trial) -> None:
        if trial.status is PAUSED:
            self._set_status(trial, PENDING)

    def restart(self, trial: Trial, change: Change, *, save: bool) -> None:
        """Apply ``change`` to ``trial`` and make it PENDING.

        A launched trial is paused first (saving if ``save``) and changed once paused;
        one already stopping for good is left alone. Finished trials are left alone.
        """
        if trial.trial_id in self._launched:
            if self._stopping.get(trial.trial_id, StopIntent.PAUSE) is not StopIntent.PAUSE:
                return
            self._after_pause[trial.trial_id] = change
            self.stop(trial, StopIntent.PAUSE, save=save)
        elif not trial.is_finished():
            self._change(trial, change)
            self._set_status(trial, PENDING)

    def interrupt_all(self) -> None:
        """Stop every launched trial for an interrupted run (they stay RUNNING on disk)."""
        for trial in self.launched_trials():
            if trial.trial_id not in self._stopping:
                self._stopping[trial.trial_id] = StopIntent.INTERRUPT
                self._executor.stop_trial(trial.trial_id)

    def release_all(self) -> None:
        """Give back every allocation (the executor has shut down)."""
        for trial_id in list(self._launched):
            self._resources.release(trial_id)
        self._launched.clear()

    # ------------------------------------------------------------------ internals
    def _change(self, trial: Trial, change: Change) -> None:
        change(trial)
        self._record_config(trial)

    def _record_config(self, trial: Trial) -> None:
        if trial.config is not self._recorded_configs.get(trial.trial_id):
            self._state.record_config(trial.trial_id, trial.config)
            self._recorded_configs[trial.trial_id] = trial.config

    def _release(self, trial: Trial) -> None:
        self._launched.discard(trial.trial_id)
        self._saving.discard(trial.trial_id)
        self._restoring.discard(trial.trial_id)
        self._resources.release(trial.trial_id)

    def _set_status(self, trial: Trial, status: TrialStatus, *, start: bool = False) -> None:
        if status not in ALLOWED_TRANSITIONS[trial.status]:
            raise InvalidTransition(
                f"trial {trial.trial_id}: {trial.status} -> {status} is not a transition "
                "of the trial lifecycle (see fasttune/_internal/trial_lifecycle.py)"
            )
        trial.set_status(status)
        if status is PENDING or status is PAUSED:
            self._waiting[trial.trial_id] = trial
            self._waiting_order = None
        elif self._waiting.pop(trial.trial_id, None) is not None:
            self._waiting_order = None
        if start:
            self._state.record_start(trial)
        else:
            self._state.record_trial(trial)
