"""HyperOptSearch against the real hyperopt library: spaces, TPE, warm starts, resume."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

import fasttune as tune
from fasttune._support.imports import MissingDependencyError
from fasttune.search.hyperopt import HyperOptSearch
from tests.search import _searcher_driver as driver

# hyperopt is imported inside the tests that use it: worker processes import this
# module to load `quadratic`, and importing hyperopt takes about a second.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.usefixtures("two_cpus")


def quadratic(config):
    tune.report({"loss": (config["x"] - 0.3) ** 2 + (config["y"] + 0.2) ** 2})


def drive(searcher, count, objective=None, prefix="t"):
    """Suggest and complete ``count`` trials in process; return the configs."""
    configs = []
    for i in range(count):
        config = searcher.suggest(f"{prefix}{i}")
        configs.append(config)
        if objective is not None:
            searcher.on_trial_complete(f"{prefix}{i}", {"loss": objective(config)})
    return configs


def sample_values(domain, count=300):
    searcher = HyperOptSearch(
        {"p": domain}, metric="loss", mode="min", random_state_seed=0, n_initial_points=count
    )
    return [config["p"] for config in drive(searcher, count, lambda config: 0.0)]


def losses(searcher):
    """``{tid: loss}`` of hyperopt's finished trials."""
    docs = searcher.get_state()["hyperopt_trials"]._dynamic_trials
    return {d["tid"]: d["result"]["loss"] for d in docs if d["result"].get("status") == "ok"}


# ---------------------------------------------------------------------- import
def test_importing_the_module_does_not_import_hyperopt():
    code = "import sys, fasttune.search.hyperopt; assert 'hyperopt' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_missing_hyperopt_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "hyperopt", None)  # makes `import hyperopt` fail
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[hyperopt\]"'):
        HyperOptSearch()


# ---------------------------------------------------------------------- through the Tuner
def test_tuner_finds_a_near_optimum_of_a_quadratic(run_tuner):
    space = {"x": tune.uniform(-2, 2), "y": -0.2}
    searcher = HyperOptSearch(random_state_seed=1, n_initial_points=5)
    grid = run_tuner(quadratic, searcher, space, num_samples=25, metric="loss", mode="min")
    assert len(grid) == 25 and grid.num_errors == 0
    # Random search gets this close with 25 samples about a third of the time.
    assert grid.get_best_result().metrics["loss"] < 0.02


def test_points_to_evaluate_run_first_and_constants_are_kept(run_tuner):
    points = [
        {"x": 0.5, "y": -0.5, "opt": {"name": "sgd", "momentum": 0.8}},
        {"x": -1.0, "y": 1.0, "opt": {"name": "adam"}},
    ]
    space = {
        "x": tune.uniform(-2, 2),
        "y": tune.uniform(-2, 2),
        "opt": tune.choice([{"name": "adam"}, {"name": "sgd", "momentum": tune.uniform(0, 1)}]),
        "epochs": 3,
    }
    searcher = HyperOptSearch(points_to_evaluate=points, random_state_seed=0)
    grid = run_tuner(
        quadratic, searcher, space, num_samples=5, concurrent=1, metric="loss", mode="min"
    )
    configs = [result.config for result in grid]
    assert configs[0] == {**points[0], "epochs": 3}
    assert configs[1] == {**points[1], "epochs": 3}
    assert all(config["epochs"] == 3 for config in configs)


def test_sample_from_in_the_tuner_space_is_computed_after_each_suggestion(run_tuner):
    # Ray leaves it out of the searcher's space and computes it from the suggested
    # config; HyperOptSearch refused the whole space before.
    space = {
        "x": tune.uniform(-2, 2),
        "y": -0.2,
        "twice": tune.sample_from(lambda spec: spec.config.x * 2),
    }
    searcher = HyperOptSearch(random_state_seed=0)
    grid = run_tuner(quadratic, searcher, space, num_samples=3, metric="loss", mode="min")
    assert grid.num_errors == 0
    for result in grid:
        assert list(result.config) == ["x", "y", "twice"]
        assert result.config["twice"] == 2 * result.config["x"]


def test_failing_trials_are_marked_failed_and_the_search_goes_on(run_tuner):
    import hyperopt

    def sometimes_fails(config):
        if config["x"] > 0:
            raise RuntimeError("bad x")
        tune.report({"loss": config["x"] ** 2})

    searcher = HyperOptSearch(random_state_seed=3, n_initial_points=4)
    grid = run_tuner(
        sometimes_fails,
        searcher,
        {"x": tune.uniform(-1, 1)},
        num_samples=12,
        metric="loss",
        mode="min",
    )
    assert len(grid) == 12 and 0 < grid.num_errors < 12
    docs = searcher._trials._dynamic_trials
    failed = [d for d in docs if d["state"] == hyperopt.JOB_STATE_ERROR]
    assert len(failed) == grid.num_errors
    assert len(losses(searcher)) == 12 - grid.num_errors


def test_native_hyperopt_space_through_the_tuner(run_tuner):
    from hyperopt import hp

    space = {"x": hp.uniform("x", -2, 2), "y": hp.choice("y", [-0.2, 0.5]), "k": 7}
    searcher = HyperOptSearch(space, metric="loss", mode="min", random_state_seed=0)
    grid = run_tuner(quadratic, searcher, None, num_samples=6)
    assert len(grid) == 6
    for result in grid:
        assert -2 <= result.config["x"] <= 2 and result.config["y"] in (-0.2, 0.5)
        assert result.config["k"] == 7


def test_metric_and_mode_from_tune_config_reach_a_searcher_built_with_a_space(run_tuner):
    searcher = HyperOptSearch({"x": tune.uniform(0, 1), "y": tune.uniform(0, 1)})
    grid = run_tuner(quadratic, searcher, None, num_samples=3, metric="loss", mode="max")
    assert len(grid) == 3 and searcher.metric == "loss" and searcher.mode == "max"
    # hyperopt minimises: a maximised metric is stored negated.
    assert sorted(losses(searcher).values()) == sorted(-r.metrics["loss"] for r in grid)


# ---------------------------------------------------------------------- space conversion
def test_uniform_and_loguniform_stay_in_bounds():
    xs = sample_values(tune.uniform(-3, 2))
    assert all(isinstance(x, float) and -3 <= x < 2 for x in xs)
    lrs = sample_values(tune.loguniform(1e-4, 1e-1))
    assert all(1e-4 <= lr <= 1e-1 for lr in lrs)
    assert sum(lr < 1e-2 for lr in lrs) > len(lrs) / 2  # two of three decades


def test_quniform_reaches_both_bounds_and_rounds_to_the_step():
    values = sample_values(tune.quniform(0, 1, 0.1))
    assert set(values) == {round(i * 0.1, 1) for i in range(11)}
    values = sample_values(tune.qloguniform(5, 100, 5))
    assert all(5 <= v <= 100 and v % 5 == 0 for v in values)


def test_normal_domains_are_searched():
    values = sample_values(tune.randn(10, 2))
    assert all(isinstance(v, float) for v in values)
    assert 9 < sum(values) / len(values) < 11
    assert all(v % 0.5 == 0 for v in sample_values(tune.qrandn(0, 1, 0.5)))


def test_randint_excludes_its_upper_bound_and_qrandint_includes_it():
    values = sample_values(tune.randint(2, 6))
    assert all(type(v) is int for v in values) and set(values) == {2, 3, 4, 5}
    assert set(sample_values(tune.qrandint(0, 10, 5))) == {0, 5, 10}


def test_lograndint_excludes_its_upper_bound_and_qlograndint_includes_it():
    values = sample_values(tune.lograndint(1, 10))
    assert all(type(v) is int for v in values) and set(values) == set(range(1, 10))
    values = sample_values(tune.qlograndint(2, 20, 2))
    assert set(values) <= set(range(2, 21, 2)) and {2, 20} <= set(values)


def test_choice_of_values_objects_and_nested_spaces():
    values = sample_values(tune.choice([1, "two", (3, 4), None]))
    assert set(values) == {1, "two", (3, 4), None}
    nested = sample_values(
        tune.choice(
            [{"kind": "a", "lr": tune.loguniform(1e-3, 1)}, {"kind": "b", "n": tune.randint(0, 3)}]
        )
    )
    kinds = {value["kind"] for value in nested}
    assert kinds == {"a", "b"}
    for value in nested:
        if value["kind"] == "a":
            assert set(value) == {"kind", "lr"} and 1e-3 <= value["lr"] <= 1
        else:
            assert set(value) == {"kind", "n"} and value["n"] in (0, 1, 2)


def pair_kind(config):
    tune.report({"loss": 0.0, "tuple": type(config["pair"]) is tuple, "pair": repr(config["pair"])})


def test_choice_of_lists_gives_tuples_as_ray_s_hyperopt_search(run_tuner):
    # Ray hands hyperopt a list option as is; hyperopt evaluates it to a tuple.
    values = sample_values(tune.choice([[1, 2], [3, [4, 5]], "x"]), count=60)
    assert set(values) == {(1, 2), (3, (4, 5)), "x"}
    searcher = HyperOptSearch(points_to_evaluate=[{"pair": [3, 4]}], random_state_seed=0)
    results = run_tuner(
        pair_kind,
        searcher,
        param_space={"pair": tune.choice([[1, 2], [3, 4]])},
        num_samples=4,
        metric="loss",
        mode="min",
    )
    assert not results.errors
    assert all(result.metrics["tuple"] for result in results)
    pairs = [result.metrics["pair"] for result in results]
    assert set(pairs) <= {"(1, 2)", "(3, 4)"} and "(3, 4)" in pairs  # the point ran


def test_nested_dicts_and_lists_keep_their_shape():
    import hyperopt

    space = {
        "model": {"width": tune.randint(8, 16), "act": "relu"},
        "layers": [tune.uniform(0, 1), 5],
        "shape": (1, 2),
    }
    searcher = HyperOptSearch(space, metric="loss", mode="min", random_state_seed=0)
    config = searcher.suggest("t")
    assert config["model"]["act"] == "relu" and 8 <= config["model"]["width"] < 16
    assert isinstance(config["layers"], list) and config["layers"][1] == 5
    assert config["shape"] == (1, 2)
    converted = HyperOptSearch.convert_search_space(space)
    assert set(hyperopt.Domain(lambda c: c, converted).params) == {"model/width", "layers/0"}


@pytest.mark.parametrize(
    "space, match",
    [
        ({"a": tune.grid_search([1, 2])}, "`a` uses grid_search"),
        ({"m": {"f": tune.sample_from(lambda spec: 1)}}, r"`m/f` is a sample_from"),
        ({"c": tune.choice([{"g": tune.grid_search([1])}])}, "`c/0/g` uses grid_search"),
    ],
)
def test_unsupported_domains_name_the_key(space, match):
    with pytest.raises(ValueError, match=match):
        HyperOptSearch().set_search_properties("loss", "min", {"x": tune.uniform(0, 1), **space})


def test_grid_search_in_the_tuner_space_is_a_value_error(run_tuner):
    space = {"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2])}
    with pytest.raises(ValueError, match="`g` uses grid_search"):
        run_tuner(quadratic, HyperOptSearch(), space, metric="loss", mode="min")


def test_no_space_at_all_is_a_runtime_error(run_tuner):
    with pytest.raises(RuntimeError, match="no search space"):
        run_tuner(quadratic, HyperOptSearch(), {"x": 1}, metric="loss", mode="min")


def test_missing_metric_or_mode_is_a_runtime_error():
    searcher = HyperOptSearch({"x": tune.uniform(0, 1)})
    with pytest.raises(RuntimeError, match="needs a metric and a mode"):
        searcher.suggest("t")
    only_mode = HyperOptSearch({"x": tune.uniform(0, 1)}, mode="max")
    only_mode.suggest("t")
    assert only_mode.metric == "_metric"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"gamma": 0}, "gamma"),
        ({"gamma": 1.5}, "gamma"),
        ({"n_initial_points": -1}, "n_initial_points"),
        ({"random_state_seed": "x"}, "random_state_seed"),
        ({"mode": "maximize"}, "mode"),
        ({"metric": ["a", "b"], "mode": ["min", "max"]}, "single metric"),
    ],
)
def test_bad_arguments_are_rejected_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        HyperOptSearch(**kwargs)


# ---------------------------------------------------------------------- points
def test_points_must_give_every_searched_key_and_valid_choices():
    space = {"x": tune.uniform(0, 1), "act": tune.choice(["relu", "tanh"]), "k": 1}
    with pytest.raises(ValueError, match="`act` is missing"):
        HyperOptSearch(space, points_to_evaluate=[{"x": 0.5}])
    with pytest.raises(ValueError, match="'elu', which is not one of the choices"):
        HyperOptSearch(space, points_to_evaluate=[{"x": 0.5, "act": "elu"}])
    with pytest.raises(TypeError, match="list of config dicts"):
        HyperOptSearch(space, points_to_evaluate={"x": 0.5})


def test_points_are_used_once_each_in_order_even_after_failures():
    points = [{"x": 0.1}, {"x": 0.2}, {"x": 0.3}]
    searcher = HyperOptSearch({"x": tune.uniform(0, 1)}, "loss", "min", points, random_state_seed=0)
    assert searcher.suggest("a") == {"x": 0.1}
    searcher.on_trial_complete("a", error=True)  # failed docs leave hyperopt's trial list
    assert [searcher.suggest(t)["x"] for t in "bc"] == [0.2, 0.3]
    assert searcher.suggest("d")["x"] not in (0.1, 0.2, 0.3)


# ---------------------------------------------------------------------- learning
def test_results_become_losses_and_unusable_results_failures(caplog):
    import hyperopt

    searcher = HyperOptSearch({"x": tune.uniform(0, 1)}, metric="m", mode="max")
    drive(searcher, 5)
    searcher.on_trial_complete("t0", {"m": 2.0})
    searcher.on_trial_complete("t1", {"m": float("nan")})
    searcher.on_trial_complete("t2", {"other": 1.0})
    searcher.on_trial_complete("t3", error=True)
    searcher.on_trial_complete("t4", None)
    searcher.on_trial_complete("t0", {"m": 5.0})  # already completed: ignored
    searcher.on_trial_complete("unknown", {"m": 5.0})
    assert losses(searcher) == {0: -2.0}
    states = [d["state"] for d in searcher._trials._dynamic_trials]
    assert states == [hyperopt.JOB_STATE_DONE] + [hyperopt.JOB_STATE_ERROR] * 4
    assert "without a numeric 'm'" in caplog.text


def test_same_seed_gives_the_same_suggestions():
    def run(seed):
        searcher = HyperOptSearch(
            {"x": tune.uniform(-1, 1), "c": tune.choice(["a", "b"])},
            metric="loss",
            mode="min",
            random_state_seed=seed,
            n_initial_points=3,
        )
        return drive(searcher, 10, lambda c: c["x"] ** 2 + (c["c"] == "a"))

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_save_and_restore_continue_exactly(tmp_path):
    def make():
        return HyperOptSearch(
            {"x": tune.uniform(-1, 1)}, "loss", "min", random_state_seed=2, n_initial_points=2
        )

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
    assert losses(restored) == losses(original) and len(losses(restored)) == 7
    assert drive(restored, 4, objective, "n") == drive(original, 4, objective, "n")


# ---------------------------------------------------------------------- driver crash
@pytest.mark.slow
def test_sigkilled_driver_resumes_without_repeated_or_lost_suggestions(tmp_path):
    import hyperopt

    grid, saved, reference = driver.killed_then_restored(tmp_path, "hyperopt")
    driver.assert_resumed_as_reference(grid, reference)

    # The saved trials hold every observation, the ones made before the crash too.
    docs = saved["hyperopt_trials"]._dynamic_trials
    assert len(docs) == driver.NUM_SAMPLES and not saved["live"]
    by_config = {(r.config["x"], r.config["y"]): r.metrics["loss"] for r in grid}
    for doc in docs:
        values = doc["misc"]["vals"]
        loss = by_config[(values["x"][0], values["y"][0])]
        assert doc["state"] == hyperopt.JOB_STATE_DONE
        assert math.isclose(doc["result"]["loss"], loss)


def test_a_fresh_searcher_restores_space_metric_and_mode(tmp_path):
    driver.assert_fresh_searcher_restores_space_metric_and_mode(
        tmp_path, HyperOptSearch, random_state_seed=3
    )
