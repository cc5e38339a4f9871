"""The trial lifecycle's transition table, with a real state store on disk.

The whole runner goes through these transitions in every runner test; here the
table itself: what is refused, what a transition journals.
"""

from __future__ import annotations

import pytest

from fasttune._internal.experiment_state import ExperimentStateStore
from fasttune._internal.state_loading import load_trials
from fasttune._internal.trial_lifecycle import (
    ALLOWED_TRANSITIONS,
    InvalidTransition,
    TrialLifecycle,
)
from fasttune.experiment.trial import Trial, TrialStatus


def make(tmp_path, n=2):
    positions: dict[str, int] = {}
    store = ExperimentStateStore(str(tmp_path), positions=positions)
    store.snapshot([], {})  # as the controller does when the run starts
    # Only transitions that need neither an executor nor resources are used here.
    lifecycle = TrialLifecycle([], positions=positions, state=store, executor=None,
                               resource_manager=None)  # fmt: skip
    trials = [
        Trial("f", config={"i": i}, trial_id=f"t{i}", experiment_path=str(tmp_path))
        for i in range(n)
    ]
    for trial in trials:
        lifecycle.add(trial)
    return store, lifecycle, trials


def test_finished_is_final():
    assert ALLOWED_TRANSITIONS[TrialStatus.TERMINATED] == frozenset()
    assert ALLOWED_TRANSITIONS[TrialStatus.ERROR] == frozenset()


def test_a_waiting_trial_ends_and_can_then_neither_retry_nor_unpause(tmp_path):
    store, lifecycle, (first, second) = make(tmp_path)
    assert lifecycle.waiting_trials() == [first, second]
    lifecycle.end_waiting(first)
    assert first.status is TrialStatus.TERMINATED
    assert lifecycle.waiting_trials() == [second] == lifecycle.live_trials()
    lifecycle.unpause(first)  # only a PAUSED trial unpauses: nothing happens
    assert first.status is TrialStatus.TERMINATED
    with pytest.raises(InvalidTransition, match=r"t0: TERMINATED -> PENDING"):
        lifecycle.retry(first)
    with pytest.raises(InvalidTransition, match=r"t1: PENDING -> ERROR"):
        lifecycle.error(second)  # only a launched trial fails
    store.close()


def test_each_transition_is_journaled_at_once(tmp_path):
    store, lifecycle, (first, second) = make(tmp_path)
    lifecycle.end_waiting(second)
    lifecycle.restart(first, lambda t: t.set_config({"i": 10}), save=False)
    # Read back from the files alone, as Tuner.restore does (no snapshot was taken).
    on_disk = {t.trial_id: t for t in load_trials(str(tmp_path))}
    assert on_disk["t1"].status is TrialStatus.TERMINATED
    assert on_disk["t0"].status is TrialStatus.PENDING and on_disk["t0"].config == {"i": 10}
    store.close()
