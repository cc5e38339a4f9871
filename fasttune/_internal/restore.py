"""Decide what each trial of a restored experiment does next."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fasttune import result as R
from fasttune._internal.base_records import KeptLines
from fasttune._internal.launcher import resume_point
from fasttune._internal.result_pipeline import last_flat_or_none, tell_search_of_end
from fasttune._internal.state_loading import LoadedExperiment
from fasttune._internal.trial_state import trial_from_state
from fasttune._support.flatten import flatten_result
from fasttune._support.gc_pause import paused_gc
from fasttune.experiment.trial import Trial, TrialStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestoredTrials:
    """The trials of a restored experiment, ready for a new run.

    Attributes:
        trials: In creation order.
        kept_lines: The ids of the finished trials whose record in the experiment's
            base file is still their state, and the file's stamp when read: the new
            run need not write them again while the file is the same.
    """

    trials: list[Trial]
    kept_lines: KeptLines


@paused_gc()
def restored_trials(
    loaded: LoadedExperiment,
    spec: Any,
    *,
    resume_unfinished: bool,
    resume_errored: bool,
    restart_errored: bool,
) -> RestoredTrials:
    """Trials rebuilt from disk, with their status and restore point set for the new run.

    Trials created after the search state was last saved never started (the state is
    saved before a trial may start); they are dropped and the searcher suggests them
    again. The trials' records are taken out of ``loaded`` as they are used (each
    record is ~3 KB decoded; a trial keeps less).
    """
    states, loaded.trials = loaded.trials, []
    in_base = loaded.in_base
    if loaded.search_state is not None and len(states) > loaded.search_num_trials:
        for state in states[loaded.search_num_trials :]:
            if state["status"] != TrialStatus.PENDING.value:
                raise RuntimeError(
                    f"Experiment state is inconsistent: trial {state['trial_id']} ran but the "
                    "search state does not know it."
                )
        states = states[: loaded.search_num_trials]
        in_base = frozenset()  # the base file must lose the dropped trials' records
    trials = []
    kept = set()
    for index, state in enumerate(states):
        states[index] = None  # type: ignore[call-overload]  # freed once its trial is built
        trial_id = state["trial_id"]
        trial = trial_from_state(state, spec.experiment_path, config=loaded.configs.get(trial_id))
        spec.trial_factory.attach(trial)
        changed = _decide(trial, resume_unfinished, resume_errored, restart_errored)
        if not trial.is_finished() and not trial.config and trial_id not in loaded.configs:
            _config_lost(trial)
        # Its base line holds its position too: the same one in the new run.
        if not changed and trial_id in in_base and state.get("pos") == index:
            kept.add(trial_id)
        trials.append(trial)
    return RestoredTrials(trials, (frozenset(kept), loaded.base_stamp))


def _decide(
    trial: Trial, resume_unfinished: bool, resume_errored: bool, restart_errored: bool
) -> bool:
    """Set what ``trial`` does in the new run; whether that changed its state."""
    latest = trial.checkpoint_manager.latest_checkpoint
    if trial.status is TrialStatus.TERMINATED:
        return False
    if trial.status is TrialStatus.ERROR:
        if resume_errored:  # first, as Ray reads the two flags
            trial.restore_path = latest.path if latest else None
            trial.status = TrialStatus.PENDING
        elif restart_errored:
            trial.restore_path = None
            trial.checkpoint_manager.load_json({"order": 0, "checkpoints": []})
            trial.num_failures = 0
            trial.status = TrialStatus.PENDING
        return restart_errored or resume_errored
    if resume_unfinished:
        trial.restore_path = latest.path if latest else None
        trial.status = TrialStatus.PENDING
    else:
        trial.status = TrialStatus.TERMINATED
    return True


def restore_plugin_state(controller: Any, loaded: LoadedExperiment) -> None:
    """Give searcher, scheduler and callbacks back the state saved with the experiment."""
    spec = controller.spec
    if loaded.search_state is None and controller.trials:
        _fast_forward_search(controller)
    if loaded.search_state is not None:
        spec.search_alg.set_state(loaded.search_state)
        # Trials that finished after the search state was last saved: tell it now.
        for trial in controller.trials:
            if trial.is_finished() and trial.trial_id not in loaded.search_completed:
                tell_search_of_end(spec.search_alg, trial, last_flat_or_none(trial))
        controller.search_completed.update(t.trial_id for t in controller.trials if t.is_finished())
    if loaded.scheduler_state is not None and hasattr(spec.scheduler, "set_state"):
        spec.scheduler.set_state(loaded.scheduler_state)
        if loaded.scheduler_seen is not None:
            replay_to_scheduler(controller, loaded.scheduler_seen, loaded.scheduler_num_trials)
    else:
        for trial in controller.trials:
            spec.scheduler.on_trial_add(controller.view, trial)
    if loaded.callback_state is not None:
        spec.callbacks.set_state(loaded.callback_state)


def replay_to_scheduler(controller: Any, seen: dict[str, int], num_trials: int) -> None:
    """Show the scheduler what happened after its state was saved (with the last snapshot).

    The saved state misses the results and endings that came later: ASHA would decide
    on rungs without the values recorded since, and stop trials where it would not have.
    Each trial's later results are read from its ``result.json`` (up to the iteration it
    resumes from: what comes after, it reports again) and given to ``on_trial_result``
    in the order they were reported, then the endings to ``on_trial_complete`` /
    ``on_trial_error``. The decisions and requests they produce are discarded: they
    were carried out before the crash, or are made again when the trials run.

    A result's timestamp counts whole seconds, so a fast run has many in one: those are
    taken iteration by iteration (each trial's first, then each one's second...), the
    order in which trials that run together report them. Trial by trial instead, a
    synchronous PBT saw one trial reach every sync point while the others had not
    started: its rounds then fell between checkpoints (at 5, 7, 9 rather than at each
    second iteration), so that trials were paused past their checkpoint and cloned
    donors a round ahead (``result.json`` ``1..7, 9, 10``) or finished (ended at 9).
    ASHA's decisions depend on the order at each rung only, which for trials run one
    at a time is the same either way.
    """
    from fasttune._support.flatten import flatten_result

    scheduler = controller.spec.scheduler
    view = controller.view
    position = controller.lifecycle.position
    events: list[tuple[float, int, int, Trial, dict[str, Any] | None]] = []
    for trial in controller.trials:
        if trial.trial_id in seen:
            after = seen[trial.trial_id]
        elif position[trial.trial_id] >= num_trials:
            after = 0  # created after the save: the scheduler never heard of it
            scheduler.on_trial_add(view, trial)
        else:
            continue  # finished before the save: the state has it all
        until = _replay_until(trial)
        for result in _read_result_lines(trial.local_path):
            iteration = result.get(R.TRAINING_ITERATION, 0)
            if after < iteration <= until:
                order = (result.get(R.TIMESTAMP, 0), iteration, position[trial.trial_id])
                events.append((*order, trial, flatten_result(result, (R.CONFIG,))))
        if trial.is_finished():
            events.append((math.inf, 0, position[trial.trial_id], trial, None))
    events.sort(key=lambda event: event[:3])
    view.replaying = True
    try:
        _replay(scheduler, view, events)
    finally:
        view.replaying = False
    _carry_out_lost_exploits(controller, view.take_requests())
    logger.debug("Replayed %d results and endings to the scheduler after restore", len(events))


def _replay(scheduler: Any, view: Any, events: list[Any]) -> None:
    for *_, trial, replayed in events:
        if replayed is not None:
            scheduler.on_trial_result(view, trial, replayed)
        elif trial.status is TrialStatus.ERROR:
            scheduler.on_trial_error(view, trial)
        else:
            scheduler.on_trial_complete(view, trial, flatten_result(trial.last_result))


def _carry_out_lost_exploits(controller: Any, requests: list[Any]) -> None:
    """Carry out the exploits the replay decided again that a crash kept from happening.

    An exploit changes its trial once the trial has paused: a driver killed between
    PBT's decision and that pause loses it, and a synchronous round is never decided
    live again (its trials resume past it). So an exploit the replay decides is carried
    out now if nothing moved on since: the trial has not got the config it decides,
    and the trial resumes from the iteration of the donor's checkpoint it names. Other
    requests of the replay were carried out before the crash, or are made again as the
    trials run.
    """
    from fasttune._internal.plugin_requests import Exploit, exploit_change

    trials_by_dir = {t.local_path: t for t in controller.trials if t.local_path}
    for request in requests:
        if not isinstance(request, Exploit):
            continue
        target = request.trial
        if target.is_finished() or target.config == request.config:
            continue  # carried out before the crash
        location = getattr(request.checkpoint, "path", request.checkpoint)
        if location is None:
            continue  # from scratch: nothing of another trial's to carry over
        path = os.path.normpath(os.fspath(location))
        donor = trials_by_dir.get(os.path.dirname(path))
        metrics = donor.checkpoint_manager.metrics_of(os.path.basename(path)) if donor else None
        point = resume_point(target, target.restore_path)
        if metrics is None or point is None:
            continue
        if point.iteration != int(metrics.get(R.TRAINING_ITERATION) or 0):
            continue  # the donor's newest checkpoint is not the one decided on
        logger.info(
            "Trial %s: carrying out the exploit of %s decided before the crash.", target, donor
        )
        controller.lifecycle.restart(
            target, exploit_change(request, getattr(controller, "storage_sync", None)), save=False
        )


def _replay_until(trial: Trial) -> float:
    """The last iteration of ``trial`` the scheduler should see now: all of a finished
    one; of an unfinished one, up to the checkpoint it resumes from (0 from scratch)."""
    if trial.is_finished():
        return math.inf
    point = resume_point(trial, trial.restore_path)
    return 0 if point is None else point.iteration


def _read_result_lines(trial_dir: str | None) -> Iterator[dict[str, Any]]:
    """The results in a trial's ``result.json`` (a torn last line is left out)."""
    if not trial_dir:
        return
    try:
        with open(os.path.join(trial_dir, R.EXPR_RESULT_FILE), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return
    for line in data.split(b"\n"):
        if line.strip():
            try:
                yield json.loads(line)
            except ValueError:
                continue


def _config_lost(trial: Trial) -> None:
    """A trial whose config is gone (a damaged configs log, no usable params.pkl) cannot run:
    it ends in ERROR with the reason, rather than run with an empty config."""
    from fasttune._internal.failure import write_error_files

    trial.status = TrialStatus.ERROR
    trial.restore_path = None
    trial.error_msg = (
        "its config was lost (trial_configs.pkl is damaged and the trial has no "
        "usable params.pkl), so it cannot run; run its search again for a new sample"
    )
    trial.num_failures += 1
    trial.error_file = write_error_files(
        trial.init_local_path(), trial.num_failures, f"TuneError: {trial.error_msg}", None
    )
    logger.warning("Trial %s: %s.", trial.trial_id, trial.error_msg)


def _fast_forward_search(controller: Any) -> None:
    """Stand in for a lost search state: a new search algorithm skips the samples the
    restored trials already drew, and is told the finished ones.

    A seeded variant generator draws the same samples again, so what it suggests next
    is what the lost state would have suggested; a model-based searcher relearns only
    from the finished trials.
    """
    search_alg = controller.spec.search_alg
    skipped = 0
    for trial in controller.trials:  # in creation order
        if not search_alg.is_finished() and search_alg.next_suggestion(trial.trial_id):
            skipped += 1
        if trial.is_finished():
            # At once: under a concurrency limit (max_concurrent_trials) the next sample
            # is drawn only once a live trial has ended, as it was in the lost run.
            tell_search_of_end(search_alg, trial, last_flat_or_none(trial))
            controller.search_completed.add(trial.trial_id)
    logger.warning(
        "The search state of %s was missing or damaged: the search algorithm started "
        "again and skipped the %d samples its %d trials already drew.",
        controller.spec.experiment_path,
        skipped,
        len(controller.trials),
    )
