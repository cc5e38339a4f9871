"""ResourceChangingScheduler and its allocation functions, on hand-made trials and for real."""

from __future__ import annotations

import json
import os
import signal

import pytest

import fasttune as tune
from fasttune.execution.placement_groups import PlacementGroupFactory
from fasttune.experiment.trial import TrialStatus
from fasttune.schedulers import FIFOScheduler, TrialScheduler
from fasttune.schedulers.resource_changing_scheduler import (
    DistributeResources,
    DistributeResourcesToTopJob,
    ResourceChangingScheduler,
)
from tests.schedulers._population_helpers import RecordingView, make_trial, result
from tests.schedulers._population_trainables import ResourceReporter, resource_reporting_fn

DEFAULT = object()


def setup(resources, n=1, total=None, function=DEFAULT, base=None):
    """``n`` running trials with ``resources`` under a scheduler; returns (scheduler, view)."""
    trials = [make_trial(f"t{i}", {}, resources=resources) for i in range(n)]
    view = RecordingView(trials, total=total)
    kwargs = {} if function is DEFAULT else {"resources_allocation_function": function}
    scheduler = ResourceChangingScheduler(base, **kwargs)
    for trial in trials:
        scheduler.on_trial_add(view, trial)
    return scheduler, view


def allocate(function, scheduler, view, index=0, iteration=1):
    trial = view.trials[index]
    return function(view, trial, result(iteration, 0), scheduler)


def cpus(pgf):
    return pgf.required_resources.get("CPU", 0)


# ---------------------------------------------------------------------- DistributeResources
def test_a_lone_trial_takes_all_free_cpus_but_not_before_its_first_result():
    fn = DistributeResources()
    scheduler, view = setup({"cpu": 1}, total={"CPU": 4, "GPU": 0})
    assert allocate(fn, scheduler, view, iteration=0) is None
    assert allocate(fn, scheduler, view).bundles == [{"CPU": 4.0}]


def test_free_cpus_are_shared_evenly():
    fn = DistributeResources()
    scheduler, view = setup({"cpu": 1}, n=2, total={"CPU": 4})
    grown = allocate(fn, scheduler, view, 0)
    assert cpus(grown) == 2  # one of the two free CPUs: its share
    view.trials[0].placement_group_factory = grown
    assert cpus(allocate(fn, scheduler, view, 1)) == 2  # the other one


def test_over_allocated_trials_give_resources_back():
    fn = DistributeResources()
    scheduler, view = setup({"cpu": 1}, n=2, total={"CPU": 4})
    view.trials[0].placement_group_factory = PlacementGroupFactory([{"CPU": 3}])
    view.trials[1].placement_group_factory = PlacementGroupFactory([{"CPU": 2}])
    assert cpus(allocate(fn, scheduler, view, 0)) == 2  # 5 held of 4: one back
    # Never below the resources it started with.
    view.trials[1].placement_group_factory = PlacementGroupFactory([{"CPU": 9}])
    assert cpus(allocate(fn, scheduler, view, 0)) == 1


def test_gpu_trials_grow_by_gpus():
    fn = DistributeResources()
    scheduler, view = setup({"cpu": 1, "gpu": 1}, total={"CPU": 8, "GPU": 2})
    assert allocate(fn, scheduler, view).required_resources == {"CPU": 1.0, "GPU": 2.0}


def test_increase_by_and_its_limit():
    fn = DistributeResources(increase_by={"CPU": 2}, increase_by_times=1)
    scheduler, view = setup({"cpu": 1}, total={"CPU": 8})
    assert cpus(allocate(fn, scheduler, view)) == 3
    unlimited = DistributeResources(increase_by={"CPU": 2})
    assert cpus(allocate(unlimited, scheduler, view)) == 7  # 1 + 3 units of 2
    with pytest.raises(ValueError, match="increase_by must add some 'CPU' or 'GPU'"):
        DistributeResources(increase_by={"memory": 1})
    with pytest.raises(ValueError, match=">= 0"):
        DistributeResources(increase_by={"CPU": -1})


def test_add_bundles_and_reserved_resources():
    fn = DistributeResources(add_bundles=True)
    scheduler, view = setup({"cpu": 1}, total={"CPU": 3})
    assert allocate(fn, scheduler, view).bundles == [{"CPU": 1.0}] * 3
    reserved = DistributeResources(reserve_resources={"CPU": 2})
    scheduler, view = setup({"cpu": 1}, total={"CPU": 4})
    assert cpus(allocate(reserved, scheduler, view)) == 2


def test_head_bundle_memory_and_strategy_are_kept():
    fn = DistributeResources(add_bundles=True)
    base = PlacementGroupFactory([{}, {"CPU": 1}], strategy="SPREAD")
    scheduler, view = setup(base, total={"CPU": 2})
    new = allocate(fn, scheduler, view)
    assert new.head_bundle_is_empty and new.bundles == [{"CPU": 1.0}] * 2
    assert new.strategy == "SPREAD"
    scheduler, view = setup({"cpu": 1, "memory": 10**9}, total={"CPU": 2})
    assert allocate(DistributeResources(), scheduler, view).required_resources == {
        "CPU": 2.0,
        "memory": 1e9,
    }


def test_several_bundles_need_add_bundles():
    scheduler, view = setup(PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}]), total={"CPU": 4})
    with pytest.raises(ValueError, match="add_bundles=False .* single bundle"):
        allocate(DistributeResources(), scheduler, view)


def test_machine_totals_are_detected_when_the_view_does_not_tell():
    tune.init(num_cpus=3, num_gpus=0)
    try:
        scheduler, view = setup({"cpu": 1})
        assert not hasattr(view, "get_total_resources")
        assert cpus(allocate(DistributeResources(), scheduler, view)) == 3
    finally:
        tune.shutdown()


# ---------------------------------------------------------------------- to the top job
def test_top_job_gets_all_free_resources():
    fn = DistributeResourcesToTopJob(metric="score", mode="max")
    scheduler, view = setup({"cpu": 1}, n=3, total={"CPU": 6})
    for trial, score in zip(view.trials, [5, 9, 1]):
        trial.last_result = {"score": score}
    assert cpus(allocate(fn, scheduler, view, 1)) == 4
    assert cpus(allocate(fn, scheduler, view, 0)) == 1  # not the best: unchanged
    fn.mode = "min"
    assert cpus(allocate(fn, scheduler, view, 2)) == 4
    with pytest.raises(ValueError, match="needs a metric"):
        allocate(DistributeResourcesToTopJob(), scheduler, view)


# ---------------------------------------------------------------------- the scheduler
class Scripted(FIFOScheduler):
    def __init__(self, decision):
        super().__init__()
        self.decision = decision

    def on_trial_result(self, tune_controller, trial, result):
        return self.decision


def test_resources_change_only_when_the_base_scheduler_continues():
    for decision, expected in [("CONTINUE", 1), ("PAUSE", 0), ("STOP", 0)]:
        scheduler, view = setup({"cpu": 1}, total={"CPU": 2}, base=Scripted(decision))
        assert scheduler.on_trial_result(view, view.trials[0], result(1, 0)) == decision
        assert len(view.of("resources")) == expected


def test_allocation_results_are_normalized_and_unchanged_ones_skipped():
    scheduler, view = setup({"cpu": 1}, function=lambda *args: {"cpu": 2})
    scheduler.on_trial_result(view, view.trials[0], result(1, 0))
    [(_, options)] = view.of("resources")
    assert options["resources"] == PlacementGroupFactory([{"CPU": 2}])
    view.apply()
    scheduler.on_trial_result(view, view.trials[0], result(2, 0))
    assert view.of("resources") == []  # same as now: no restart


def test_function_none_never_changes_resources():
    with pytest.warns(UserWarning, match="resources_allocation_function"):
        scheduler, view = setup({"cpu": 1}, total={"CPU": 4}, function=None)
    scheduler.on_trial_result(view, view.trials[0], result(1, 0))
    assert view.requests == []


def test_trials_must_start_alike():
    scheduler, view = setup({"cpu": 1}, total={"CPU": 4})
    other = make_trial("big", {}, resources={"cpu": 2})
    with pytest.raises(RuntimeError, match="same resources"):
        scheduler.on_trial_add(view, other)


def test_metric_and_mode_reach_the_allocation_function():
    fn = DistributeResourcesToTopJob()
    base = FIFOScheduler()
    scheduler = ResourceChangingScheduler(base, fn)
    assert scheduler.set_search_properties("score", "min")
    assert scheduler.metric == "score" and scheduler.mode == "min"
    trial = make_trial("a", {}, resources={"cpu": 1})
    view = RecordingView([trial], total={"CPU": 2})
    scheduler.on_trial_add(view, trial)
    scheduler.on_trial_result(view, trial, result(1, 0))
    assert (fn.metric, fn.mode) == ("score", "min")
    assert view.of("resources")


def test_state_round_trip_reapplies_given_resources():
    scheduler, view = setup({"cpu": 1}, total={"CPU": 2})
    scheduler.on_trial_result(view, view.trials[0], result(1, 0))
    state = scheduler.get_state()
    # A restore rebuilds the trial with its starting resources.
    trial = make_trial("t0", {}, status=TrialStatus.PENDING, resources={"cpu": 1})
    restored = ResourceChangingScheduler()
    restored.set_state(state)
    view = RecordingView([trial], total={"CPU": 2})
    assert restored.choose_trial_to_run(view) is trial
    [(target, options)] = view.of("resources")
    assert target is trial and cpus(options["resources"]) == 2
    assert restored.base_trial_resources == PlacementGroupFactory([{"CPU": 1}])
    view.requests.clear()
    restored.choose_trial_to_run(view)
    assert view.requests == []  # only once
    trial.set_status(TrialStatus.TERMINATED)
    restored.on_trial_complete(view, trial, {})
    assert restored.get_state()["reallocated"] == {}  # finished trials are forgotten


def test_exact_decisions_and_debug_string():
    scheduler = ResourceChangingScheduler()
    assert scheduler.supports_buffered_results is False
    assert (
        scheduler.debug_string() == "(ResourceChangingScheduler) Using FIFO scheduling algorithm."
    )
    assert isinstance(scheduler, TrialScheduler)


# ---------------------------------------------------------------------- end to end
@pytest.fixture
def two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


def _lines(path):
    return [json.loads(line) for line in open(os.path.join(path, "result.json"))]


@pytest.mark.parametrize("trainable", [ResourceReporter, resource_reporting_fn])
def test_the_trainable_sees_its_new_resources(tmp_path, two_cpus, trainable):
    grid = tune.Tuner(
        trainable,
        param_space={"steps": 5},
        tune_config=tune.TuneConfig(scheduler=ResourceChangingScheduler()),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="rcs", verbose=0, stop={"training_iteration": 5}
        ),
    ).fit()
    lines = _lines(grid[0].path)
    assert [line["n"] for line in lines] == [1, 2, 3, 4, 5]  # continued from its checkpoint
    assert [line["cpus"] for line in lines] == [1, 2, 2, 2, 2]


class InterruptAt(tune.Callback):
    def __init__(self, marker, n):
        self.marker, self.n = marker, n

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result["n"] == self.n and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            signal.raise_signal(signal.SIGINT)


def test_given_resources_survive_tuner_restore(tmp_path, two_cpus):
    marker = str(tmp_path / "interrupted")
    scheduler = ResourceChangingScheduler()
    grid = tune.Tuner(
        ResourceReporter,
        tune_config=tune.TuneConfig(scheduler=scheduler),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            name="rcs",
            verbose=0,
            stop={"training_iteration": 6},
            callbacks=[InterruptAt(marker, 3)],
        ),
    ).fit()
    assert os.path.exists(marker) and grid.num_terminated == 0
    tuner = tune.Tuner.restore(grid.experiment_path, trainable=ResourceReporter)
    grid = tuner.fit()
    lines = _lines(grid[0].path)
    # It resumed from its checkpoint of n=1 (taken when it got 2 CPUs): result.json was
    # cut back to that line, so every iteration shows once.
    assert [line["n"] for line in lines] == [1, 2, 3, 4, 5, 6]
    # The restored trial starts again with the 2 CPUs it had been given, not 1.
    assert [line["cpus"] for line in lines] == [1, 2, 2, 2, 2, 2]
