"""A finished trial keeps less, and reads the same."""

from __future__ import annotations

import numpy as np
import pytest

from fasttune import result as R
from fasttune.experiment.trial import Trial, TrialStatus


def report(trial: Trial, values: list[float]) -> None:
    for i, value in enumerate(values, start=1):
        trial.update_last_result(
            {
                "loss": value,
                R.TRAINING_ITERATION: i,
                R.HOSTNAME: "host-" + "x" * 3,
                R.CONFIG: {"lr": 0.1},
            }
        )


def test_statistics_read_the_same_after_the_trial_finishes():
    trial = Trial("f", config={"lr": 0.1})
    report(trial, [5.0, 3.0, 4.0, 1.0, 2.0, 7.0, 6.0, 0.5, 9.0, 8.0, 3.5, 2.5])
    before = trial.metric_analysis
    trial.set_status(TrialStatus.TERMINATED)
    assert trial.metric_analysis == before
    assert before["loss"]["last-5-avg"] == pytest.approx((0.5 + 9 + 8 + 3.5 + 2.5) / 5)
    assert trial.last_flat_result == {}


def test_last_result_shares_the_trial_config_and_interns_strings():
    trial = Trial("f", config={"lr": 0.1})
    report(trial, [1.0])
    trial.set_status(TrialStatus.TERMINATED)
    assert trial.last_result[R.CONFIG] is trial.config
    other = Trial("g", config={"lr": 0.1})
    report(other, [2.0])
    other.set_status(TrialStatus.ERROR)
    assert trial.last_result[R.HOSTNAME] is other.last_result[R.HOSTNAME]


def test_a_config_that_does_not_compare_plainly_is_left_alone():
    trial = Trial("f", config={"w": np.arange(3)})
    trial.update_last_result({"loss": 1.0, R.CONFIG: {"w": np.arange(3)}})
    trial.set_status(TrialStatus.TERMINATED)
    assert trial.last_result[R.CONFIG] is not trial.config


def test_reporting_again_after_finishing_keeps_counting():
    trial = Trial("f")
    report(trial, [1.0, 3.0])
    trial.set_status(TrialStatus.TERMINATED)
    trial.set_status(TrialStatus.RUNNING)
    trial.update_last_result({"loss": 5.0})
    analysis = trial.metric_analysis["loss"]
    assert (analysis["max"], analysis["min"], analysis["avg"], analysis["last"]) == (5, 1, 3, 5)


def test_a_restored_finished_trial_is_compacted_and_reads_its_statistics_from_files(tmp_path):
    import fasttune as tune
    from fasttune.results import ExperimentAnalysis

    def trainable(config):
        for i in range(4):
            tune.report({"loss": config["x"] * (4 - i)})

    tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1.0, 2.0])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit()
    trials = ExperimentAnalysis(str(tmp_path / "exp")).trials
    assert len(trials) == 2
    for trial in trials:
        assert trial.last_flat_result == {}
        assert all(type(entry) is tuple for entry in trial._stats.values())
        assert trial.last_result[R.CONFIG] is trial.config
        loss = trial.metric_analysis["loss"]  # every result, from the trial's files
        x = trial.config["x"]
        assert (loss["max"], loss["min"], loss["avg"]) == (4 * x, x, 2.5 * x)


def test_a_trial_keeps_its_attributes_in_slots_and_still_takes_others():
    import copy
    import pickle
    import sys

    trial = Trial("f", config={"lr": 0.1})
    report(trial, [1.0, 2.0])
    assert not hasattr(trial, "__dict__") or not trial.__dict__
    assert sys.getsizeof(trial) < 400  # a dict of its 33 attributes alone took 1.6 KB
    trial.custom_mark = "set by a callback"
    for copied in (pickle.loads(pickle.dumps(trial)), copy.deepcopy(trial)):
        assert copied.trial_id == trial.trial_id
        assert copied.last_result == trial.last_result
        assert copied.metric_analysis == trial.metric_analysis
        assert copied.custom_mark == "set by a callback"
