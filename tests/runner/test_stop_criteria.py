"""``RunConfig(stop={...})`` naming keys that some or all results lack (as in Ray Tune:
a warning, once per key, and the criterion is skipped for that result)."""

from __future__ import annotations

import logging

import fasttune as tune


def sparse_validation(config):
    for step in range(1, 13):
        metrics = {"step": step}
        if step % 3 == 0:  # a validation metric, every third iteration
            metrics["val_acc"] = step / 10
        tune.report(metrics)


def test_a_key_reported_every_few_results_stops_the_trial_when_it_is(run_config):
    grid = tune.Tuner(sparse_validation, run_config=run_config(stop={"val_acc": 0.6})).fit()
    assert not grid.errors
    assert grid[0].metrics["training_iteration"] == 6  # the first val_acc >= 0.6


def test_a_key_never_reported_lets_trials_run_to_their_end_with_one_warning(run_config, caplog):
    with caplog.at_level(logging.WARNING, logger="fasttune.experiment.trial"):
        grid = tune.Tuner(
            sparse_validation,
            param_space={"x": tune.grid_search([1, 2])},
            run_config=run_config(stop={"never_reported": 1.0}),
        ).fit()
    assert not grid.errors
    assert [r.metrics["training_iteration"] for r in grid] == [12, 12]
    warnings = [r for r in caplog.records if "never_reported" in r.getMessage()]
    assert len(warnings) == 1
