"""The one event loop that drives an experiment.

Each step: start trials while resources allow, poll the executor for events,
feed results to stoppers, searcher, scheduler and callbacks (in that order, as Ray
does), act on their decisions, and keep the experiment state on disk current.
Processes are the executor's business; paths are the storage layer's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fasttune import result as R
from fasttune._internal.controller_view import ControllerView
from fasttune._internal.experiment_state import CompletionBitmap, ExperimentStateStore
from fasttune._internal.failure import handle_failure
from fasttune._internal.interrupts import GracefulInterrupt
from fasttune._internal.launcher import make_launch
from fasttune._internal.plugin_requests import apply_request
from fasttune._internal.result_pipeline import PAUSE, STOP, ResultPipeline
from fasttune._internal.run_spec import RunSpec
from fasttune.executors.base import (
    TrialFailed,
    TrialResults,
    TrialSaved,
    TrialStarted,
    TrialStopped,
)
from fasttune.experiment.trial import Trial, TrialStatus

logger = logging.getLogger(__name__)


class TuneController:
    """Runs one experiment to completion (or until stopped)."""

    def __init__(self, spec: RunSpec, trials: list[Trial] | None = None):
        self.spec = spec
        self.trials: list[Trial] = list(trials or [])
        self._by_id = {t.trial_id: t for t in self.trials}
        # Creation order of each trial: waiting and live trials are listed in it.
        self._position = {t.trial_id: i for i, t in enumerate(self.trials)}
        # PENDING and PAUSED trials, in creation order (kept by _transition).
        self._waiting: dict[str, Trial] = {
            t.trial_id: t
            for t in self.trials
            if t.status in (TrialStatus.PENDING, TrialStatus.PAUSED)
        }
        self.iteration = 0
        spec.callbacks.enable_write_buffering()
        self.state = ExperimentStateStore(
            spec.experiment_path,
            positions=self._position,
            before_record=spec.callbacks.flush_pending_writes,
        )
        self.view = ControllerView(
            self.trials,
            self._has_resources_for,
            spec.search_alg,
            lambda: spec.resource_manager.total,
            waiting_trials=self._waiting_trials,
            live_trials=self._live_trials,
        )
        self._stopping: dict[str, TrialStatus] = {}
        self._after_pause: dict[str, Callable[[Trial], None]] = {}
        self._restoring: set[str] = set()
        self._launched: set[str] = set()
        self._num_created = len(self.trials)
        self._stop_all = False
        self._sigint = GracefulInterrupt()
        self._raise: BaseException | None = None
        self._start_time = spec.clock()
        self._last_snapshot = self._start_time
        self._decide = ResultPipeline(spec, self.view)
        self.search_finished = False
        self._search_state_dirty = False
        self._recorded_configs: dict[str, Any] = {}
        # Trials whose completion the search algorithm was told (saved with its state).
        self.search_completed = CompletionBitmap(self._position)

    # ------------------------------------------------------------------ running
    def run(self) -> None:
        """Run until every trial has finished, the experiment is stopped or interrupted."""
        with self._sigint:
            try:
                self.spec.callbacks.setup(
                    stop=None,
                    num_samples=self.spec.num_samples,
                    total_num_samples=getattr(self.spec.search_alg, "total_samples", None),
                )
                self.snapshot()
                while not self.is_finished():
                    self.step()
                if self._raise is not None:
                    raise self._raise
            finally:
                self._shutdown()

    def step(self) -> None:
        cb = self.spec.callbacks
        cb.on_step_begin(iteration=self.iteration, trials=self.trials)
        if self._interrupted or self._stop_all or self._over_time_budget():
            self._stop_everything()
        else:
            self._start_trials()
        timeout = 0.2 if self._launched else 0.0
        for event in self.spec.executor.poll(timeout):
            self._handle(event)
        self._execute_requests()
        if self._search_state_dirty:
            self._save_search_state()
        if self.spec.clock() - self._last_snapshot >= self.spec.snapshot_period_s:
            self.snapshot()
        cb.flush_pending_writes()
        cb.on_step_end(iteration=self.iteration, trials=self.trials)
        self.iteration += 1

    def is_finished(self) -> bool:
        if self._launched or self._stopping:
            return False
        if self._interrupted or self._stop_all or self._raise is not None:
            return True
        if self._waiting:
            return False
        return self.search_finished or self.spec.search_alg.is_finished()

    # ------------------------------------------------------------------ starting
    def _start_trials(self) -> None:
        self._fill_pending()
        limit = self.spec.max_concurrent_trials
        while limit is None or len(self._launched) < limit:
            if not self._num_pending():
                self._create_trial()
            trial = self.spec.scheduler.choose_trial_to_run(self.view)
            self._execute_requests()
            if trial is None or trial.trial_id in self._launched:
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
        pending = self._num_pending()
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
        self._position[trial.trial_id] = len(self.trials)
        self.trials.append(trial)
        self._by_id[trial.trial_id] = trial
        self._waiting[trial.trial_id] = trial
        self.state.record_config(trial.trial_id, trial.config)
        self._recorded_configs[trial.trial_id] = trial.config
        self.state.record_trial(trial)
        # Saved before this trial may start (see _launch): a trial beyond the saved
        # stamp never ran.
        self._search_state_dirty = True
        self.spec.scheduler.on_trial_add(self.view, trial)
        return True

    def _launch(self, trial: Trial, allocation: Any) -> None:
        if self._search_state_dirty:
            self._save_search_state()
        if trial.config is not self._recorded_configs.get(trial.trial_id):
            self.state.record_config(trial.trial_id, trial.config)  # e.g. mutated by PBT
        self._recorded_configs[trial.trial_id] = trial.config
        restore_path = trial.restore_path
        launch = make_launch(self.spec, trial, allocation, restore_path)
        self.spec.executor.start_trial(launch)
        if restore_path:
            self._restoring.add(trial.trial_id)
        self._launched.add(trial.trial_id)
        self._transition(trial, TrialStatus.RUNNING)

    def _save_search_state(self) -> None:
        self.state.save_search_state(self.spec.search_alg, self._num_created, self.search_completed)
        self._search_state_dirty = False

    def _transition(self, trial: Trial, status: TrialStatus) -> None:
        """Set a trial's status, keep the waiting set current, and journal the change."""
        trial.set_status(status)
        if status in (TrialStatus.PENDING, TrialStatus.PAUSED):
            self._waiting[trial.trial_id] = trial
        else:
            self._waiting.pop(trial.trial_id, None)
        self.state.record_trial(trial)

    def _in_creation_order(self, trials: Any) -> list[Trial]:
        return sorted(trials, key=lambda t: self._position[t.trial_id])

    def _waiting_trials(self) -> list[Trial]:
        """PENDING and PAUSED trials in creation order, in O(waiting trials)."""
        return self._in_creation_order(self._waiting.values())

    def _live_trials(self) -> list[Trial]:
        """Unfinished trials in creation order, in O(live trials)."""
        by_id = self._by_id
        running = (by_id[i] for i in self._launched if i not in self._waiting)
        return self._in_creation_order([*self._waiting.values(), *running])

    def _num_pending(self) -> int:
        return sum(1 for t in self._waiting.values() if t.status is TrialStatus.PENDING)

    def _has_resources_for(self, trial: Trial) -> bool:
        rm = self.spec.resource_manager
        return rm.can_allocate(trial.placement_group_factory)

    # ------------------------------------------------------------------ events
    def _handle(self, event: Any) -> None:
        trial = self._by_id.get(event.trial_id)
        if trial is None:
            return
        if isinstance(event, TrialResults):
            self._on_results(trial, event.results)
        elif isinstance(event, TrialStarted):
            if trial.trial_id in self._restoring:
                self._restoring.discard(trial.trial_id)
                self._callback("on_trial_restore", trial)
            else:
                self._callback("on_trial_start", trial)
        elif isinstance(event, TrialSaved):
            self._on_saved(trial, event.checkpoint_path)
        elif isinstance(event, TrialStopped):
            self._on_stopped(trial)
        elif isinstance(event, TrialFailed):
            self._on_failed(trial, event)

    def _callback(self, hook: str, trial: Trial, **kwargs: Any) -> None:
        getattr(self.spec.callbacks, hook)(
            iteration=self.iteration, trials=self.trials, trial=trial, **kwargs
        )

    def _on_results(self, trial: Trial, results: list[dict[str, Any]]) -> None:
        processed = 0
        acked = False
        for result in results:
            if trial.trial_id in self._stopping or trial.status is not TrialStatus.RUNNING:
                return
            processed += 1
            ack = processed if processed == len(results) else 0
            decision, acked = self._on_result(trial, result, ack)
            if decision == STOP:
                self._stop_trial(trial, TrialStatus.TERMINATED)
            elif decision == PAUSE:
                self._stop_trial(trial, TrialStatus.PAUSED)
            self._execute_requests()
        if (
            processed
            and not acked
            and not self._stop_all
            and trial.trial_id not in self._stopping
            and trial.status is TrialStatus.RUNNING
        ):
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
        if acked:
            self.spec.executor.grant(trial.trial_id, ack)
        self._callback("on_trial_result", trial, result=result)
        checkpoint_dir = result.get(R.CHECKPOINT_DIR_NAME)
        if checkpoint_dir:
            self._register_checkpoint(trial, checkpoint_dir)
        # Periodic and requested (should_checkpoint) saves are made by the worker right
        # after their iteration; TrialSaved reports them.
        return decision, acked

    def _on_saved(self, trial: Trial, checkpoint_path: str) -> None:
        import os

        target = self._stopping.get(trial.trial_id)
        if target is TrialStatus.RUNNING:
            return  # interrupted: its later results were dropped, so is this checkpoint
        if not checkpoint_path:
            # Nothing to save (a function that has reported no checkpoint): a paused
            # trial restarts from scratch, as on Ray.
            if target is TrialStatus.PAUSED:
                trial.restore_path = None
            return
        self._register_checkpoint(trial, os.path.basename(checkpoint_path.rstrip(os.sep)))
        if target is TrialStatus.PAUSED:
            trial.restore_path = checkpoint_path

    def _register_checkpoint(self, trial: Trial, dir_name: str) -> None:
        manager = trial.checkpoint_manager
        metrics = {k: v for k, v in trial.last_result.items() if k != R.CONFIG}
        removed = manager.register(dir_name, metrics)
        manager.delete_files(removed)
        self.state.record_trial(trial)
        self._callback("on_trial_save", trial)
        self._callback("on_checkpoint", trial, checkpoint=manager.latest_checkpoint)

    def _stop_trial(self, trial: Trial, target: TrialStatus, save: bool | None = None) -> None:
        if trial.trial_id not in self._launched:
            return
        current = self._stopping.get(trial.trial_id)
        if current is not None:
            if current is TrialStatus.PAUSED and target is TrialStatus.TERMINATED:
                # A stop while pausing wins: the trial ends instead of waiting PAUSED.
                self._stopping[trial.trial_id] = target
                self._after_pause.pop(trial.trial_id, None)
            return
        self._stopping[trial.trial_id] = target
        executor = self.spec.executor
        if save is None:
            save = target is TrialStatus.PAUSED or (
                self.spec.checkpoint_at_end and target is TrialStatus.TERMINATED
            )
        if save:
            executor.save_trial(trial.trial_id)
        executor.stop_trial(trial.trial_id)

    def _on_stopped(self, trial: Trial) -> None:
        target = self._stopping.pop(trial.trial_id, TrialStatus.TERMINATED)
        self._release(trial)
        if self._interrupted and target is not TrialStatus.PAUSED:
            self.state.record_trial(trial)  # stays RUNNING on disk: resumed by restore
            return
        change = self._after_pause.pop(trial.trial_id, None)
        if change is not None:
            self._apply_change(trial, change)
            target = TrialStatus.PENDING
        self._transition(trial, target)
        if target is TrialStatus.TERMINATED:
            self._complete(trial)

    def _complete(self, trial: Trial) -> None:
        self.spec.scheduler.on_trial_complete(self.view, trial, trial.last_result)
        self.spec.search_alg.on_trial_complete(trial.trial_id, trial.last_result)
        # Saved with the next search state (before the next new trial starts, or at the
        # next snapshot); a restore tells the searcher what finished after that save.
        self.search_completed.add(trial.trial_id)
        self._callback("on_trial_complete", trial)

    def _release(self, trial: Trial) -> None:
        self._launched.discard(trial.trial_id)
        self._restoring.discard(trial.trial_id)
        self.spec.resource_manager.release(trial.trial_id)

    def _on_failed(self, trial: Trial, event: TrialFailed) -> None:
        handle_failure(self, trial, event)

    # ------------------------------------------------------------------ requests, stop-all
    def _execute_requests(self) -> None:
        for action, trial, options in self.view.take_requests():
            apply_request(self, action, trial, options)

    def restart_trial(self, trial: Trial, *, save: bool, change: Callable[[Trial], None]) -> None:
        """Stop the trial (saving first if asked), ``change`` it, and make it PENDING.

        Used for PBT's exploit (new config, another trial's checkpoint) and for new
        resources. A trial that is not running is changed at once.
        """
        if trial.trial_id in self._launched:
            if self._stopping.get(trial.trial_id, TrialStatus.PAUSED) is not TrialStatus.PAUSED:
                return  # already stopping for good
            self._after_pause[trial.trial_id] = change
            self._stop_trial(trial, TrialStatus.PAUSED, save=save)
        elif not trial.is_finished():
            self._apply_change(trial, change)
            self._transition(trial, TrialStatus.PENDING)

    def _apply_change(self, trial: Trial, change: Callable[[Trial], None]) -> None:
        change(trial)
        if trial.config is not self._recorded_configs.get(trial.trial_id):
            self.state.record_config(trial.trial_id, trial.config)
            self._recorded_configs[trial.trial_id] = trial.config

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
        for trial in self.trials:
            if trial.trial_id in self._launched:
                if self._interrupted:
                    if trial.trial_id not in self._stopping:
                        self._stopping[trial.trial_id] = TrialStatus.RUNNING
                        self.spec.executor.stop_trial(trial.trial_id)
                else:
                    self._stop_trial(trial, TrialStatus.TERMINATED)
            elif (
                trial.status in (TrialStatus.PENDING, TrialStatus.PAUSED) and not self._interrupted
            ):
                self._transition(trial, TrialStatus.TERMINATED)
                self._complete(trial)

    # ------------------------------------------------------------------ state, signals
    def snapshot(self) -> None:
        self.state.snapshot(
            self.trials,
            self.spec.meta,
            scheduler=self.spec.scheduler,
            callbacks=self.spec.callbacks,
        )
        self._save_search_state()
        self._last_snapshot = self.spec.clock()

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
            for trial_id in list(self._launched):
                self.spec.resource_manager.release(trial_id)
            self._launched.clear()
            try:
                self.snapshot()
            finally:
                self.state.close()
                self.spec.callbacks.on_experiment_end(trials=self.trials)
