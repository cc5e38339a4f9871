"""Tests for TrialScheduler, FIFOScheduler and the ControllerView protocol."""

from __future__ import annotations

import pytest

from fasttune import result as R
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers import ControllerView, FIFOScheduler, TrialScheduler


class ListView:
    """A minimal controller view over a list of trials (satisfies ControllerView)."""

    def __init__(self, trials, without_resources=()):
        self._trials = list(trials)
        self._without_resources = set(without_resources)
        self.requests: list[tuple[str, Trial]] = []

    def get_trials(self):
        return list(self._trials)

    def get_live_trials(self):
        return [t for t in self._trials if not t.is_finished()]

    def get_waiting_trials(self):
        return [t for t in self._trials if t.status in (TrialStatus.PENDING, TrialStatus.PAUSED)]

    def has_resources_for_trial(self, trial):
        return trial.trial_id not in self._without_resources

    def pause_trial(self, trial):
        self.requests.append(("pause", trial))

    def stop_trial(self, trial):
        self.requests.append(("stop", trial))

    def unpause_trial(self, trial):
        self.requests.append(("unpause", trial))

    def save_trial(self, trial):
        self.requests.append(("save", trial))

    def exploit_trial(self, trial, checkpoint, new_config, new_experiment_tag=None):
        self.requests.append(("exploit", trial))

    def set_trial_resources(self, trial, resources):
        self.requests.append(("resources", trial))

    @property
    def search_alg(self):
        return None

    def get_total_resources(self):
        return {"CPU": 2.0}


def make_trial(trial_id, status=TrialStatus.PENDING):
    trial = Trial("train", trial_id=trial_id)
    trial.set_status(status)
    return trial


def test_decision_constants_match_ray():
    assert (TrialScheduler.CONTINUE, TrialScheduler.PAUSE, TrialScheduler.STOP) == (
        "CONTINUE",
        "PAUSE",
        "STOP",
    )
    assert TrialScheduler.NOOP == "NOOP"


def test_view_satisfies_protocol():
    from fasttune._internal.controller_view import ControllerView as RunnerView

    assert isinstance(ListView([]), ControllerView)
    assert isinstance(RunnerView([], lambda trial: True), ControllerView)
    assert not isinstance(object(), ControllerView)


def test_fifo_prefers_pending_in_order_then_paused():
    paused = make_trial("p1", TrialStatus.PAUSED)
    first, second = make_trial("a"), make_trial("b")
    running = make_trial("r", TrialStatus.RUNNING)
    view = ListView([paused, running, first, second])
    scheduler = FIFOScheduler()
    assert scheduler.choose_trial_to_run(view) is first
    assert scheduler.choose_trial_to_run(view) is first  # idempotent
    first.set_status(TrialStatus.RUNNING)
    assert scheduler.choose_trial_to_run(view) is second
    second.set_status(TrialStatus.TERMINATED)
    assert scheduler.choose_trial_to_run(view) is paused
    paused.set_status(TrialStatus.RUNNING)
    assert scheduler.choose_trial_to_run(view) is None


def test_fifo_skips_trials_without_resources():
    from fasttune.execution.placement_groups import PlacementGroupFactory

    big, small = make_trial("big"), make_trial("small")
    big.placement_group_factory = PlacementGroupFactory([{"CPU": 8}])
    paused = make_trial("paused", TrialStatus.PAUSED)
    scheduler = FIFOScheduler()
    assert scheduler.choose_trial_to_run(ListView([big, small], {"big"})) is small
    assert scheduler.choose_trial_to_run(ListView([big, paused], {"big"})) is paused
    assert scheduler.choose_trial_to_run(ListView([big], {"big"})) is None


def test_fifo_asks_once_per_request_that_does_not_fit():
    """On a full machine each step asks for a trial to start: one question per distinct
    request, not one per waiting trial."""

    class CountingView(ListView):
        asked = 0

        def has_resources_for_trial(self, trial):
            self.asked += 1
            return False

    view = CountingView([make_trial(f"t{i}") for i in range(50)])
    assert FIFOScheduler().choose_trial_to_run(view) is None
    assert view.asked == 1


def test_fifo_always_continues_and_requests_nothing():
    trial = make_trial("a", TrialStatus.RUNNING)
    view = ListView([trial])
    scheduler = FIFOScheduler()
    scheduler.on_trial_add(view, trial)
    assert scheduler.on_trial_result(view, trial, {"loss": 1.0}) == TrialScheduler.CONTINUE
    scheduler.on_trial_error(view, trial)
    scheduler.on_trial_complete(view, trial, {"loss": 0.5})
    scheduler.on_trial_remove(view, trial)
    assert view.requests == []
    assert scheduler.debug_string() == "Using FIFO scheduling algorithm."
    assert scheduler.supports_buffered_results is True


def test_set_search_properties():
    scheduler = FIFOScheduler()
    assert scheduler.set_search_properties(None, None) is True
    assert scheduler.metric == R.DEFAULT_METRIC  # anonymous metric by default
    scheduler = FIFOScheduler()
    assert scheduler.set_search_properties("loss", "min", name="exp") is True
    assert (scheduler.metric, scheduler.mode) == ("loss", "min")
    assert scheduler.set_search_properties("acc", None) is False
    assert scheduler.set_search_properties(None, "max") is False
    assert scheduler.set_search_properties(None, None) is True
    with pytest.raises(ValueError, match="`mode` must be 'min' or 'max'"):
        FIFOScheduler().set_search_properties("loss", "up")


class EveryResult(TrialScheduler):
    """A scheduler that stops a trial at a threshold and asks the view to pause the others."""

    _supports_buffered_results = False

    def __init__(self, threshold):
        self.threshold = threshold
        self.seen = 0

    def on_trial_result(self, tune_controller, trial, result):
        self.seen += 1
        if result["score"] < self.threshold:
            return self.CONTINUE
        for other in tune_controller.get_live_trials():
            if other is not trial:
                tune_controller.pause_trial(other)
        return self.STOP

    def choose_trial_to_run(self, tune_controller):
        return None


def test_custom_scheduler_decisions_and_requests():
    a, b = make_trial("a", TrialStatus.RUNNING), make_trial("b", TrialStatus.RUNNING)
    view = ListView([a, b])
    scheduler = EveryResult(threshold=10)
    assert scheduler.supports_buffered_results is False
    assert scheduler.on_trial_result(view, a, {"score": 3}) == "CONTINUE"
    assert view.requests == []
    assert scheduler.on_trial_result(view, a, {"score": 12}) == "STOP"
    assert view.requests == [("pause", b)]


def test_save_and_restore_state(tmp_path):
    scheduler = EveryResult(threshold=5)
    scheduler.set_search_properties("score", "max")
    scheduler.seen = 17
    path = tmp_path / "sched.pkl"
    scheduler.save(str(path))
    restored = EveryResult(threshold=0)
    restored.restore(str(path))
    assert (restored.threshold, restored.seen, restored.metric, restored.mode) == (
        5,
        17,
        "score",
        "max",
    )
    fresh = EveryResult(threshold=0)
    fresh.set_state(scheduler.get_state())
    assert fresh.threshold == 5


def test_base_scheduler_requires_decisions():
    view = ListView([])
    with pytest.raises(NotImplementedError, match="on_trial_result"):
        TrialScheduler().on_trial_result(view, make_trial("a"), {})
    with pytest.raises(NotImplementedError, match="choose_trial_to_run"):
        TrialScheduler().choose_trial_to_run(view)
    assert "TrialScheduler" in TrialScheduler().debug_string()
