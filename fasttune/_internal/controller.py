"""The one event loop that drives an experiment.

Each :meth:`TuneController.step`: (1) create trials ahead from the search algorithm
and start those the scheduler picks while resources allow; (2) poll the executor
once; (3) handle each event: results go through the result pipeline (stoppers,
scheduler, searcher, in Ray's order), then to the callbacks, and STOP/PAUSE become
executor commands; saves register checkpoints; failures go through the failure
policy; (4) carry out what plugins requested through the view; (5) save state when
due. Where each trial is in its life is the trial lifecycle's business
(``trial_lifecycle.py``), processes the executor's, files the state store's.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune._internal.controller_view import ControllerView
from fasttune._internal.experiment_state import ExperimentStateStore
from fasttune._internal.failure import (
    FailureAction,
    exception_of,
    failure_action,
    prepare_retry,
    record_failure,
    short_error,
)
from fasttune._internal.interrupts import GracefulInterrupt
from fasttune._internal.launcher import make_launch, resume_point
from fasttune._internal.plugin_requests import apply_request
from fasttune._internal.result_pipeline import PAUSE, STOP, ResultPipeline, tell_search_of_end
from fasttune._internal.run_spec import RunSpec
from fasttune._internal.searcher_file import SearcherFile
from fasttune._internal.state_layout import CompletionBitmap
from fasttune._internal.storage_publishing import ExperimentPublisher
from fasttune._internal.trial_lifecycle import StopIntent, TrialLifecycle
from fasttune._internal.trial_queue import TrialQueues
from fasttune._support.flatten import flatten_result
from fasttune.executors.base import (
    Allocation,
    TrialFailed,
    TrialResults,
    TrialSaved,
    TrialStarted,
    TrialStopped,
    TrialUnqueued,
)
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.storage.sync import ExperimentSync

if TYPE_CHECKING:
    from fasttune._internal.restore import RestoredTrials

logger = logging.getLogger(__name__)


class TuneController:
    """Runs one experiment to completion (or until stopped).

    Where each trial is (waiting, launched, being stopped) is kept by its
    :class:`~fasttune._internal.trial_lifecycle.TrialLifecycle`; this class decides
    *when* trials move, and tells plugins and callbacks.
    """

    def __init__(self, spec: RunSpec, restored: RestoredTrials | None = None):
        self.spec = spec
        self.iteration = 0
        spec.callbacks.enable_write_buffering()
        positions: dict[str, int] = {}  # creation order, kept by the lifecycle
        self.state = ExperimentStateStore(
            spec.experiment_path,
            positions=positions,
            before_record=spec.callbacks.flush_pending_writes,
            kept_lines=restored.kept_lines if restored is not None else None,
        )
        self.lifecycle = TrialLifecycle(
            restored.trials if restored is not None else [],
            positions=positions,
            state=self.state,
            executor=spec.executor,
            resource_manager=spec.resource_manager,
        )
        self.trials = self.lifecycle.trials
        self.view = ControllerView(
            self.trials,
            self._has_resources_for,
            spec.search_alg,
            lambda: spec.resource_manager.total,
            waiting_trials=self.lifecycle.waiting_trials,
            live_trials=self.lifecycle.live_trials,
        )
        self._num_created = len(self.trials)
        self._stop_all = False
        # Callbacks told of trials that end (a restore tells them what a crash hid).
        self._ending_listeners = bool(spec.callbacks.listeners("on_trial_complete"))
        self._sigint = GracefulInterrupt()
        self._raise: BaseException | None = None
        self._start_time = spec.clock()
        self._searcher_file = SearcherFile(spec.experiment_path)
        self._last_snapshot = self._start_time
        self._decide = ResultPipeline(spec, self.view)
        self.search_finished = False
        self._search_state_dirty = False
        # Trials created by this run and not launched yet: no files of theirs can exist.
        # (Never a restored PENDING trial: one queued behind another may have started
        # before the driver journaled it RUNNING, then been killed.)
        self._never_launched: set[str] = set()
        # Trials whose completion the search algorithm was told (saved with its state).
        self.search_completed = CompletionBitmap(self.lifecycle.position)
        # Short trials queued behind running ones (trial_queue.py).
        self.queues = TrialQueues(spec.queue_depth, self.lifecycle, spec.executor, clock=spec.clock)
        # Remote storage: the staging directory is published as the run goes.
        self.publisher = ExperimentPublisher.for_run(spec)

    @property
    def storage_sync(self) -> ExperimentSync | None:
        """The remote experiment's sync (None for local storage)."""
        return None if self.publisher is None else self.publisher.sync

    # ------------------------------------------------------------------ running
    def run(self) -> None:
        """Run until every trial has finished, the experiment is stopped or interrupted."""
        with self._sigint:
            try:
                # What Ray Tune's callbacks get: the stop dict ({} for a Stopper or
                # a function), num_samples, time_budget_s, total_num_samples.
                self.spec.callbacks.setup(
                    stop=dict(self.spec.trial_factory.stopping_criterion),
                    num_samples=self.spec.num_samples,
                    time_budget_s=self.spec.time_budget_s,
                    total_num_samples=getattr(self.spec.search_alg, "total_samples", None),
                )
                self.snapshot()
                self._tell_missed_endings()
                while not self.is_finished():
                    self.step()
                if self._raise is not None:
                    raise self._raise
            finally:
                self._shutdown()

    def _tell_missed_endings(self) -> None:
        """Tell the callbacks about trials that ended before a crash but were not told
        (the driver died between the trial's last record and its callbacks)."""
        for trial in self.trials:
            if trial.is_finished() and not trial.ending_told:
                failed = trial.status is TrialStatus.ERROR
                self._callback("on_trial_error" if failed else "on_trial_complete", trial)
                self.lifecycle.told(trial)

    def step(self) -> None:
        """One turn of the loop: start trials, handle the executor's events, apply the
        plugins' requests, save state when due."""
        cb = self.spec.callbacks
        cb.on_step_begin(iteration=self.iteration, trials=self.trials)
        if self._interrupted or self._stop_all or self._over_time_budget():
            self._stop_everything()
        else:
            self._start_trials()
        timeout = 0.2 if self.lifecycle.num_launched else 0.0
        for event in self.spec.executor.poll(timeout):
            self._handle(event)
        self._execute_requests()
        if self._search_state_dirty:
            self._save_search_state()
        if self.spec.clock() - self._last_snapshot >= self.spec.snapshot_period_s:
            self.snapshot()
        elif self.publisher is not None and self.publisher.checkpoint_waiting:
            # Storage learns of a new checkpoint as soon as the sync's share of the
            # driver's time allows, as Ray Tune syncs its state with each checkpoint: a
            # driver lost before the next snapshot is restored from it, not from scratch.
            self._sync_storage()
        cb.flush_pending_writes()
        cb.on_step_end(iteration=self.iteration, trials=self.trials)
        self.iteration += 1

    def is_finished(self) -> bool:
        if self.lifecycle.any_launched_or_stopping:
            return False
        if self._interrupted or self._stop_all or self._raise is not None:
            return True
        if self.lifecycle.any_waiting:
            return False
        return self.search_finished or self.spec.search_alg.is_finished()

    # ------------------------------------------------------------------ starting
    def _start_trials(self) -> None:
        # Trials are created ahead once the free slots are filled: a worker waiting for
        # its next trial does not wait for the next batch of suggestions.
        self._launch_trials()
        if self.queues.depth:
            self.queues.recall_overdue()
            self.queues.fill(self._launch_queued, self._never_launched)
        self._fill_pending()

    def _launch_trials(self) -> None:
        limit = self.spec.max_concurrent_trials
        lifecycle = self.lifecycle
        while limit is None or lifecycle.num_launched < limit:
            if not lifecycle.any_pending():
                self._create_trial()
            trial = self.spec.scheduler.choose_trial_to_run(self.view)
            self._execute_requests()
            if trial is None:
                if not self.queues.reclaim(self._has_resources_for):
                    return
                continue  # the next turn launches the trial taken back
            if lifecycle.is_launched(trial):
                return
            allocation = self.spec.resource_manager.try_allocate(
                trial.trial_id, trial.placement_group_factory
            )
            if allocation is None:
                return
            self._launch(trial, allocation)

    def _fill_pending(self) -> None:
        """Keep up to ``max_pending_trials`` trials created ahead of time (as Ray does).

        Refilled once half are gone rather than one by one: the search state must be
        saved before a new trial starts, so trials created together share one save.
        """
        limit = self.spec.max_pending_trials
        pending = self.lifecycle.num_pending()
        if pending > limit // 2:
            return
        while pending < limit and self._create_trial():
            pending += 1

    def _create_trial(self) -> bool:
        if self.search_finished:
            return False
        search_alg = self.spec.search_alg
        if search_alg.is_finished():
            self.search_finished = True
            return False
        trial_id = self.spec.trial_factory.trial_id(self._num_created)
        suggestion = search_alg.next_suggestion(trial_id)
        if suggestion is None:
            if search_alg.is_finished():
                self.search_finished = True
            return False
        trial = self.spec.trial_factory.create(trial_id, self._num_created, suggestion)
        self.spec.resource_manager.check_fits(trial.placement_group_factory, str(trial))
        self._num_created += 1
        self._never_launched.add(trial_id)
        self.lifecycle.add(trial)
        # Saved before this trial may start (see _launch): a trial beyond the saved
        # stamp never ran.
        self._search_state_dirty = True
        self.spec.scheduler.on_trial_add(self.view, trial)
        return True

    def _launch(self, trial: Trial, allocation: Any) -> None:
        if self._search_state_dirty:
            self._save_search_state()
        restore = trial.restore_path
        # A trial's first start from scratch has nothing on disk to look for (no result
        # files, no checkpoint folders: stat and listdir calls).
        first_start = trial.trial_id in self._never_launched and not restore
        self._never_launched.discard(trial.trial_id)
        trial.resume_point = None if first_start else resume_point(trial, restore)
        launch = make_launch(self.spec, trial, allocation, restore, first_start=first_start)
        self.lifecycle.launch(trial, launch)
        self.queues.launched(trial.trial_id, allocation)

    def _save_search_state(self, *, compact: bool = False) -> None:
        self.state.save_search_state(
            self.spec.search_alg, self._num_created, self.search_completed, compact=compact
        )
        self._search_state_dirty = False

    def _has_resources_for(self, trial: Trial) -> bool:
        rm = self.spec.resource_manager
        return rm.can_allocate(trial.placement_group_factory)

    # ------------------------------------------------------------------ queued trials
    def _launch_queued(self, trial: Trial, allocation: Allocation) -> Any:
        """The launch of a trial to queue behind one holding ``allocation``."""
        if self._search_state_dirty:
            self._save_search_state()  # before the trial may start, as in _launch
        trial.resume_point = None
        return make_launch(self.spec, trial, allocation, None, first_start=True)

    def _adopt(self, trial: Trial, queued: list[str]) -> None:
        """The queued ``trial`` started where the trial ahead of it stopped; the others
        ``queued`` there wait on it now."""
        self.queues.handed_over(trial.trial_id, queued)
        allocation = self.spec.resource_manager.try_allocate(
            trial.trial_id, trial.placement_group_factory
        )
        if allocation is None:  # the trial ahead's resources were released just before
            raise RuntimeError(f"no resources for {trial}, queued behind a trial that stopped")
        self._never_launched.discard(trial.trial_id)
        self.lifecycle.adopt(trial)
        self.queues.launched(trial.trial_id, allocation)
        if self.queues.end_requested(trial.trial_id):
            self.terminate_trial(trial)

    def _on_unqueued(self, trial: Trial) -> None:
        """The queued ``trial`` is waiting again (the trial ahead failed or its worker
        died before starting it)."""
        self.queues.given_back(trial.trial_id)
        if self.queues.end_requested(trial.trial_id):
            self.terminate_trial(trial)

    # ------------------------------------------------------------------ events
    def _handle(self, event: Any) -> None:
        trial = self.lifecycle.by_id.get(event.trial_id)
        if trial is None:
            return
        if isinstance(event, TrialResults):
            self._on_results(trial, event)
        elif isinstance(event, TrialStarted):
            self.queues.started(trial.trial_id)
            hook = "on_trial_restore" if self.lifecycle.started(trial) else "on_trial_start"
            self._callback(hook, trial)
        elif isinstance(event, TrialSaved):
            self._on_saved(trial, event.checkpoint_path)
        elif isinstance(event, TrialStopped):
            behind = self.queues.take_behind(trial.trial_id)
            self._on_stopped(trial)
            if event.successor is not None:
                self._adopt(self.lifecycle.by_id[event.successor], behind)
        elif isinstance(event, TrialFailed):
            self._on_failed(trial, event)
        elif isinstance(event, TrialUnqueued):
            self._on_unqueued(trial)

    def _callback(self, hook: str, trial: Trial, **kwargs: Any) -> None:
        getattr(self.spec.callbacks, hook)(
            iteration=self.iteration, trials=self.trials, trial=trial, **kwargs
        )

    def _on_results(self, trial: Trial, event: TrialResults) -> None:
        results = event.results
        accepts = self.lifecycle.accepts_results
        processed = 0
        if event.unseen and accepts(trial):
            # Results in the trial's files that nothing here needs one by one.
            trial.add_unseen_results(event.unseen, event.unseen_stats or {})
            processed = event.unseen
        acked = False
        total = processed + len(results)
        # Once the experiment stops (a stopper's stop_all, say), results the driver
        # writes are dropped, as Ray Tune never sees them; results a worker wrote to
        # its files already are recorded, so the trial's state matches its files.
        driver_writes = self.spec.result_files is None
        for result in results:
            if not accepts(trial) or (self._stop_all and driver_writes):
                return  # being stopped: what it ran past the decision is dropped
            processed += 1
            ack = processed if processed == total else 0
            decision, acked = self._on_result(trial, result, ack)
            if decision == STOP:
                self.terminate_trial(trial)
            elif decision == PAUSE:
                self.pause_trial(trial, save=True)
            self._execute_requests()
        if processed and not acked and not self._stop_all and accepts(trial):
            self.spec.executor.grant(trial.trial_id, processed)

    def _on_result(self, trial: Trial, result: dict[str, Any], ack: int = 0) -> tuple[str, bool]:
        """The decision on ``result``, and whether the ``ack`` grant was sent.

        The grant that acknowledges a batch (``ack`` results) goes out as soon as the
        last decision is final (no stop, pause or plugin request), before the callbacks:
        a worker waiting for it (executors/base.py, flow control) loses no time to them.
        """
        decision, result = self._decide(trial, result)
        if result.get(R.RESULT_DUPLICATE):
            return decision, False
        stopper = self.spec.stopper
        if stopper is not None and stopper.stop_all():
            self._stop_all = True
        acked = (
            bool(ack)
            and decision not in (STOP, PAUSE)
            and not self.view.requests
            and not self._stop_all
        )
        callbacks_decide = self.spec.callbacks_decide
        if acked and not callbacks_decide:
            self.spec.executor.grant(trial.trial_id, ack)
        asked = result.get(R.SHOULD_CHECKPOINT)
        self._callback("on_trial_result", trial, result=result)
        checkpoint_dir = result.get(R.CHECKPOINT_DIR_NAME)
        if checkpoint_dir:
            self._register_checkpoint(trial, checkpoint_dir)
        elif not asked and result.get(R.SHOULD_CHECKPOINT) and decision != PAUSE:
            # A callback asked for a checkpoint (Ray lets one set should_checkpoint in
            # the result it is given; a pause saves anyway). The grant follows: a trial
            # waiting for it saves right after this iteration.
            self.save_trial(trial)
        if acked and callbacks_decide:
            self.spec.executor.grant(trial.trial_id, ack)
        # Periodic and requested (should_checkpoint) saves are made by the worker right
        # after their iteration; TrialSaved reports them.
        return decision, acked

    def _on_saved(self, trial: Trial, checkpoint_path: str) -> None:
        self.lifecycle.saved(trial)
        intent = self.lifecycle.stop_intent(trial)
        if intent is StopIntent.INTERRUPT:
            return  # interrupted: its later results were dropped, so is this checkpoint
        if not checkpoint_path:
            # Nothing to save (a function that has reported no checkpoint): a paused
            # trial restarts from scratch, as on Ray.
            if intent is StopIntent.PAUSE:
                trial.restore_path = None
            return
        dir_name = os.path.basename(checkpoint_path.rstrip(os.sep))
        # A function trainable's save hands back the checkpoint it last reported, which
        # is registered already with the metrics of its own iteration: registered again
        # with the current result (a pause between checkpoints), it would claim a later
        # iteration than it restores to, and the trial's result files would be cut back
        # short of what it then reports again (an iteration twice in result.json).
        if trial.checkpoint_manager.metrics_of(dir_name) is None:
            self._register_checkpoint(trial, dir_name)
        if intent is StopIntent.PAUSE:
            trial.restore_path = checkpoint_path

    def _register_checkpoint(self, trial: Trial, dir_name: str) -> None:
        manager = trial.checkpoint_manager
        metrics = {k: v for k, v in trial.last_result.items() if k != R.CONFIG}
        removed = manager.register(dir_name, metrics)
        manager.delete_files(removed)
        if self.publisher is not None:
            self.publisher.checkpoint_registered(manager.trial_dir, removed)
        self.state.record_trial(trial)
        self._callback("on_trial_save", trial)
        self._callback("on_checkpoint", trial, checkpoint=manager.latest_checkpoint)

    def _on_stopped(self, trial: Trial) -> None:
        self.queues.left(trial.trial_id)
        status = self.lifecycle.stopped(
            trial,
            interrupted=bool(self._interrupted),
            nothing_to_tell=not self._ending_listeners,
        )
        if status is TrialStatus.TERMINATED:
            self._completed(trial)

    def _on_failed(self, trial: Trial, event: TrialFailed) -> None:
        """Record the failure, then apply ``FailureConfig``: retry, error or end the run.

        A worker that could not write the trial's result files (a full disk) ends the
        run with its ``OSError``, as the driver's own write would: the trial is not at
        fault, and the experiment continues with ``Tuner.restore`` once there is space.
        """
        if event.during == "write":
            raise exception_of(event.exception, event.error)
        if self.lifecycle.ends_whole(trial):
            # Its last result is in and nothing was left to save: it ends as it was
            # going to (as on Ray, where a trial is TERMINATED before its actor stops).
            logger.warning(
                "Trial %s failed while being stopped after its last result (%s); it "
                "ends TERMINATED, as nothing of it was lost.",
                trial,
                short_error(event.error),
            )
            self._on_stopped(trial)
            return
        self.queues.left(trial.trial_id)
        intent, change = self.lifecycle.failed(trial)
        record_failure(trial, event)
        if self._interrupted:
            self.state.record_trial(trial)
            return
        action = failure_action(trial, self.spec.failure_config.fail_fast)
        if action is FailureAction.RETRY:
            prepare_retry(trial)
            self.lifecycle.retry(trial, intent, change)
            self._callback("on_trial_recover", trial)
            return
        if action is not FailureAction.ERROR:
            self._stop_all = True
        if action is FailureAction.RAISE:
            self._raise = exception_of(event.exception, event.error)
        self.lifecycle.error(trial)
        self.spec.scheduler.on_trial_error(self.view, trial)
        tell_search_of_end(self.spec.search_alg, trial, None)
        self.search_completed.add(trial.trial_id)  # saved with the next search state
        self._callback("on_trial_error", trial)
        self.lifecycle.told(trial)

    def _completed(self, trial: Trial) -> None:
        """Tell the plugins and callbacks that ``trial`` has TERMINATED."""
        last_flat = flatten_result(trial.last_result)  # as Ray gives it: "val/loss"
        self.spec.scheduler.on_trial_complete(self.view, trial, last_flat)
        tell_search_of_end(self.spec.search_alg, trial, last_flat)
        # Saved with the next search state (before the next new trial starts, or at the
        # next snapshot); a restore tells the searcher what finished after that save.
        self.search_completed.add(trial.trial_id)
        self._callback("on_trial_complete", trial)
        self.lifecycle.told(trial)

    # ------------------------------------------------------------------ requests, stop-all
    # The RequestHost interface (plugin_requests.py), also used by result decisions.
    def terminate_trial(self, trial: Trial) -> None:
        """End ``trial``: stop it if launched (saving if ``checkpoint_at_end``), else
        terminate it where it waits (a queued one is taken back first, or stopped as soon
        as it has started if it is starting)."""
        if self.lifecycle.is_queued(trial) and not self.queues.unqueue(trial):
            self.queues.end_when_started(trial.trial_id)
            return
        if self.lifecycle.is_launched(trial):
            self.lifecycle.stop(trial, StopIntent.TERMINATE, save=self.spec.checkpoint_at_end)
        elif not trial.is_finished():
            self.lifecycle.end_waiting(trial)
            self._completed(trial)

    def pause_trial(self, trial: Trial, *, save: bool) -> None:
        self.lifecycle.stop(trial, StopIntent.PAUSE, save=save)

    def save_trial(self, trial: Trial) -> None:
        self.spec.executor.save_trial(trial.trial_id)

    def _execute_requests(self) -> None:
        for request in self.view.take_requests():
            apply_request(self, request)

    def _over_time_budget(self) -> bool:
        budget = self.spec.time_budget_s
        if budget is None or self.spec.clock() - self._start_time < budget:
            return False
        if not self._stop_all:
            logger.info("Reached the time budget of %s s; stopping the experiment.", budget)
        self._stop_all = True
        return True

    def _stop_everything(self) -> None:
        self.search_finished = True
        if not self._interrupted and self._raise is None:
            # Stopped on purpose (a stopper's stop_all, the time budget, fail_fast): the
            # search is over, saved so, and a restore only finishes the trials begun,
            # as on Ray. An interrupted or failed run's search goes on after a restore.
            self.spec.search_alg.set_finished()
        if self._interrupted:
            self.lifecycle.interrupt_all()  # waiting trials stay as they are, for restore
            for trial in self.lifecycle.queued_trials():
                self.queues.unqueue(trial)  # PENDING on disk, for restore
            return
        for trial in self.lifecycle.live_trials():
            self.terminate_trial(trial)

    # ------------------------------------------------------------------ state, signals
    def snapshot(self) -> None:
        self.state.snapshot(
            self.trials,
            self.spec.meta,
            scheduler=self.spec.scheduler,
            callbacks=self.spec.callbacks,
        )
        self._save_search_state(compact=True)  # the log back to one record, for storage
        self._searcher_file.save(self.spec.search_alg)  # for Searcher.restore_from_dir
        self._last_snapshot = self.spec.clock()
        self._sync_storage()

    def _sync_storage(self, *, final: bool = False) -> None:
        """Publish the staging directory of a remote experiment (storage_publishing.py);
        another driver holding the experiment now ends the run."""
        if self.publisher is None:
            return
        self.spec.callbacks.flush_pending_writes()
        lost = self.publisher.publish(self.trials, final=final)
        if lost is not None:  # write nothing more
            if self._raise is None:
                self._raise = lost
            self._stop_all = True

    @property
    def _interrupted(self) -> int:
        return self._sigint.count

    @property
    def interrupted(self) -> bool:
        return bool(self._sigint.count)

    def _shutdown(self) -> None:
        try:
            self.spec.executor.shutdown()
        finally:
            self.lifecycle.release_all()
            try:
                self.snapshot()
            finally:
                self.state.close()
                self.spec.callbacks.on_experiment_end(trials=self.trials)
                self._sync_storage(final=True)  # the files the callbacks closed, last
                if self.publisher is not None:
                    self.publisher.drop_local_copies(self.trials)
