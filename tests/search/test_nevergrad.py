"""NevergradSearch against the real nevergrad library: spaces, ask/tell, points, resume."""

from __future__ import annotations

import logging
import math
import os
import pickle
import subprocess
import sys

import pytest

import fasttune as tune
from fasttune._support.imports import MissingDependencyError
from fasttune.search.nevergrad import NevergradSearch
from tests.search import _nevergrad_driver as driver
from tests.search._searcher_driver import drive, fails_right_of_five, parabola

# nevergrad is imported inside the tests that use it: worker processes import this
# module to load the trainables, and importing nevergrad takes seconds.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.usefixtures("two_cpus")


def sample_values(domain, count=200):
    """Values a domain takes, drawn by nevergrad's random search."""
    searcher = NevergradSearch("RandomSearch", space={"p": domain}, metric="loss", mode="min")
    return [config["p"] for config in drive(searcher, count, lambda config: 0.0)]


# ---------------------------------------------------------------------- import
def test_importing_the_module_does_not_import_nevergrad():
    code = "import sys, fasttune.search.nevergrad; assert 'nevergrad' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_missing_nevergrad_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nevergrad", None)  # makes `import nevergrad` fail
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[nevergrad\]"'):
        NevergradSearch()


# ---------------------------------------------------------------------- through the Tuner
def test_tuner_finds_a_near_optimum_of_a_quadratic(run_tuner):
    space = {"x": tune.uniform(0, 10), "k": "kept"}
    grid = run_tuner(
        parabola,
        NevergradSearch(),
        space,
        num_samples=24,
        concurrent=2,
        metric="reward",
        mode="max",
    )
    assert len(grid) == 24 and grid.num_errors == 0
    assert all(r.config["k"] == "kept" for r in grid)
    # In 3000 seeded runs of this search outside fasttune (OnePlusOne, 24 points, two
    # at a time) the best loss was at most 1.73. The sign of what is told is checked
    # exactly by test_max_mode_tells_the_negated_metric_and_min_mode_the_metric.
    assert grid.get_best_result().metrics["loss"] < 2.0


def test_points_to_evaluate_run_first_and_constants_are_kept(run_tuner):
    points = [{"x": 1.5, "n": 2, "act": "tanh"}, {"x": 9.0, "n": 0, "act": "relu"}]
    space = {
        "x": tune.uniform(0, 10),
        "n": tune.randint(0, 3),
        "act": tune.choice(["relu", "tanh"]),
    }
    searcher = NevergradSearch(points_to_evaluate=points)
    grid = run_tuner(
        parabola,
        searcher,
        {**space, "k": 1},
        num_samples=4,
        concurrent=1,
        metric="loss",
        mode="min",
    )
    first = sorted(grid, key=lambda r: r.metrics["trial_id"])[:2]
    assert [r.config for r in first] == [{**p, "k": 1} for p in points]
    assert searcher._optimizer.num_tell == 4  # the points were told as well


def test_failing_trials_are_not_told_and_the_search_goes_on(run_tuner):
    searcher = NevergradSearch("RandomSearch")
    grid = run_tuner(
        fails_right_of_five,
        searcher,
        {"x": tune.uniform(0, 10)},
        num_samples=10,
        concurrent=2,
        metric="loss",
        mode="min",
    )
    assert len(grid) == 10 and 0 < grid.num_errors < 10
    assert searcher._optimizer.num_tell == 10 - grid.num_errors
    assert not searcher._live


def test_sequential_optimizers_get_one_point_at_a_time_and_hear_failures(run_tuner):
    searcher = NevergradSearch("NelderMead", {"budget": 6})  # the budget ends its thread
    grid = run_tuner(
        fails_right_of_five,
        searcher,
        {"x": tune.uniform(0, 10)},
        num_samples=6,
        concurrent=2,
        metric="loss",
        mode="min",
    )
    assert len(grid) == 6 and searcher._optimizer.num_tell == 6  # failures told too


def test_sequential_optimizers_without_a_budget_are_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="fasttune.search.nevergrad"):
        NevergradSearch("Powell", space={"x": tune.uniform(0, 1)})
    assert "runs in a background thread" in caplog.text


def test_native_parametrization_through_the_tuner(run_tuner):
    import nevergrad as ng

    space = ng.p.Dict(**{"opt/x": ng.p.Scalar(lower=0, upper=10), "act": ng.p.Choice(["a", "b"])})
    searcher = NevergradSearch(ng.optimizers.OnePlusOne, space=space, metric="loss", mode="min")
    grid = run_tuner(_nested_parabola, searcher, {"k": 2}, num_samples=4)
    assert grid.num_errors == 0
    for result in grid:
        assert set(result.config) == {"opt", "act", "k"} and result.config["act"] in ("a", "b")
        assert 0 <= result.config["opt"]["x"] <= 10


def _nested_parabola(config):
    tune.report({"loss": (config["opt"]["x"] - 7) ** 2})


def test_metric_and_mode_from_tune_config_reach_a_searcher_built_with_a_space(run_tuner):
    searcher = NevergradSearch(space={"x": tune.uniform(0, 10)})
    grid = run_tuner(parabola, searcher, num_samples=3, metric="loss", mode="min")
    assert grid.num_errors == 0 and searcher.metric == "loss" and searcher.mode == "min"
    assert searcher._optimizer.num_tell == 3


def test_grid_search_in_the_tuner_space_is_a_value_error(run_tuner):
    with pytest.raises(ValueError, match="`x` uses grid_search"):
        run_tuner(
            parabola, NevergradSearch(), {"x": tune.grid_search([1, 2])}, metric="loss", mode="min"
        )


def test_no_space_at_all_is_a_runtime_error(run_tuner):
    with pytest.raises(RuntimeError, match="NevergradSearch has no search space"):
        run_tuner(parabola, NevergradSearch(), {"x": 3}, metric="loss", mode="min")


# ---------------------------------------------------------------------- space conversion
def test_uniform_and_loguniform_stay_in_bounds():
    values = sample_values(tune.uniform(-2, 3))
    assert all(-2 <= v <= 3 and type(v) is float for v in values)
    values = sample_values(tune.loguniform(1e-4, 1e-1))
    assert all(1e-4 <= v <= 1e-1 for v in values)
    assert min(values) < 1e-3  # log scale: the low decades are reached


def test_quantized_floats_round_to_the_step_and_reach_both_bounds():
    values = sample_values(tune.quniform(0, 1, 0.25))
    assert set(values) == {0.0, 0.25, 0.5, 0.75, 1.0}
    values = sample_values(tune.qloguniform(1, 100, 1))
    assert all(1 <= v <= 100 and v == int(v) for v in values)


def test_normal_domains_are_searched_around_their_mean():
    values = sample_values(tune.randn(10, 2), count=300)
    assert 9 < sum(values) / len(values) < 11 and all(type(v) is float for v in values)
    values = sample_values(tune.qrandn(10, 2, 0.5))
    assert all(v * 2 == int(v * 2) for v in values)


def test_randint_excludes_its_upper_bound_and_qrandint_includes_it():
    values = sample_values(tune.randint(0, 3))
    assert set(values) == {0, 1, 2} and all(type(v) is int for v in values)
    ints = sample_values(tune.qrandint(0, 10, 5))  # 2, not 2.0 (Ray's test)
    assert set(ints) == {0, 5, 10} and all(type(v) is int for v in ints)


def test_lograndint_excludes_its_upper_bound_and_qlograndint_includes_it():
    assert set(sample_values(tune.lograndint(1, 4))) == {1, 2, 3}
    assert set(sample_values(tune.qlograndint(2, 8, 2))) == {2, 4, 6, 8}


def test_choice_returns_the_category_objects_and_nested_spaces_keep_their_shape():
    categories = [None, [1, 2], {"a": 1}, "s"]
    values = sample_values(tune.choice(categories))
    assert all(v in categories for v in values) and len({repr(v) for v in values}) == 4
    searcher = NevergradSearch(
        space={
            "model": {"lr": tune.loguniform(1e-3, 1), "depth": tune.randint(1, 5)},
            1: tune.choice([0]),
        },
        metric="loss",
        mode="min",
    )
    config = searcher.suggest("t")
    assert set(config) == {"model", 1} and set(config["model"]) == {"lr", "depth"}


def test_convert_search_space_builds_nevergrad_parameters():
    import nevergrad as ng

    param = NevergradSearch.convert_search_space(
        {
            "u": tune.uniform(0, 1),
            "l": tune.loguniform(1e-3, 1),
            "c": tune.choice(["a", "b"]),
            "n": {"i": tune.randint(0, 10)},
        }
    )
    assert isinstance(param, ng.p.Dict) and sorted(param.keys()) == ["c", "l", "n/i", "u"]
    assert isinstance(param["l"], ng.p.Log) and isinstance(param["c"], ng.p.Choice)
    assert all(0 <= param.spawn_child().value["n/i"] <= 9 for _ in range(50))


@pytest.mark.parametrize(
    ("space", "match"),
    [
        ({"a": tune.grid_search([1, 2])}, "`a` uses grid_search"),
        ({"a": {"b": tune.sample_from(lambda spec: 1)}}, "`a/b` is a sample_from"),
        ({"layers": [tune.uniform(0, 1), 3]}, "`layers` is a list holding search domains"),
        ({"a/b": tune.uniform(0, 1), "a": {"b": tune.uniform(0, 1)}}, "parameter name `a/b`"),
    ],
)
def test_unsupported_spaces_name_the_key(space, match):
    with pytest.raises(ValueError, match=match):
        NevergradSearch(space=space)
    with pytest.raises(ValueError, match=match):
        NevergradSearch().set_search_properties("loss", "min", space)


# ---------------------------------------------------------------------- arguments
def test_optimizer_may_be_a_class_a_configured_optimizer_a_name_or_an_instance():
    import nevergrad as ng

    space = {"x": tune.uniform(0, 1)}
    for optimizer in (None, ng.optimizers.OnePlusOne, ng.optimizers.registry["EDA"], "PSO"):
        searcher = NevergradSearch(optimizer, space=space, metric="m", mode="min")
        assert 0 <= searcher.suggest("t")["x"] <= 1
    instance = ng.optimizers.OnePlusOne(ng.p.Dict(x=ng.p.Scalar(lower=0, upper=1)))
    assert 0 <= NevergradSearch(instance, metric="m", mode="min").suggest("t")["x"] <= 1
    array = ng.optimizers.OnePlusOne(ng.p.Array(shape=(2,)))
    config = NevergradSearch(array, space=["a", "b"], metric="m", mode="min").suggest("t")
    assert set(config) == {"a", "b"} and all(type(v) is float for v in config.values())


def test_optimizer_kwargs_build_the_optimizer():
    searcher = NevergradSearch(
        "TwoPointsDE", {"budget": 10, "num_workers": 2}, {"x": tune.uniform(0, 1)}, "m", "min"
    )
    assert searcher._optimizer.budget == 10 and searcher._optimizer.num_workers == 2


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"optimizer": "OnePlusOen"}, ValueError, "Did you mean 'OnePlusOne'"),
        ({"optimizer": 3}, ValueError, "must be a nevergrad optimizer"),
        ({"optimizer_kwargs": [1]}, TypeError, "`optimizer_kwargs` must be a dict"),
        ({"optimizer_kwargs": {"nope": 1}, "space": {"x": tune.uniform(0, 1)}}, ValueError, "nope"),
        ({"points_to_evaluate": {"x": 1}}, ValueError, "must be a list of config dicts"),
        ({"metric": ["a", "b"], "mode": ["min", "max"]}, ValueError, "single metric"),
        ({"mode": "minimize"}, ValueError, "`mode` must be 'min' or 'max'"),
        ({"space": {"x": 3}}, ValueError, "holds no search domains"),
        ({"space": ["x"]}, ValueError, "list of names is only accepted"),
    ],
)
def test_bad_arguments_are_rejected_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        NevergradSearch(**kwargs)


def test_an_optimizer_instance_takes_no_kwargs_and_no_space_dict():
    import nevergrad as ng

    instance = ng.optimizers.OnePlusOne(ng.p.Dict(x=ng.p.Scalar()))
    with pytest.raises(ValueError, match="already built"):
        NevergradSearch(instance, optimizer_kwargs={"budget": 3})
    with pytest.raises(ValueError, match="brings its own parametrization"):
        NevergradSearch(instance, space={"x": tune.uniform(0, 1)})
    with pytest.raises(ValueError, match="one name per dimension"):
        NevergradSearch(ng.optimizers.OnePlusOne(ng.p.Array(shape=(2,))), space=["a"])
    with pytest.raises(ValueError, match="keyword arguments only"):
        NevergradSearch(ng.optimizers.OnePlusOne(ng.p.Instrumentation(ng.p.Scalar())))


def test_points_must_give_every_searched_key_and_fit_the_space():
    space = {"x": tune.uniform(0, 1), "c": tune.choice(["a", "b"])}
    with pytest.raises(ValueError, match="no value for `c`"):
        NevergradSearch(space=space, points_to_evaluate=[{"x": 0.5}])
    with pytest.raises(ValueError, match="`x` is 2"):
        NevergradSearch(space=space, points_to_evaluate=[{"x": 2, "c": "a"}])
    with pytest.raises(ValueError, match="`c` is 'z'"):
        NevergradSearch(space=space, points_to_evaluate=[{"x": 0.5, "c": "z"}])


def test_points_come_first_in_order_for_native_spaces_too():
    import nevergrad as ng

    instrumentation = ng.p.Instrumentation(x=ng.p.Scalar(lower=0, upper=1), y=ng.p.Choice([1, 2]))
    points = [{"x": 0.25, "y": 2}, {"x": 0.75, "y": 1}]
    searcher = NevergradSearch(
        space=instrumentation, metric="loss", mode="min", points_to_evaluate=points
    )
    assert drive(searcher, 2, lambda c: c["x"]) == points
    assert searcher._optimizer.num_tell == 2 and 0 <= searcher.suggest("t")["x"] <= 1
    with pytest.raises(ValueError, match="does not fit the search space"):
        NevergradSearch(space=instrumentation, points_to_evaluate=[{"x": 0.5, "y": 3}])


def test_missing_metric_or_mode_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="needs a metric and a mode"):
        NevergradSearch(space={"x": tune.uniform(0, 1)}, metric="loss").suggest("t")
    with pytest.raises(RuntimeError, match="has no search space yet"):
        NevergradSearch(metric="loss", mode="min").suggest("t")
    searcher = NevergradSearch(space={"x": tune.uniform(0, 1)}, mode="max")
    searcher.suggest("t")  # only a mode: Ray's anonymous metric
    assert searcher.metric == "_metric"


# ---------------------------------------------------------------------- ask / tell
def _seeded_space():
    import nevergrad as ng

    space = ng.p.Dict(x=ng.p.Scalar(lower=-5, upper=5))
    space.random_state.seed(3)
    return space


def test_max_mode_tells_the_negated_metric_and_min_mode_the_metric():
    import nevergrad as ng

    optimizer = ng.optimizers.OnePlusOne(_seeded_space())
    expected = []
    for _ in range(12):  # nevergrad on its own, minimising (x - 1)^2
        candidate = optimizer.ask()
        expected.append(candidate.value["x"])
        optimizer.tell(candidate, (candidate.value["x"] - 1) ** 2)
    for mode, sign in (("max", -1), ("min", 1)):
        searcher = NevergradSearch(space=_seeded_space(), metric="score", mode=mode)
        seen = []
        for i in range(12):
            x = searcher.suggest(str(i))["x"]
            seen.append(x)
            searcher.on_trial_complete(str(i), {"score": sign * (x - 1) ** 2})
        assert seen == expected


def test_errors_results_without_the_metric_and_nan_are_not_told(caplog):
    searcher = NevergradSearch(space={"x": tune.uniform(0, 1)}, metric="loss", mode="min")
    for i in range(5):
        searcher.suggest(str(i))
    searcher.on_trial_complete("0", {"loss": 1.0}, error=True)
    searcher.on_trial_complete("1", None, error=True)
    with caplog.at_level(logging.WARNING, logger="fasttune.search.nevergrad"):
        searcher.on_trial_complete("2", {"acc": 1.0})
        searcher.on_trial_complete("3", {"lost": 1.0})
    searcher.on_trial_complete("4", {"loss": math.nan})
    searcher.on_trial_complete("unknown", {"loss": 1.0})
    assert searcher._optimizer.num_tell == 0 and not searcher._live
    assert len([r for r in caplog.records if "without a numeric 'loss'" in r.message]) == 1


def test_optimizers_that_cannot_learn_from_points_warn_once(caplog):
    searcher = NevergradSearch(
        "EDA",
        space={"x": tune.uniform(0, 1)},
        metric="loss",
        mode="min",
        points_to_evaluate=[{"x": 0.5}],
    )
    with caplog.at_level(logging.WARNING, logger="fasttune.search.nevergrad"):
        drive(searcher, 3, lambda c: c["x"])
    assert any("cannot learn from points it did not propose" in r.message for r in caplog.records)


# ---------------------------------------------------------------------- state
def test_save_and_restore_continue_exactly(tmp_path):
    def make():
        return NevergradSearch(space={"x": tune.uniform(-1, 1)}, metric="loss", mode="min")

    objective = lambda c: (c["x"] - 0.5) ** 2  # noqa: E731
    original = make()
    drive(original, 6, objective)
    running = original.suggest("live")  # still running when saved
    path = str(tmp_path / "searcher.pkl")
    original.save(path)
    restored = make()
    restored.restore(path)
    for searcher in (original, restored):
        searcher.on_trial_complete("live", {"loss": objective(running)})
        assert searcher._optimizer.num_tell == 7
    assert drive(restored, 5, objective, "n") == drive(original, 5, objective, "n")


def test_state_pickles_with_the_search_generator():
    from fasttune.search.search_generator import SearchGenerator

    generator = SearchGenerator(NevergradSearch(metric="loss", mode="min"))
    generator.set_search_properties(None, None, {"x": tune.uniform(0, 1)})
    generator.add_configurations({"x": tune.uniform(0, 1)}, num_samples=4)
    live = generator.next_suggestion("a")
    state = pickle.loads(pickle.dumps(generator.get_state()))
    copy = SearchGenerator(NevergradSearch(metric="loss", mode="min"))
    copy.set_state(state)
    copy.on_trial_complete("a", {"loss": live.config["x"]})
    assert copy.searcher._optimizer.num_tell == 1 and not copy.searcher._live


@pytest.mark.slow
def test_sigkilled_driver_resumes_without_repeated_or_lost_suggestions(tmp_path):
    grid, saved, reference = driver.killed_then_restored(tmp_path)
    assert len(grid) == driver.NUM_SAMPLES
    assert grid.num_terminated == driver.NUM_SAMPLES and grid.num_errors == 0
    by_order = sorted(grid, key=lambda r: r.metrics["trial_id"])
    configs = [(r.config["x"], r.config["y"]) for r in by_order]
    assert len(set(configs)) == driver.NUM_SAMPLES  # nothing suggested twice
    assert configs[0] == (driver.POINT["x"], driver.POINT["y"])  # the point ran once, first

    # The same seeded search without a crash suggests the same configs, in order.
    expected = [
        (r.config["x"], r.config["y"])
        for r in sorted(reference, key=lambda r: r.metrics["trial_id"])
    ]
    assert configs == expected

    # The optimizer heard every trial once, the ones finished before the crash too.
    optimizer = saved["_optimizer"]
    assert optimizer.num_tell == driver.NUM_SAMPLES and not saved["_live"]
    best = min(grid, key=lambda r: r.metrics["loss"])
    assert optimizer.current_bests["pessimistic"].mean == pytest.approx(best.metrics["loss"])
