"""Looking at an experiment unpickles nothing: the command line, the dashboard's data
layer and ExperimentView read JSON only (state records, ``params.json``, results), so
they run none of the experiment's code. A config value records each unpickling of it
(``_tripwire.py``); ExperimentAnalysis, which gives exact configs as Ray's does, is the
control that shows the wire works.
"""

from __future__ import annotations

import os

import pytest

import fasttune as tune
from fasttune.cli import main
from fasttune.dashboard._data import Experiments, experiment_detail, trial_detail, trials_page
from fasttune.results.experiment_view import ExperimentView
from tests.results._tripwire import ENV, Tripwire


def _score(config):
    for i in range(3):
        tune.report({"score": config["x"] * 10 + i})


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    storage = str(tmp_path_factory.mktemp("display"))
    tune.init(num_cpus=2)
    try:
        tune.Tuner(
            _score,
            param_space={"x": tune.grid_search([1, 2]), "tag": Tripwire("a")},
            tune_config=tune.TuneConfig(metric="score", mode="max"),
            run_config=tune.RunConfig(storage_path=storage, name="exp", verbose=0),
        ).fit()
    finally:
        tune.shutdown()
    return storage, os.path.join(storage, "exp")


@pytest.fixture
def wire(tmp_path, monkeypatch):
    log = tmp_path / "unpickled.log"
    monkeypatch.setenv(ENV, str(log))
    return log


def test_the_command_line_and_the_dashboard_unpickle_nothing(experiment, wire, capsys):
    storage, path = experiment
    view = ExperimentView(path)
    assert sorted(t.config["x"] for t in view.trials) == [1, 2]
    assert {t.config["tag"] for t in view.trials} == {"Tripwire('a')"}  # its JSON text
    assert main(["ls", path]) == 0
    assert main(["show", path]) == 0
    assert main(["lsx", storage]) == 0
    assert "Tripwire('a')" in capsys.readouterr().out
    experiments = Experiments(storage)
    data_view = experiments.view("exp")
    detail = experiment_detail("exp", data_view)
    assert detail["best"] == 22 and set(detail["params"]) == {"x", "tag"}
    page = trials_page(
        data_view, offset=0, limit=10, sort=None, desc=False, query="", status="", metric=None
    )
    assert len(page["rows"]) == 2
    for trial in data_view.trials:
        assert trial_detail(data_view, trial.trial_id)["trial_id"] == trial.trial_id
    assert not wire.exists(), wire.read_text()


def test_the_dataframe_is_readable_from_json_alone(experiment, wire):
    from fasttune.results.experiment_view import _DisplayAnalysis

    _, path = experiment
    shown = _DisplayAnalysis(path).dataframe()
    assert not wire.exists()
    exact = tune.ExperimentAnalysis(path)  # exact configs: unpickles, as Ray's does
    assert wire.exists()  # the control: the wire records an unpickling
    assert [t.config["tag"] for t in exact.trials] == [Tripwire("a")] * 2
    full = exact.dataframe()
    assert list(shown["score"]) == list(full["score"])
    assert list(shown["config/x"]) == list(full["config/x"])
