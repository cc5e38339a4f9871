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
