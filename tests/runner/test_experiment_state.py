"""The experiment state on disk: small whatever the number of results, readable alone."""

from __future__ import annotations

import os

import fasttune as tune
from fasttune._internal.experiment_state import ExperimentStateStore
from fasttune._internal.state_layout import BASE_FILE, JOURNAL_FILE, SNAPSHOT_FILE
from fasttune._internal.state_loading import load_trials


def chatty(config):
    for i in range(config["n"]):
        tune.report({"i": i, "payload": "x" * 50})


def _state_bytes(path: str) -> int:
    files = [os.path.join(path, f) for f in (SNAPSHOT_FILE, JOURNAL_FILE, BASE_FILE)]
    return sum(os.path.getsize(f) for f in files if os.path.exists(f))


def test_state_size_does_not_grow_with_results(run_config):
    small = tune.Tuner(chatty, param_space={"n": 10}, run_config=run_config(name="small")).fit()
    big = tune.Tuner(chatty, param_space={"n": 5000}, run_config=run_config(name="big")).fit()
    small_size = _state_bytes(small.experiment_path)
    big_size = _state_bytes(big.experiment_path)
    assert big_size < small_size * 1.2  # 500x the results, about the same state
    assert os.path.getsize(os.path.join(big[0].path, "result.json")) > 100 * small_size


def test_state_files_alone_rebuild_the_trials(run_config):
    grid = tune.Tuner(
        chatty,
        param_space={"n": tune.grid_search([2, 3])},
        run_config=run_config(),
    ).fit()
    trials = load_trials(grid.experiment_path)
    assert sorted(t.config["n"] for t in trials) == [2, 3]
    assert {t.status for t in trials} == {"TERMINATED"}
    assert sorted(t.last_result["i"] for t in trials) == [1, 2]
    loaded = ExperimentStateStore(grid.experiment_path).load()
    assert loaded.search_num_trials == 2

    analysis = tune.ExperimentAnalysis(grid.experiment_path)
    assert sorted(c["n"] for c in analysis.get_all_configs().values()) == [2, 3]


def test_infinite_samples_end_with_the_time_budget(run_config):
    def quick(config):
        tune.report({"x": config["x"]})

    grid = tune.Tuner(
        quick,
        param_space={"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(num_samples=-1, time_budget_s=1.0),
        run_config=run_config(),
    ).fit()
    assert len(grid) > 10 and grid.num_errors == 0
    assert grid.num_terminated == len(grid)
