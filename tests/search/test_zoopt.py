"""ZOOptSearch against the real zoopt library: spaces, RACOS, points, failures, resume."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

import fasttune as tune
from fasttune._support.imports import MissingDependencyError
from fasttune.search.zoopt import ZOOptSearch
from tests.search import _searcher_driver as driver
from tests.search._searcher_driver import drive, fails_right_of_five, parabola

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.usefixtures("two_cpus")


def values_of(domain, count=60):
    # a continuous companion keeps samples distinct, so small domains are not used up
    space = {"p": domain, "z": tune.uniform(0, 1)}
    searcher = ZOOptSearch(budget=count, dim_dict=space, metric="loss", mode="min", seed=0)
    return [config["p"] for config in drive(searcher, count, lambda config: 0.0)]


# ---------------------------------------------------------------------- import
def test_importing_the_module_does_not_import_zoopt():
    code = "import sys, fasttune.search.zoopt; assert 'zoopt' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_missing_zoopt_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "zoopt", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[zoopt\]"'):
        ZOOptSearch(budget=10)


def test_registry_builds_it_by_rays_name():
    searcher = tune.search.create_searcher("zoopt", budget=10, metric="m", mode="max")
    assert isinstance(searcher, ZOOptSearch) and (searcher.metric, searcher.mode) == ("m", "max")


# ---------------------------------------------------------------------- through the Tuner
@pytest.mark.parametrize("values", [1, 3])  # used up in the first samples, or after them
def test_a_small_discrete_space_ends_the_search_without_a_phantom_trial(values):
    space = {"n": tune.randint(0, values), "c": tune.choice(["a", "b"])}
    searcher = ZOOptSearch(budget=10, dim_dict=space, metric="loss", mode="min", seed=0)
    configs = []
    for i in range(50):
        config = searcher.suggest(f"t{i}")
        if config == ZOOptSearch.FINISHED:
            break
        assert isinstance(config, dict)  # never None: nothing else is running
        configs.append(config)
        searcher.on_trial_complete(f"t{i}", {"loss": config["n"]})
    assert config == ZOOptSearch.FINISHED
    assert {(c["n"], c["c"]) for c in configs} <= {(n, c) for n in range(values) for c in "ab"}
    assert not searcher.optimizer.live_num  # no sample counted as running without a trial


def test_tuner_one_trial_at_a_time_finds_a_near_optimum(run_tuner):
    # One at a time, every first sample is back before RACOS's barrier after them; the
    # search must not stall there (SRacosTune alone waits forever in that case).
    grid = run_tuner(
        parabola,
        ZOOptSearch(budget=20, seed=3),
        {"x": tune.uniform(0, 10), "k": "kept"},
        num_samples=20,
        concurrent=1,
        metric="reward",
        mode="max",
    )
    assert len(grid) == 20 and grid.num_errors == 0
    assert all(r.config["k"] == "kept" for r in grid)
    assert len({r.config["x"] for r in grid}) == 20
    assert grid.get_best_result().metrics["loss"] < 0.5


def test_points_run_first_and_parallel_num_trials_run_at_once(run_tuner):
    points = [{"x": 1.5, "act": "tanh"}, {"x": 9.0, "act": "relu"}]
    space = {"x": tune.uniform(0, 10), "act": tune.choice(["relu", "tanh"])}
    searcher = ZOOptSearch(budget=10, points_to_evaluate=points, parallel_num=2, seed=0)
    grid = run_tuner(parabola, searcher, space, num_samples=10, metric="loss", mode="min")
    first = sorted(grid, key=lambda r: r.metrics["trial_id"])[:2]
    assert [r.config for r in first] == points
    assert searcher.optimizer.complete_num == 10 and not searcher._live


def test_failing_trials_are_told_the_worst_loss_and_the_search_goes_on(run_tuner):
    searcher = ZOOptSearch(budget=12, seed=1)
    grid = run_tuner(
        fails_right_of_five,
        searcher,
        {"x": tune.uniform(0, 10)},
        num_samples=12,
        concurrent=1,
        metric="loss",
        mode="min",
    )
    assert len(grid) == 12 and 0 < grid.num_errors < 12
    assert searcher.optimizer.complete_num == 12  # failures are told too: RACOS never waits


def test_grid_search_in_the_tuner_space_is_a_value_error(run_tuner):
    with pytest.raises(ValueError, match=r"`x` uses grid_search"):
        run_tuner(parabola, ZOOptSearch(budget=4), {"x": tune.grid_search([1, 2])})


# ---------------------------------------------------------------------- spaces
def test_randint_excludes_its_upper_bound_and_qrandint_reaches_both_ends():
    assert set(values_of(tune.randint(0, 3))) == {0, 1, 2}
    values = values_of(tune.qrandint(0, 20, 5))
    assert set(values) == {0, 5, 10, 15, 20} and all(type(v) is int for v in values)


def test_quantized_floats_and_log_domains_stay_on_their_grid_and_bounds():
    values = values_of(tune.quniform(0, 1, 0.25))
    assert set(values) <= {0.0, 0.25, 0.5, 0.75, 1.0} and len(set(values)) > 2
    assert all(1e-4 <= v <= 1e-1 for v in values_of(tune.loguniform(1e-4, 1e-1)))
    logs = values_of(tune.lograndint(1, 100))
    assert all(type(v) is int and 1 <= v <= 99 for v in logs)
    assert set(values_of(tune.qlograndint(10, 40, 10))) <= {10, 20, 30, 40}


def test_choice_returns_the_category_objects_and_nested_spaces_keep_their_shape():
    categories = [{"a": 1}, None, [1, 2]]
    searcher = ZOOptSearch(
        budget=20,
        dim_dict={"net": {"c": tune.choice(categories), "n": tune.uniform(1, 4)}},
        metric="loss",
        mode="min",
        seed=0,
    )
    configs = drive(searcher, 12, lambda config: 0.0)
    assert all(set(c) == {"net"} and set(c["net"]) == {"c", "n"} for c in configs)
    assert all(any(c["net"]["c"] is cat for cat in categories) for c in configs)


def test_convert_search_space_gives_zoopt_tuples():
    from zoopt import ValueType

    converted = ZOOptSearch.convert_search_space(
        {
            "a": {"x": tune.uniform(-1, 1)},
            "n": tune.qrandint(0, 20, 5),
            "c": tune.choice(["x", "y"]),
        }
    )
    assert converted == {
        "a/x": (ValueType.CONTINUOUS, [-1.0, 1.0], 1e-12),
        "n": (ValueType.DISCRETE, [0, 4], True),
        "c": (ValueType.GRID, [0, 1]),
    }


def test_native_dim_dict_with_nested_names_and_points():
    from zoopt import ValueType

    dims = {
        "net/width": (ValueType.CONTINUOUS, [-10, 10], 1e-2),
        "depth": (ValueType.DISCRETE, [1, 4], True),
        "act": (ValueType.GRID, ["relu", "tanh"]),
    }
    point = {"net": {"width": 2.5}, "depth": 3, "act": "tanh"}
    searcher = ZOOptSearch(
        budget=10, dim_dict=dims, points_to_evaluate=[point], metric="m", mode="max", seed=0
    )
    configs = drive(searcher, 8, lambda config: config["depth"])
    assert configs[0] == point
    assert all(-10 <= c["net"]["width"] <= 10 and c["act"] in ("relu", "tanh") for c in configs)


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
        ({"x": tune.uniform(0, 1), "k": 3}, r"`dim_dict` entry 'k' is 3, neither a search"),
        ({"x": (2, [])}, r"must be \(ValueType.GRID, \[value, ...\]\)"),
        ({"x": (1, [3, 1], 0.1)}, r"lower <= upper"),
    ],
)
def test_unsupported_spaces_name_the_key(space, match):
    with pytest.raises(ValueError, match=match):
        ZOOptSearch(budget=10, dim_dict=space)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, r"`budget` must be an int >= 3.*got None"),
        ({"budget": 2}, r"`budget` must be an int >= 3.*got 2"),
        ({"budget": 10, "algo": "racos"}, r"`algo` must be 'asracos' or 'sracos', got 'racos'"),
        ({"budget": 10, "parallel_num": 0}, r"`parallel_num` must be an int >= 1, got 0"),
        ({"budget": 10, "seed": -1}, r"`seed` must be an int in \[0, 2\*\*32\)"),
        ({"budget": 10, "metric": ["a", "b"]}, r"optimises a single metric"),
        ({"budget": 10, "mode": "best"}, r"`mode` must be 'min' or 'max'"),
        ({"budget": 10, "points_to_evaluate": {"x": 1}}, r"list of config dicts"),
    ],
)
def test_bad_arguments_are_rejected_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ZOOptSearch(**kwargs)


def test_algo_is_case_insensitive_and_unknown_parameter_kwargs_are_named():
    assert ZOOptSearch(algo="ASRacos", budget=5)._algo == "asracos"
    with pytest.raises(ValueError, match=r"does not take \['colour'\]"):
        ZOOptSearch(budget=5, dim_dict={"x": tune.uniform(0, 1)}, colour="red")


def test_points_must_fit_the_space_and_zoopts_first_sample_set():
    space = {"x": tune.uniform(0, 1)}
    with pytest.raises(ValueError, match=r"`x` is 3, outside its domain"):
        ZOOptSearch(budget=10, dim_dict=space, points_to_evaluate=[{"x": 3}])
    with pytest.raises(ValueError, match=r"gives no value for `x`"):
        ZOOptSearch(budget=10, dim_dict=space, points_to_evaluate=[{"y": 0.5}])
    too_many = [{"x": i / 10} for i in range(5)]
    with pytest.raises(ValueError, match=r"5 `points_to_evaluate` given.*holds 4"):
        ZOOptSearch(budget=10, dim_dict=space, points_to_evaluate=too_many)


def test_missing_space_or_metric_mode_is_a_runtime_error():
    driver.assert_runtime_errors_without_space_or_mode(
        lambda space=None, **kwargs: ZOOptSearch(budget=5, dim_dict=space, **kwargs)
    )


def test_max_mode_tells_the_negated_metric():
    searcher = ZOOptSearch(budget=10, dim_dict={"x": tune.uniform(0, 1)}, metric="m", mode="max")
    searcher.suggest("t")
    solution = searcher._live["t"]
    searcher.on_trial_complete("t", {"m": 0.75})
    assert solution.get_value() == -0.75
    searcher.suggest("u")
    unfinished = searcher._live["u"]
    searcher.on_trial_complete("u", {"other": 1.0})
    assert unfinished.get_value() == math.inf


def test_numpys_global_generator_neither_moves_nor_is_moved_by_the_search():
    import numpy as np

    def run(reseed):
        searcher = ZOOptSearch(
            budget=10, dim_dict={"x": tune.uniform(0, 1)}, metric="m", mode="min", seed=4
        )
        configs = []
        for i in range(8):
            if reseed:
                np.random.seed(i)
            configs.append(drive(searcher, 1, lambda c: c["x"], prefix=f"t{i}-")[0])
        return configs

    np.random.seed(123)
    first = run(reseed=False)
    assert np.random.randint(1 << 30) == np.random.RandomState(123).randint(1 << 30)
    assert run(reseed=True) == first


# ---------------------------------------------------------------------- state
def test_a_fresh_searcher_restores_space_metric_mode_and_continues_exactly(tmp_path):
    original = ZOOptSearch(budget=12, metric="loss", mode="min", seed=2)
    original.set_search_properties(None, None, {"x": tune.uniform(-1, 1), "n": tune.randint(0, 5)})
    fresh = ZOOptSearch(budget=3)  # nothing but a budget: the rest comes from the file
    objective = lambda c: (c["x"] - 0.5) ** 2 + c["n"]  # noqa: E731
    driver.assert_restores_and_continues(tmp_path, original, fresh, objective, 6, 6)


@pytest.mark.slow
def test_sigkilled_driver_resumes_without_repeated_or_lost_suggestions(tmp_path):
    grid, saved, reference = driver.killed_then_restored(tmp_path, "zoopt")
    driver.assert_resumed_as_reference(grid, reference)
    assert saved["optimizer"].complete_num == driver.NUM_SAMPLES and not saved["_live"]
