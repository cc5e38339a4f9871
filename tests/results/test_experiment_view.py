"""ExperimentView on real experiment folders: finished, and one still running."""

from __future__ import annotations

import os
import time

import pytest

from fasttune.results.experiment_view import (
    ExperimentView,
    NotAnExperimentError,
    find_experiments,
)
from tests.experiments import iterations_of


def test_finished_experiment(project):
    view = ExperimentView(os.path.join(project, "errors"))
    assert (view.metric, view.mode) == ("loss", "min")
    assert view.status_counts() == {"TERMINATED": 3, "ERROR": 2}
    assert view.best_trial().config["x"] == 0.3
    failed = [t for t in view.trials if t.status == "ERROR"]
    assert all("is too large" in view.error_text(t.trial_id) for t in failed)
    assert [r["training_iteration"] for r in view.history(view.trials[0].trial_id)] == [
        1,
        2,
        3,
        4,
        5,
    ]
    pbt = ExperimentView(os.path.join(project, "pbt"))
    assert all(os.path.isdir(c) for t in pbt.trials for c in pbt.checkpoints(t.trial_id))
    with pytest.raises(KeyError, match="No trial 'nope'"):
        view.trial("nope")
    with pytest.raises(ValueError, match="mode must be 'min' or 'max', got 'best'"):
        ExperimentView(os.path.join(project, "errors"), mode="best")


def test_find_experiments_two_levels_down(project, tmp_path):
    assert [os.path.basename(p) for p in find_experiments(project)] == ["asha", "errors", "pbt"]
    os.symlink(project, tmp_path / "group")
    assert len(find_experiments(tmp_path)) == 3
    assert find_experiments(os.path.join(project, "asha")) == [os.path.join(project, "asha")]
    with pytest.raises(NotAnExperimentError, match="does not exist or is not a folder"):
        find_experiments(tmp_path / "missing")


def test_refresh_reads_a_running_experiment(live):
    view = ExperimentView(live)
    assert [t.status for t in view.trials] == ["RUNNING", "RUNNING"]
    first = sum(t.iterations for t in view.trials)
    target = iterations_of(live) + 4
    deadline = time.monotonic() + 30
    while iterations_of(live) < target and time.monotonic() < deadline:
        time.sleep(0.1)
    view.refresh()
    assert sum(t.iterations for t in view.trials) > first
    assert view.best_trial() is not None
