"""Short trials queued behind running ones (``Executor.queue_trial``).

A round trip through the controller between two trials (the worker reports the end,
the loop handles it, picks the next trial, sends its launch) costs ~1 ms, more on a
busy machine: most of a trial that runs a millisecond. While the trials of a run are
that short, the controller queues the next waiting trials, in FIFO order, behind the
running ones, enough for each to cover :data:`QUEUED_WORK_S` of the average trial's
run time (at most the executor's ``queue_depth``); a worker starts the first
trial queued on it the moment its trial stops, with that trial's resources, and the
controller learns of it from the ``TrialStopped`` that names it (it then holds those
resources: ``TuneController._adopt``).

Only first starts are queued, behind trials of the same request, without GPUs, and
only while the trials' run times average under :data:`QUEUE_TRIALS_UNDER_S`. Queued
trials are taken back from behind a trial that has run longer than that (it is not
short after all: :meth:`TrialQueues.recall_overdue`), and a free slot with nothing
else to run takes one back (:meth:`TrialQueues.reclaim`), so a queued trial never
waits long behind another. Taking back needs no message: the worker and the driver
both claim a queued trial, and only one claim succeeds (``executors/_claims.py``).
Trials may start a few places out of creation order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fasttune.executors.base import Allocation
from fasttune.experiment.trial import Trial, TrialStatus

QUEUE_TRIALS_UNDER_S = 0.05

QUEUED_WORK_S = 0.005
"""How much work, in the average trial's run time, is queued behind each running
trial: enough that a worker does not run dry while the driver waits for a core on a
busy machine (a time slice is a few milliseconds) before it queues more."""

# The weight of the last trial in the moving average of run times.
_AVERAGE_WEIGHT = 0.2


def depth_for(run_s: float, cap: int) -> int:
    """Trials to queue behind each running one when trials run ``run_s`` on average:
    :data:`QUEUED_WORK_S` of work, at least one, at most ``cap``."""
    return min(cap, max(1, math.ceil(QUEUED_WORK_S / max(run_s, 1e-9))))


class TrialQueues:
    """Which trials are queued behind which running trials, and when to queue more.

    Args:
        depth: Trials queued behind one running trial at most (the executor's
            ``queue_depth``; 0: never queue).
        lifecycle: The run's trial lifecycle (``queue``, ``waiting_trials``...).
        executor: The executor (``unqueue_trial``).
        clock: The controller's clock.
    """

    def __init__(self, depth: int, lifecycle: Any, executor: Any, clock: Callable[[], float]):
        self.depth = depth
        self._lifecycle = lifecycle
        self._executor = executor
        self._clock = clock
        # Launched trials in launch order: when, and with what (what a trial queued
        # behind them gets).
        self._running: dict[str, tuple[float, Allocation]] = {}
        self._behind: dict[str, list[str]] = {}  # running trial -> queued behind it
        self._end_when_started: set[str] = set()  # to end as soon as they start
        self._run_s: float | None = None  # moving average of the trials' run times

    @property
    def average_run_s(self) -> float | None:
        """The moving average of the trials' run times (None until one has left)."""
        return self._run_s

    # ------------------------------------------------------------------ running trials
    def launched(self, trial_id: str, allocation: Allocation) -> None:
        self._running[trial_id] = (self._clock(), allocation)

    def started(self, trial_id: str) -> None:
        """The trial's worker started it: its run time counts from now. A run's first
        trials are launched before their workers exist (the fork server is still
        starting): counted from their launch, they made the first average ~10x a short
        trial's run time, and the queues stayed shallow for the next ~20 trials."""
        launched = self._running.get(trial_id)
        if launched is not None:
            self._running[trial_id] = (self._clock(), launched[1])

    def left(self, trial_id: str) -> None:
        """The trial left its worker: its run time joins the average."""
        launched = self._running.pop(trial_id, None)
        self._behind.pop(trial_id, None)
        if launched is not None:
            run_s = self._clock() - launched[0]
            average = self._run_s
            self._run_s = (
                run_s if average is None else average + _AVERAGE_WEIGHT * (run_s - average)
            )

    def take_behind(self, trial_id: str) -> list[str]:
        """The trials queued behind ``trial_id`` (forgotten here)."""
        return self._behind.pop(trial_id, [])

    def handed_over(self, trial_id: str, queued: list[str]) -> None:
        """``trial_id``, queued first in ``queued``, started: the others wait on it."""
        self._behind[trial_id] = [i for i in queued if i != trial_id]

    def given_back(self, trial_id: str) -> None:
        """Queued ``trial_id`` is not queued any more: it waits again."""
        for queued in self._behind.values():
            if trial_id in queued:
                queued.remove(trial_id)
                break
        self._lifecycle.unqueued(self._lifecycle.by_id[trial_id])

    def end_when_started(self, trial_id: str) -> None:
        """End queued ``trial_id`` as soon as it starts: it is starting, too late to be
        taken back (:meth:`end_requested` then says so, once)."""
        self._end_when_started.add(trial_id)

    def end_requested(self, trial_id: str) -> bool:
        """Whether ending ``trial_id`` was asked while it could not be taken back (the
        request is consumed)."""
        if trial_id in self._end_when_started:
            self._end_when_started.discard(trial_id)
            return True
        return False

    # ------------------------------------------------------------------ queueing
    def fill(self, make_launch: Callable[[Trial, Allocation], Any], first_start: set[str]) -> None:
        """Queue waiting trials behind the running ones, round robin, FIFO order.

        Args:
            make_launch: The launch of a trial with the given allocation (the trial
                ahead's); called just before the trial is queued.
            first_start: Ids of the trials never launched (only those are queued).
        """
        run_s = self._run_s
        if not self.depth or run_s is None or run_s >= QUEUE_TRIALS_UNDER_S:
            return
        lifecycle = self._lifecycle
        waiting: Any = None
        overdue = self._clock() - QUEUE_TRIALS_UNDER_S
        for depth in range(depth_for(run_s, self.depth)):
            for ahead_id, (started, allocation) in self._running.items():  # longest first
                ahead = lifecycle.by_id[ahead_id]
                queued = self._behind.setdefault(ahead_id, [])
                if (
                    len(queued) != depth
                    or started < overdue  # not short after all: nothing more behind it
                    or lifecycle.stop_intent(ahead) is not None
                ):
                    continue
                if waiting is None:
                    waiting = iter(lifecycle.waiting_trials())
                trial = next(waiting, None)
                if (
                    trial is None
                    or trial.status is not TrialStatus.PENDING
                    or trial.trial_id not in first_start
                    or trial.restore_path
                    or allocation.gpu_ids
                    or trial.placement_group_factory != ahead.placement_group_factory
                ):
                    return  # never past a trial: FIFO order
                if not lifecycle.queue(trial, ahead_id, make_launch(trial, allocation)):
                    return
                queued.append(trial.trial_id)

    def recall_overdue(self) -> None:
        """Take back the trials queued behind one that has run longer than trials that
        are queued for (a slow first start, an odd long trial): they wait again."""
        now = self._clock()
        for ahead_id, (started, _) in self._running.items():
            queued = self._behind.get(ahead_id)
            if queued and now - started > QUEUE_TRIALS_UNDER_S:
                self._take_back(list(queued))

    def reclaim(self, fits: Callable[[Trial], bool]) -> bool:
        """No waiting trial can start: if none is PENDING and the first queued trial
        fits (a slot is free), take it back (it waits again), unless it is starting
        behind its trial ahead; True if it was taken back."""
        lifecycle = self._lifecycle
        if not lifecycle.any_queued or lifecycle.any_pending():
            return False
        first = lifecycle.queued_trials()[0]
        return fits(first) and self._take_back([first.trial_id])

    def unqueue(self, trial: Trial) -> bool:
        """Take queued ``trial`` back (it waits again); False if it is starting where
        it was queued."""
        return self._take_back([trial.trial_id])

    def _take_back(self, trial_ids: list[str]) -> bool:
        """Take the trials back from the executor; True if all came back."""
        every = True
        for trial_id in trial_ids:
            if self._executor.unqueue_trial(trial_id):
                self.given_back(trial_id)
            else:
                every = False
        return every
