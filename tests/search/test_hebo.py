"""HEBOSearch against the real HEBO: spaces, batches, points, rewards, failures, resume.

HEBO's model-based suggestions take seconds each on two cores, so most tests stay in
its random phase (``rand_sample`` large) and one Tuner run goes past it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import fasttune as tune
from fasttune._support.imports import MissingDependencyError
from fasttune.search.hebo import HEBOSearch
from tests.search import _searcher_driver as driver
from tests.search._searcher_driver import drive, parabola

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.usefixtures("two_cpus")


def random_phase(space, **kwargs):
    """A searcher that stays in HEBO's random phase (fast) for 50 suggestions."""
    kwargs = {"metric": "loss", "mode": "min", "random_state_seed": 0, **kwargs}
    return HEBOSearch(space, rand_sample=50, max_concurrent=1, **kwargs)


# ---------------------------------------------------------------------- import
def test_importing_the_module_does_not_import_hebo():
    code = "import sys, fasttune.search.hebo; assert 'hebo' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_missing_hebo_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "hebo", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[hebo\]"'):
        HEBOSearch()


def test_registry_builds_it_by_rays_name():
    searcher = tune.search.create_searcher("hebo", metric="m", mode="max")
    assert isinstance(searcher, HEBOSearch) and (searcher.metric, searcher.mode) == ("m", "max")


# ---------------------------------------------------------------------- through the Tuner
def test_tuner_runs_points_then_batches_of_the_concurrency_limit(run_tuner):
    searcher = HEBOSearch(points_to_evaluate=[{"x": 6.5}], random_state_seed=0)
    grid = run_tuner(
        parabola,
        searcher,
        {"x": tune.uniform(0, 10), "k": "kept"},
        num_samples=5,
        concurrent=2,  # the ConcurrencyLimiter hands HEBO a batch size of 2
        metric="reward",
        mode="max",
    )
    assert len(grid) == 5 and grid.num_errors == 0
    assert all(r.config["k"] == "kept" for r in grid)
    first = min(grid, key=lambda r: r.metrics["trial_id"])
    assert first.config == {"x": 6.5, "k": "kept"}
    assert searcher._max_concurrent == 2
    observed = searcher._opt.y.reshape(-1).tolist()  # HEBO minimises: rewards negated
    assert sorted(observed) == sorted(r.metrics["loss"] for r in grid)


def test_grid_search_in_the_tuner_space_is_a_value_error(run_tuner):
    with pytest.raises(ValueError, match=r"`x` uses grid_search"):
        run_tuner(parabola, HEBOSearch(), {"x": tune.grid_search([1, 2])}, metric="m", mode="min")


# ---------------------------------------------------------------------- spaces
def test_convert_search_space_builds_a_design_space():
    space = HEBOSearch.convert_search_space(
        {
            "a": {"lr": tune.loguniform(1e-4, 1e-1)},
            "n": tune.lograndint(1, 100),
            "q": tune.qrandint(0, 20, 5),
            "x": tune.uniform(-1, 1),
            "act": tune.choice(["relu", "tanh"]),
        }
    )
    kinds = {name: type(space.paras[name]).__name__ for name in space.para_names}
    assert kinds == {
        "a/lr": "PowPara",
        "n": "PowIntegerPara",
        "q": "IntegerPara",
        "x": "NumericPara",
        "act": "CategoricalPara",
    }
    assert (space.paras["q"].lb, space.paras["q"].ub) == (0, 4)


def test_values_stay_in_their_domains_and_choices_come_back_as_the_objects():
    categories = [{"k": 1}, None, [1, 2]]
    space = {
        "x": tune.quniform(0, 1, 0.25),
        "n": tune.randint(0, 3),
        "m": tune.lograndint(1, 100),
        "net": {"c": tune.choice(categories), "lr": tune.loguniform(1e-4, 1e-1)},
    }
    configs = drive(random_phase(space), 30, lambda c: 0.0)
    assert {c["x"] for c in configs} <= {0.0, 0.25, 0.5, 0.75, 1.0}
    assert {c["n"] for c in configs} == {0, 1, 2}
    assert all(type(c["m"]) is int and 1 <= c["m"] <= 99 for c in configs)
    assert all(any(c["net"]["c"] is cat for cat in categories) for c in configs)
    assert all(1e-4 <= c["net"]["lr"] <= 1e-1 for c in configs)


@pytest.mark.parametrize(
    ("space", "error", "match"),
    [
        ({"x": tune.randn(0, 1)}, ValueError, r"`x` is a normal \(randn\) domain"),
        (
            {"m": tune.choice([{"a": tune.uniform(0, 1)}, {"b": 1}])},
            ValueError,
            r"`m` is a choice of categories holding search domains \(a conditional space\)",
        ),
        ({"x": tune.sample_from(lambda _: 1)}, ValueError, r"`x` is a sample_from"),
        ({"x": [tune.uniform(0, 1)]}, ValueError, r"`x` is a list holding search domains"),
        ({"x": 1}, TypeError, r"got constants only"),
        ([1, 2], TypeError, r"a HEBO DesignSpace or a dict of search domains, got list"),
    ],
)
def test_unsupported_spaces_name_the_key(space, error, match):
    with pytest.raises(error, match=match):
        HEBOSearch(space, metric="m", mode="min")


def test_native_design_space_with_nested_names_and_points():
    from hebo.design_space.design_space import DesignSpace

    space = DesignSpace().parse(
        [
            {"name": "net/width", "type": "num", "lb": 0, "ub": 10},
            {"name": "act", "type": "cat", "categories": ["relu", "tanh"]},
        ]
    )
    point = {"net": {"width": 2.5}, "act": "tanh"}
    searcher = HEBOSearch(space, metric="m", mode="max", points_to_evaluate=[point])
    searcher._hebo_kwargs["rand_sample"] = 50
    configs = drive(searcher, 4, lambda c: c["net"]["width"])
    assert configs[0] == point
    assert all(0 <= c["net"]["width"] <= 10 and c["act"] in ("relu", "tanh") for c in configs)
    assert all(type(c["act"]) is str and type(c["net"]["width"]) is float for c in configs)


# ---------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metric": ["a", "b"]}, r"optimises a single metric"),
        ({"mode": "best"}, r"`mode` must be 'min' or 'max'"),
        ({"max_concurrent": 0}, r"`max_concurrent` must be an int >= 1, got 0"),
        ({"random_state_seed": "1"}, r"`random_state_seed` must be an int"),
        ({"points_to_evaluate": {"x": 1}}, r"list of config dicts"),
        ({"points_to_evaluate": [{"x": 1}], "evaluated_rewards": [1, 2]}, r"2 values for 1"),
        ({"points_to_evaluate": [{"x": 1}], "evaluated_rewards": ["a"]}, r"list of numbers"),
    ],
)
def test_bad_arguments_are_rejected_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        HEBOSearch(**kwargs)


def test_unknown_hebo_arguments_and_points_outside_the_space_are_named():
    with pytest.raises(ValueError, match=r"HEBO\(...\) does not take \['colour'\]"):
        HEBOSearch({"x": tune.uniform(0, 1)}, metric="m", mode="min", colour="red")
    with pytest.raises(ValueError, match=r"`x` is 3, outside its domain"):
        HEBOSearch({"x": tune.uniform(0, 1)}, metric="m", mode="min", points_to_evaluate=[{"x": 3}])


def test_missing_space_or_mode_is_a_runtime_error():
    driver.assert_runtime_errors_without_space_or_mode(HEBOSearch)


# ---------------------------------------------------------------------- learning
def test_evaluated_rewards_are_told_and_not_run_again():
    points = [{"x": 0.2}, {"x": 0.9}]
    searcher = random_phase(
        {"x": tune.uniform(0, 1)}, mode="max", points_to_evaluate=points, evaluated_rewards=[1, 3]
    )
    assert searcher._opt.y.reshape(-1).tolist() == [-1.0, -3.0]  # max: negated
    assert drive(searcher, 1)[0] not in points


def test_failures_and_missing_metrics_are_not_told_and_batches_wait_for_each_other():
    searcher = random_phase({"x": tune.uniform(0, 1)})
    searcher.set_max_concurrency(2)
    a, b = searcher.suggest("a"), searcher.suggest("b")
    assert a and b and searcher.suggest("c") is None  # the batch of 2 is out
    searcher.on_trial_complete("a", None, error=True)
    assert searcher.suggest("c") is None  # a batch is asked only when the last one is back
    searcher.on_trial_complete("b", {"other": 1.0})
    assert searcher.suggest("c") is not None
    searcher.on_trial_complete("c", {"loss": float("nan")})
    assert len(searcher._opt.y) == 0


def test_global_generators_neither_move_nor_are_moved_by_the_search():
    import numpy as np
    import torch

    def run(reseed):
        searcher = random_phase({"x": tune.uniform(0, 1)}, random_state_seed=4)
        configs = []
        for i in range(6):
            if reseed:
                np.random.seed(i)
                torch.manual_seed(i)
            configs.append(drive(searcher, 1, lambda c: c["x"], prefix=f"t{i}-")[0])
        return configs

    np.random.seed(123)
    torch.manual_seed(123)
    first = run(reseed=False)
    assert np.random.randint(1 << 30) == np.random.RandomState(123).randint(1 << 30)
    expected = torch.randint(1 << 30, (1,), generator=torch.Generator().manual_seed(123))
    assert torch.randint(1 << 30, (1,)).item() == expected.item()
    assert run(reseed=True) == first


# ---------------------------------------------------------------------- state
def test_a_fresh_searcher_restores_space_metric_mode_and_continues_exactly(tmp_path):
    original = HEBOSearch(metric="loss", mode="min", random_state_seed=2, rand_sample=50)
    original.set_search_properties(
        None, None, {"x": tune.uniform(-1, 1), "c": tune.choice([{"k": 1}, None])}
    )
    restored = HEBOSearch()
    objective = lambda c: (c["x"] - 0.5) ** 2  # noqa: E731
    driver.assert_restores_and_continues(tmp_path, original, restored, objective, 3, 4)
    assert restored._opt.y.reshape(-1).tolist() == original._opt.y.reshape(-1).tolist()


def test_sigkilled_driver_resumes_without_repeated_or_lost_suggestions(tmp_path):
    # HEBO's model-based suggestions are not reproducible (see HEBOSearch), so there
    # is no reference run: the restored run is checked against the killed one's trials.
    grid, saved, _ = driver.killed_then_restored(tmp_path, "hebo", reference=False)
    driver.assert_resumed_once_each(grid)

    # HEBO was told every trial once, the ones finished before the crash too.
    assert not saved["_live"] and not saved["_cache"]
    rows = saved["_opt"].X[["x", "y"]].itertuples(index=False, name=None)
    told = dict(zip(rows, saved["_opt"].y.reshape(-1).tolist()))
    assert len(told) == len(saved["_opt"].y) == driver.NUM_SAMPLES
    for result in grid:
        assert told[(result.config["x"], result.config["y"])] == pytest.approx(
            result.metrics["loss"]
        )
