"""AxSearch against the real Ax (and BoTorch): spaces, points, failures, clients, resume.

Ax's first trials are Sobol points (5 here, or twice the number of parameters); its
model fits after them take seconds on two cores, so most tests stay within them and
one Tuner run goes past them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

import fasttune as tune
from fasttune._support.imports import MissingDependencyError
from fasttune.search.ax import AxSearch
from tests.search import _searcher_driver as driver
from tests.search._searcher_driver import drive, fails_right_of_five, parabola

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.usefixtures("two_cpus")


@pytest.fixture(autouse=True)
def _no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch's numerical warnings
        yield


def statuses(searcher):
    return [trial.status.name for trial in searcher._ax.experiment.trials.values()]


# ---------------------------------------------------------------------- import
def test_importing_the_module_does_not_import_ax():
    code = "import sys, fasttune.search.ax; assert 'ax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_missing_ax_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ax", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[ax\]"'):
        AxSearch()


def test_registry_builds_it_by_rays_name():
    searcher = tune.search.create_searcher("ax", metric="m", mode="max")
    assert isinstance(searcher, AxSearch) and (searcher.metric, searcher.mode) == ("m", "max")


# ---------------------------------------------------------------------- through the Tuner
def test_tuner_runs_points_then_sobol_then_botorch(run_tuner):
    points = [{"x": 6.5}]
    searcher = AxSearch(points_to_evaluate=points, random_seed=0)
    grid = run_tuner(
        parabola,
        searcher,
        {"x": tune.uniform(0, 10), "k": "kept"},
        num_samples=8,
        concurrent=2,
        metric="reward",
        mode="max",
    )
    assert len(grid) == 8 and grid.num_errors == 0
    assert all(r.config["k"] == "kept" for r in grid)
    first = min(grid, key=lambda r: r.metrics["trial_id"])
    assert first.config == {"x": 6.5, "k": "kept"}
    assert statuses(searcher) == ["COMPLETED"] * 8
    experiment = searcher._ax.experiment
    assert not experiment.optimization_config.objective.minimize  # mode="max" reached Ax
    trials = list(experiment.trials.values())[1:]  # after the point
    methods = {trial.generator_run._generator_key for trial in trials}
    assert "Sobol" in methods and len(methods) == 2  # BoTorch's model suggested too
    assert grid.get_best_result().metrics["loss"] < 1.0


def test_failing_trials_are_marked_failed_in_ax_and_the_search_goes_on(run_tuner):
    searcher = AxSearch(random_seed=1)
    grid = run_tuner(
        fails_right_of_five,
        searcher,
        {"x": tune.uniform(0, 10)},
        num_samples=5,
        concurrent=2,
        metric="loss",
        mode="min",
    )
    assert len(grid) == 5 and 0 < grid.num_errors < 5
    assert sorted(statuses(searcher)) == sorted(
        ["FAILED"] * grid.num_errors + ["COMPLETED"] * (5 - grid.num_errors)
    )


def test_grid_search_in_the_tuner_space_is_a_value_error(run_tuner):
    with pytest.raises(ValueError, match=r"`x` uses grid_search"):
        run_tuner(parabola, AxSearch(), {"x": tune.grid_search([1, 2])}, metric="loss", mode="min")


# ---------------------------------------------------------------------- spaces
def test_convert_search_space_gives_ax_parameters():
    converted = AxSearch.convert_search_space(
        {
            "a": {"lr": tune.loguniform(1e-4, 1e-1)},
            "n": tune.lograndint(1, 100),
            "q": tune.qrandint(0, 20, 5),
            "act": tune.choice(["relu", "tanh"]),
            "obj": tune.choice([{"k": 1}, None]),
            "one": tune.choice([3]),
        }
    )
    assert converted == [
        {"name": "a/lr", "type": "range", "bounds": [1e-4, 1e-1], "value_type": "float",
         "log_scale": True},
        {"name": "n", "type": "range", "bounds": [1, 99], "value_type": "int", "log_scale": True},
        {"name": "q", "type": "range", "bounds": [0, 4], "value_type": "int", "log_scale": False},
        {"name": "act", "type": "choice", "values": ["relu", "tanh"], "is_ordered": False},
        {"name": "obj", "type": "choice", "values": [0, 1], "is_ordered": False},
        {"name": "one", "type": "fixed", "value": 3},
    ]  # fmt: skip


def test_values_stay_in_their_domains_and_choices_come_back_as_the_objects():
    categories = [{"k": 1}, None, [1, 2]]
    space = {
        "x": tune.quniform(0, 1, 0.25),
        "n": tune.randint(0, 3),
        "net": {"c": tune.choice(categories), "lr": tune.loguniform(1e-4, 1e-1)},
    }
    searcher = AxSearch(space, metric="loss", mode="min", random_seed=0)
    for config in drive(searcher, 8, lambda c: 0.0):
        assert config["x"] in (0.0, 0.25, 0.5, 0.75, 1.0) and config["n"] in (0, 1, 2)
        assert any(config["net"]["c"] is c for c in categories)
        assert 1e-4 <= config["net"]["lr"] <= 1e-1


@pytest.mark.parametrize(
    ("space", "match"),
    [
        ({"x": tune.randn(0, 1)}, r"`x` is a normal \(randn\) domain"),
        (
            {"m": tune.choice([{"a": tune.uniform(0, 1)}, {"b": 1}])},
            r"`m` is a choice of categories holding search domains \(a conditional space\)",
        ),
        ({"x": tune.sample_from(lambda _: 1)}, r"`x` is a sample_from"),
        ({"x": [tune.uniform(0, 1)]}, r"`x` is a list holding search domains"),
        ({"x": 1}, r"`space` holds no search domains"),
        ([{"type": "range"}], r"Ax parameter dicts, each with a 'name'"),
    ],
)
def test_unsupported_spaces_name_the_key(space, match):
    with pytest.raises(ValueError, match=match):
        AxSearch(space, metric="m", mode="min")


def test_native_parameter_list_with_nested_names_and_points():
    space = [
        {"name": "net/width", "type": "range", "bounds": [0.0, 10.0]},
        {"name": "act", "type": "choice", "values": ["relu", "tanh"]},
    ]
    point = {"net": {"width": 2.5}, "act": "tanh"}
    searcher = AxSearch(space, metric="m", mode="max", points_to_evaluate=[point])
    configs = drive(searcher, 4, lambda c: c["net"]["width"])
    assert configs[0] == point
    assert all(0 <= c["net"]["width"] <= 10 and c["act"] in ("relu", "tanh") for c in configs)


# ---------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metric": ["a", "b"]}, r"optimises a single metric"),
        ({"mode": "best"}, r"`mode` must be 'min' or 'max'"),
        ({"points_to_evaluate": {"x": 1}}, r"list of config dicts"),
        ({"parameter_constraints": "x <= 1"}, r"`parameter_constraints` must be a list"),
        ({"outcome_constraints": [1]}, r"`outcome_constraints` must be a list"),
    ],
)
def test_bad_arguments_are_rejected_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AxSearch(**kwargs)


def test_unknown_client_arguments_and_points_outside_the_space_are_named():
    with pytest.raises(ValueError, match=r"AxClient\(...\) does not take \['colour'"):
        AxSearch({"x": tune.uniform(0, 1)}, metric="m", mode="min", colour="red")
    with pytest.raises(ValueError, match=r"`x` is 3, outside its domain"):
        AxSearch({"x": tune.uniform(0, 1)}, metric="m", mode="min", points_to_evaluate=[{"x": 3}])


def test_missing_space_or_mode_is_a_runtime_error():
    driver.assert_runtime_errors_without_space_or_mode(AxSearch)


def test_an_ax_client_brings_metric_mode_and_space():
    from ax.service.ax_client import AxClient, ObjectiveProperties

    client = AxClient(random_seed=0, verbose_logging=False)
    client.create_experiment(
        parameters=[{"name": "x", "type": "range", "bounds": [0.0, 1.0]}],
        objectives={"acc": ObjectiveProperties(minimize=False)},
    )
    searcher = AxSearch(ax_client=client)
    assert (searcher.metric, searcher.mode) == ("acc", "max")
    config = searcher.suggest("t")
    searcher.on_trial_complete("t", {"acc": config["x"]})
    assert statuses(searcher) == ["COMPLETED"]
    with pytest.raises(ValueError, match=r"do not pass \['space', 'metric'\] as well"):
        AxSearch({"x": tune.uniform(0, 1)}, metric="m", ax_client=client)
    with pytest.raises(ValueError, match=r"has no experiment"):
        AxSearch(ax_client=AxClient(verbose_logging=False))


def test_outcome_constraint_metrics_are_read_from_the_result():
    searcher = AxSearch(
        {"x": tune.uniform(0, 1)}, metric="loss", mode="min", outcome_constraints=["l2 <= 0.5"]
    )
    searcher.suggest("a")
    searcher.on_trial_complete("a", {"loss": 1.0, "l2": 0.2})
    searcher.suggest("b")
    searcher.on_trial_complete("b", {"loss": 1.0})  # no l2: failed, not a guess
    assert statuses(searcher) == ["COMPLETED", "FAILED"]
    data = searcher._ax.experiment.fetch_data().df
    assert set(data["metric_name"]) == {"loss", "l2"}


# ---------------------------------------------------------------------- state
def test_a_fresh_searcher_restores_space_metric_mode_and_continues_exactly(tmp_path):
    original = AxSearch(metric="loss", mode="min", random_seed=2)
    original.set_search_properties(
        None, None, {"x": tune.uniform(-1, 1), "c": tune.choice([{"k": 1}, None])}
    )
    restored = AxSearch()
    objective = lambda c: (c["x"] - 0.5) ** 2  # noqa: E731
    driver.assert_restores_and_continues(tmp_path, original, restored, objective, 2, 2)
    assert statuses(restored) == ["COMPLETED"] * 5


def test_sigkilled_driver_resumes_without_repeated_or_lost_suggestions(tmp_path):
    grid, saved, reference = driver.killed_then_restored(tmp_path, "ax")
    driver.assert_resumed_as_reference(grid, reference)  # 3 Sobol points, then BoTorch's

    # The saved experiment holds every trial once, completed with its result, the ones
    # finished before the crash too; the 4th on was BoTorch's, before and after it.
    assert not saved["_live"]
    trials = list(saved["_ax"].experiment.trials.values())
    assert [t.status.name for t in trials] == ["COMPLETED"] * driver.NUM_SAMPLES
    assert [t.generator_run._generator_key for t in trials] == ["Sobol"] * 3 + ["BoTorch"] * 5
    data = saved["_ax"].experiment.fetch_data().df
    loss = {int(row.trial_index): row.mean for row in data.itertuples()}
    for index, result in enumerate(sorted(grid, key=driver._index)):
        parameters = trials[index].arm.parameters
        assert (parameters["x"], parameters["y"]) == (result.config["x"], result.config["y"])
        assert loss[index] == pytest.approx(result.metrics["loss"])
