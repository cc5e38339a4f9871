"""TrialPlateauStopper and ExperimentPlateauStopper: Ray's rules, worked out by hand."""

from __future__ import annotations

import math
import os
import pickle

import pytest

import fasttune as tune
from fasttune.stopper.experiment_plateau import ExperimentPlateauStopper
from fasttune.stopper.trial_plateau import TrialPlateauStopper


def feed(stopper, values, trial_id="t1", metric="loss"):
    return [stopper(trial_id, {metric: v}) for v in values]


# ---------------------------------------------------------------------- TrialPlateauStopper
def test_trial_plateau_waits_for_the_grace_period_and_the_window():
    # grace 5 > window 3: calls 1-4 are in the grace period, call 5 sees [1, 1, 1].
    assert feed(TrialPlateauStopper("loss", num_results=3, grace_period=5), [1] * 5) == (
        [False] * 4 + [True]
    )
    # window 4 > grace 2: the 4th call is the first with 4 values.
    assert feed(TrialPlateauStopper("loss", num_results=4, grace_period=2), [1] * 4) == (
        [False] * 3 + [True]
    )


def test_trial_plateau_std_is_strict_and_over_the_last_values():
    # Population std of [0, 1] is 0.5: not below 0.5. [1, 1.98]: 0.49 is below.
    stopper = TrialPlateauStopper("loss", std=0.5, num_results=2, grace_period=0)
    assert feed(stopper, [0, 1, 1.98]) == [False, False, True]
    # Defaults (std 0.01, 4 results, grace 4): a curve that flattens at 0.5.
    curve = [1.0, 0.8, 0.6, 0.5, 0.5, 0.5, 0.5, 0.5]
    # Windows: ..., [0.6 .5 .5 .5] std 0.043 (no), [.5 .5 .5 .5] at call 7: yes.
    assert feed(TrialPlateauStopper("loss"), curve) == [False] * 6 + [True, True]


def test_trial_plateau_counts_per_trial():
    stopper = TrialPlateauStopper("loss", num_results=2, grace_period=2)
    assert stopper("a", {"loss": 1}) is False
    assert stopper("b", {"loss": 1}) is False
    assert stopper("a", {"loss": 1}) is True
    assert stopper("b", {"loss": 5}) is False


@pytest.mark.parametrize(
    ("mode", "threshold", "plateau", "stops"),
    [
        ("max", 0.9, 0.5, False),  # max: must reach at least the threshold
        ("max", 0.9, 0.95, True),
        ("min", 0.1, 0.5, False),  # min: must be at or below it
        ("min", 0.1, 0.1, True),
        ("min", 0.0, 0.0, True),  # a zero threshold is a threshold (Ray skips its check)
        ("min", 0.0, 0.5, False),
    ],
)
def test_trial_plateau_metric_threshold(mode, threshold, plateau, stops):
    stopper = TrialPlateauStopper(
        "loss", num_results=2, grace_period=2, metric_threshold=threshold, mode=mode
    )
    assert feed(stopper, [plateau, plateau]) == [False, stops]


def test_trial_plateau_missing_or_nan_values_block_stopping_while_in_the_window():
    stopper = TrialPlateauStopper("loss", num_results=2, grace_period=0)
    results = [{"loss": 1}, {"other": 1}, {"loss": 1}, {"loss": 1}, {"loss": math.nan}]
    assert [stopper("t", r) for r in results] == [False, False, False, True, False]


def test_trial_plateau_reads_nested_metrics():
    stopper = TrialPlateauStopper("val/loss", num_results=2, grace_period=0)
    assert [stopper("t", {"val": {"loss": 0.3}}) for _ in range(2)] == [False, True]


def test_trial_plateau_pickles_mid_run():
    stopper = TrialPlateauStopper("loss", num_results=3, grace_period=0)
    feed(stopper, [1, 1])
    copy = pickle.loads(pickle.dumps(stopper))
    assert feed(copy, [1]) == [True]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"std": -0.1}, "std"),
        ({"num_results": 0}, "num_results"),
        ({"grace_period": -1}, "grace_period"),
        ({"grace_period": 1.5}, "grace_period"),
        ({"mode": "maximize"}, "mode"),
        ({"metric_threshold": 0.5}, "mode"),
        ({"metric_threshold": "high", "mode": "max"}, "metric_threshold"),
        ({"metric": ""}, "metric"),
    ],
)
def test_trial_plateau_validation(kwargs, name):
    kwargs.setdefault("metric", "loss")
    with pytest.raises(ValueError, match=f"`{name}`"):
        TrialPlateauStopper(**kwargs)


# ---------------------------------------------------------------------- ExperimentPlateauStopper
def test_experiment_plateau_keeps_the_top_values_across_trials():
    stopper = ExperimentPlateauStopper("loss", std=0.01, top=3)
    # top 3 smallest: [1.0], [0.5, 1.0], [0.5, 0.501, 1.0] (std 0.23), then
    # [0.5, 0.5, 0.501] (std 0.0005 <= 0.01): plateaued, and patience 0 stops at once.
    assert stopper("a", {"loss": 1.0}) is False
    assert stopper("b", {"loss": 0.5}) is False
    assert stopper("a", {"loss": 0.501}) is False
    assert stopper.stop_all() is False
    assert stopper("c", {"loss": 0.5}) is True
    assert stopper.stop_all() is True


def test_experiment_plateau_max_mode_keeps_the_largest():
    stopper = ExperimentPlateauStopper("acc", std=0.01, top=2, mode="max")
    assert [stopper("t", {"acc": v}) for v in (0.9, 0.1, 0.2, 0.905)] == [
        False,  # [0.9]
        False,  # [0.9, 0.1]: std 0.4
        False,  # [0.9, 0.2]
        True,  # [0.9, 0.905]: std 0.0025
    ]


def test_experiment_plateau_patience_counts_consecutive_plateaued_results():
    # As Ray: the count includes the result that finds the plateau, so patience 0 and
    # 1 both stop at the first plateaued result; patience 3 at the third.
    for patience, expected in ((0, 2), (1, 2), (3, 4)):
        stopper = ExperimentPlateauStopper("loss", std=0.01, top=2, patience=patience)
        decisions = [stopper("t", {"loss": 1.0}) for _ in range(5)]
        assert decisions.index(True) + 1 == expected, patience


def test_experiment_plateau_a_better_value_resets_the_count():
    stopper = ExperimentPlateauStopper("loss", std=0.01, top=2, patience=2)
    # [1] no; [1 1] count 1; [0.2 1] reset to 0; [0.2 0.2] count 1; [0.2 0.2] count 2: stop.
    assert feed(stopper, [1.0, 1.0, 0.2, 0.2, 0.9]) == [False, False, False, False, True]


def test_experiment_plateau_ignores_nan_and_needs_the_metric():
    stopper = ExperimentPlateauStopper("loss", std=0.01, top=2)
    assert feed(stopper, [1.0, math.nan, 1.0]) == [False, False, True]
    with pytest.raises(KeyError, match="'loss'.*reported keys: \\['acc'\\]"):
        stopper("t", {"acc": 1.0})


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"mode": "maximize"}, "mode"),
        ({"top": 1}, "top"),
        ({"top": 2.5}, "top"),
        ({"patience": -1}, "patience"),
        ({"std": 0}, "std"),
        ({"std": "small"}, "std"),
    ],
)
def test_experiment_plateau_validation(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        ExperimentPlateauStopper("loss", **kwargs)


def test_experiment_plateau_accepts_an_int_std():
    # Ray insists on a float; any positive number works here.
    assert ExperimentPlateauStopper("loss", std=1)._std == 1


# ---------------------------------------------------------------------- through the Tuner
@pytest.fixture
def two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


def flattening(config):
    for i in range(50):
        tune.report({"loss": max(1.0 - 0.2 * i, config["floor"])})


def _run_config(tmp_path, stop):
    return tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0, stop=stop)


def test_trial_plateau_stops_trials_in_a_run(tmp_path, two_cpus):
    # Losses 1.0 0.8 0.6 0.4 0.4 ... (floor 0.4): the window of 4 is flat at iteration 7.
    stopper = TrialPlateauStopper("loss")
    grid = tune.Tuner(
        flattening,
        param_space={"floor": tune.grid_search([0.4, 0.0])},
        run_config=_run_config(tmp_path, stopper),
    ).fit()
    iterations = {r.config["floor"]: r.metrics["training_iteration"] for r in grid}
    # floor 0.0: 1.0 ... 0.2, 0.0 at iteration 6, flat 0.0 from 6 to 9.
    assert iterations == {0.4: 7, 0.0: 9}
    for result in grid:
        lines = open(os.path.join(result.path, "result.json")).read().splitlines()
        assert len(lines) == result.metrics["training_iteration"]


def test_experiment_plateau_ends_the_experiment(tmp_path, two_cpus):
    # One trial at a time: the first trial's 2nd result fills the top 2 with equal
    # values, so the experiment stops; the other trials are never created (as in Ray
    # Tune, max_concurrent_trials creates trials as slots free).
    grid = tune.Tuner(
        flattening,
        param_space={"floor": tune.grid_search([1.0, 0.5, 0.0])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=_run_config(tmp_path, ExperimentPlateauStopper("loss", top=2)),
    ).fit()
    ran = {r.config["floor"]: r.metrics.get("training_iteration") for r in grid}
    assert ran == {1.0: 2}
