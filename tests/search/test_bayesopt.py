"""BayesOptSearch against the real bayes_opt library: spaces, GP search, warm starts, resume."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

import fasttune as tune
from fasttune._support.imports import MissingDependencyError
from fasttune.search.bayesopt import BayesOptSearch
from fasttune.search.searcher import Searcher
from tests.search import _searcher_driver as driver

# bayes_opt is imported inside the tests that use it: worker processes import this
# module to load `quadratic`, and importing bayes_opt takes about a second.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.usefixtures("two_cpus")


def quadratic(config):
    tune.report({"loss": (config["x"] - 0.3) ** 2 + (config["y"] + 0.2) ** 2})


def drive(searcher, count, objective=None, prefix="t"):
    """Suggest and complete ``count`` trials in process; return the suggestions."""
    configs = []
    for i in range(count):
        config = searcher.suggest(f"{prefix}{i}")
        configs.append(config)
        if objective is not None and isinstance(config, dict):
            searcher.on_trial_complete(f"{prefix}{i}", {"loss": objective(config)})
    return configs


def observations(searcher):
    """The ``(params, target)`` pairs the optimizer learned from."""
    return [(r["params"], r["target"]) for r in searcher.get_state()["optimizer"].res]


# ---------------------------------------------------------------------- import
def test_importing_the_module_does_not_import_bayes_opt():
    code = "import sys, fasttune.search.bayesopt; assert 'bayes_opt' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_missing_bayes_opt_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "bayes_opt", None)  # makes `import bayes_opt` fail
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[bayesopt\]"'):
        BayesOptSearch()


# ---------------------------------------------------------------------- through the Tuner
def test_tuner_finds_a_near_optimum_of_a_quadratic(run_tuner):
    space = {"x": tune.uniform(-2, 2), "y": -0.2}
    searcher = BayesOptSearch(random_state=1, random_search_steps=3)
    grid = run_tuner(quadratic, searcher, space, num_samples=10, metric="loss", mode="min")
    assert len(grid) == 10 and grid.num_errors == 0
    # Random search gets this close with 10 samples about a tenth of the time.
    assert grid.get_best_result().metrics["loss"] < 0.01


def test_points_to_evaluate_run_first_and_constants_are_kept(run_tuner):
    points = [{"x": 0.5, "nest": {"y": -0.5}}, {"x": -1.0, "nest": {"y": 1.0}}]
    space = {"x": tune.uniform(-2, 2), "nest": {"y": tune.uniform(-2, 2), "k": 1}, "epochs": 3}

    def objective(config):
        tune.report({"loss": config["x"] ** 2 + config["nest"]["y"] ** 2})

    searcher = BayesOptSearch(points_to_evaluate=points, random_search_steps=2)
    grid = run_tuner(
        objective, searcher, space, num_samples=4, concurrent=1, metric="loss", mode="min"
    )
    configs = [result.config for result in grid]
    assert configs[0] == {"x": 0.5, "nest": {"y": -0.5, "k": 1}, "epochs": 3}
    assert configs[1] == {"x": -1.0, "nest": {"y": 1.0, "k": 1}, "epochs": 3}
    assert all(c["epochs"] == 3 and c["nest"]["k"] == 1 for c in configs)


def test_failing_trials_do_not_stall_the_random_phase(run_tuner):
    def sometimes_fails(config):
        if config["x"] > 0.5:
            raise RuntimeError("bad x")
        tune.report({"loss": config["x"] ** 2})

    searcher = BayesOptSearch(random_state=0, random_search_steps=4)
    grid = run_tuner(
        sometimes_fails,
        searcher,
        {"x": tune.uniform(0, 1)},
        num_samples=6,
        metric="loss",
        mode="min",
    )
    assert grid.num_errors > 0 and len(grid) == 6
    assert len(observations(searcher)) == 6 - grid.num_errors


def test_metric_and_mode_from_tune_config_reach_a_searcher_built_with_a_space(run_tuner):
    searcher = BayesOptSearch({"x": (0, 1), "y": (0, 1)}, random_search_steps=2)
    grid = run_tuner(quadratic, searcher, None, num_samples=3, metric="loss", mode="max")
    assert len(grid) == 3 and searcher.metric == "loss" and searcher.mode == "max"
    # bayes_opt maximises: a maximised metric is stored as is.
    targets = sorted(target for _, target in observations(searcher))
    assert targets == pytest.approx(sorted(r.metrics["loss"] for r in grid))


def test_register_analysis_learns_from_a_finished_experiment(run_tuner):
    space = {"x": tune.uniform(-1, 1), "y": tune.uniform(-1, 1)}
    first = run_tuner(quadratic, None, space, num_samples=4)
    analysis = tune.ExperimentAnalysis(first.experiment_path)
    searcher = BayesOptSearch(metric="loss", mode="min", analysis=analysis)
    searcher.set_search_properties(None, None, space)
    learned = sorted(-target for _, target in observations(searcher))
    assert learned == pytest.approx(sorted(r.metrics["loss"] for r in first))


# ---------------------------------------------------------------------- space conversion
def test_float_ranges_are_converted_with_nested_keys():
    space = {
        "a": {"b": tune.uniform(-1, 2)},
        "lr": tune.loguniform(1e-4, 1e-1),
        "q": tune.quniform(0, 1, 0.25),
        "const": [1, 2],
    }
    assert BayesOptSearch.convert_search_space(space) == {
        "a/b": (-1.0, 2.0),
        "lr": (1e-4, 1e-1),
        "q": (0.0, 1.0),
    }
    searcher = BayesOptSearch(metric="m", mode="max", random_search_steps=0)
    searcher.set_search_properties(None, None, space)
    bounds = searcher.optimizer.space.bounds.tolist()
    assert sorted(bounds) == sorted([[-1, 2], [math.log(1e-4), math.log(1e-1)], [0, 1]])
    configs = drive(searcher, 6, lambda c: -((c["a"]["b"] - 0.5) ** 2))
    for config in filter(None, configs):
        assert set(config) == {"a", "lr", "q"} and -1 <= config["a"]["b"] <= 2
        assert 1e-4 <= config["lr"] <= 1e-1 and config["q"] in (0, 0.25, 0.5, 0.75, 1.0)


def test_loguniform_is_searched_on_a_log_scale():
    searcher = BayesOptSearch({"lr": tune.loguniform(1e-6, 1)}, "m", "max", random_state=0)
    lrs = [config["lr"] for config in drive(searcher, 10)]  # the random phase
    assert sum(lr < 1e-3 for lr in lrs) >= 3  # uniform on [1e-6, 1] would give ~0


def test_user_space_of_bounds():
    searcher = BayesOptSearch({"x": (0, 2), "n": {"y": [-1, 1]}}, "m", "max", random_state=0)
    config = searcher.suggest("t")
    assert 0 <= config["x"] <= 2 and -1 <= config["n"]["y"] <= 1
    with pytest.raises(ValueError, match=r"`x` must be a \(lower, upper\) pair"):
        BayesOptSearch({"x": (2, 0)})
    with pytest.raises(ValueError, match=r"`x` must be a \(lower, upper\) pair"):
        BayesOptSearch({"x": 3})


@pytest.mark.parametrize(
    "domain, match",
    [
        (tune.randint(0, 3), "`p` is a Integer domain"),
        (tune.choice(["a", "b"]), "`p` is a Categorical domain"),
        (tune.randn(0, 1), "`p` is a float domain with Normal sampling"),
        (tune.sample_from(lambda spec: 1), "`p` is a sample_from"),
        (tune.grid_search([1, 2]), "`p` uses grid_search"),
    ],
)
def test_unsupported_domains_name_the_key(domain, match):
    with pytest.raises(ValueError, match=match):
        BayesOptSearch().set_search_properties("m", "min", {"x": tune.uniform(0, 1), "p": domain})
    with pytest.raises(ValueError, match=match.replace("`p`", "`n/p`")):
        BayesOptSearch.convert_search_space({"n": {"p": domain}})


def test_unsupported_domain_in_the_tuner_space_is_a_value_error(run_tuner):
    space = {"x": tune.uniform(0, 1), "n": tune.randint(0, 4)}
    with pytest.raises(ValueError, match="`n` is a Integer domain"):
        run_tuner(quadratic, BayesOptSearch(), space, metric="loss", mode="min")


def test_no_space_at_all_is_a_runtime_error(run_tuner):
    with pytest.raises(RuntimeError, match="no search space"):
        run_tuner(quadratic, BayesOptSearch(), {"x": 1}, metric="loss", mode="min")


def test_missing_metric_or_mode_is_a_runtime_error():
    searcher = BayesOptSearch({"x": (0, 1)})
    with pytest.raises(RuntimeError, match="needs a metric and a mode"):
        searcher.suggest("t")
    only_mode = BayesOptSearch({"x": (0, 1)}, mode="max")
    only_mode.suggest("t")
    assert only_mode.metric == "_metric"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"patience": 0}, "patience"),
        ({"random_search_steps": -1}, "random_search_steps"),
        ({"random_state": "x"}, "random_state"),
        ({"utility_kwargs": {"kind": "best"}}, "kind"),
        ({"utility_kwargs": {"kapa": 1}}, "unknown keys"),
        ({"mode": "maximize"}, "mode"),
        ({"metric": ["a", "b"], "mode": ["min", "max"]}, "single metric"),
    ],
)
def test_bad_arguments_are_rejected_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BayesOptSearch(**kwargs)


def test_points_must_give_every_searched_key():
    with pytest.raises(ValueError, match=r"points_to_evaluate\[0\] has no value for \['y'\]"):
        BayesOptSearch({"x": (0, 1), "y": (0, 1)}, points_to_evaluate=[{"x": 0.5}])
    with pytest.raises(ValueError, match="`x` must be a number"):
        BayesOptSearch({"x": (0, 1)}, points_to_evaluate=[{"x": "a"}])


# ---------------------------------------------------------------------- the search
@pytest.mark.parametrize("kind", ["ucb", "ei", "poi"])
def test_utility_kwargs_choose_the_acquisition_function(kind):
    searcher = BayesOptSearch(
        {"x": (-1, 1)}, "loss", "min", utility_kwargs={"kind": kind}, random_search_steps=3
    )
    suggested = drive(searcher, 5, lambda c: c["x"] ** 2)
    assert all(isinstance(c, dict) for c in suggested[:3])  # the random phase
    assert all(-1 <= c["x"] <= 1 for c in suggested if c is not None)  # None: a repeat
    assert len(observations(searcher)) >= 3
    import bayes_opt

    if hasattr(bayes_opt, "UtilityFunction"):  # 1.x
        assert searcher._utility.kind == kind


def test_random_phase_waits_for_its_results_then_the_process_learns():
    searcher = BayesOptSearch({"x": (-1, 1)}, "loss", "min", random_search_steps=2)
    assert isinstance(searcher.suggest("a"), dict) and isinstance(searcher.suggest("b"), dict)
    assert searcher.suggest("c") is None  # both random trials still running
    searcher.on_trial_complete("a", {"loss": 1.0})
    assert searcher.suggest("c") is None and observations(searcher) == []
    searcher.on_trial_complete("b", {"loss": 2.0})
    assert len(observations(searcher)) == 2
    assert isinstance(searcher.suggest("c"), dict)


def test_repeats_finish_the_search_after_patience():
    again = [{"x": 0.5}] * 4  # the same point offered again and again
    searcher = BayesOptSearch({"x": (0, 1)}, "loss", "min", again, random_state=0, patience=2)
    assert searcher.suggest("a") == {"x": 0.5}
    searcher.on_trial_complete("a", {"loss": 1.0})
    assert searcher.suggest("b") is None  # a duplicate is skipped...
    assert searcher.suggest("c") == Searcher.FINISHED  # ...and a third time ends the search


def test_repeats_while_trials_run_wait_instead_of_counting_toward_patience():
    """Ray counts them, so slow trials can end its search early; here they wait."""
    # Every value of this range looks the same at 5 decimals: each suggestion repeats.
    searcher = BayesOptSearch({"x": (0, 1e-7)}, "loss", "min", random_search_steps=0, patience=1)
    assert isinstance(searcher.suggest("a"), dict)
    assert searcher.suggest("b") is None  # a repeat while "a" runs: wait for its result
    assert searcher.suggest("c") is None  # nothing learned since: still waiting
    searcher.on_trial_complete("a", {"loss": 1.0})
    assert searcher.suggest("d") == Searcher.FINISHED  # a repeat after learning counts


def test_results_become_targets_and_unusable_results_are_ignored(caplog):
    searcher = BayesOptSearch({"x": (0, 1)}, metric="m", mode="min", random_search_steps=0)
    configs = drive(searcher, 6)  # nothing learned yet: all random
    searcher.on_trial_complete("t0", {"m": 2.0})
    searcher.on_trial_complete("t0", {"m": 5.0})  # already completed: ignored
    unusable = [{"m": float("nan")}, {"m": math.inf}, {"other": 1}, None]
    for i, result in enumerate(unusable, start=1):
        searcher.on_trial_complete(f"t{i}", result)
    searcher.on_trial_complete("t5", {"m": 1.0}, error=True)
    searcher.on_trial_complete("unknown", {"m": 1.0})
    assert observations(searcher) == [({"x": configs[0]["x"]}, -2.0)]
    assert "without a numeric 'm'" in caplog.text


def test_same_seed_gives_the_same_suggestions():
    def run(seed):
        searcher = BayesOptSearch(
            {"x": (-1, 1), "y": (-1, 1)}, "loss", "min", random_state=seed, random_search_steps=3
        )
        return drive(searcher, 6, lambda c: (c["x"] - 0.3) ** 2 + c["y"] ** 2)

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_save_and_restore_continue_exactly(tmp_path):
    def make():
        return BayesOptSearch({"x": (-1, 1)}, "loss", "min", random_state=2, random_search_steps=3)

    objective = lambda c: (c["x"] - 0.5) ** 2  # noqa: E731
    original = make()
    drive(original, 3, objective)
    running = original.suggest("live")  # still running when saved
    path = str(tmp_path / "searcher.pkl")
    original.save(path)
    restored = make()
    restored.restore(path)
    for searcher in (original, restored):
        searcher.on_trial_complete("live", {"loss": objective(running)})
    assert observations(restored) == observations(original) and len(observations(restored)) == 4
    assert drive(restored, 2, objective, "n") == drive(original, 2, objective, "n")


# ---------------------------------------------------------------------- driver crash
@pytest.mark.slow
def test_sigkilled_driver_resumes_without_repeated_or_lost_suggestions(tmp_path):
    grid, saved, reference = driver.killed_then_restored(tmp_path, "bayesopt")
    driver.assert_resumed_as_reference(grid, reference)

    # The saved optimizer holds every observation, the ones made before the crash too.
    assert not saved["live"]
    learned = {(r["params"]["x"], r["params"]["y"]): r["target"] for r in saved["optimizer"].res}
    assert len(learned) == driver.NUM_SAMPLES
    for result in grid:
        target = learned[(result.config["x"], result.config["y"])]
        assert math.isclose(target, -result.metrics["loss"])


def test_a_fresh_searcher_restores_space_metric_and_mode(tmp_path):
    driver.assert_fresh_searcher_restores_space_metric_and_mode(
        tmp_path, BayesOptSearch, random_state=3
    )


def test_a_space_of_its_own_may_use_flattened_keys_as_rays():
    searcher = BayesOptSearch(
        space={"b/z": (0, 1), "a": (2, 3)}, metric="m", mode="max", random_state=0
    )
    config = searcher.suggest("t")
    assert set(config) == {"a", "b"} and 0 <= config["b"]["z"] <= 1
    with pytest.raises(ValueError, match=r"`b/z` is given twice"):
        BayesOptSearch(space={"b/z": (0, 1), "b": {"z": (2, 3)}})
    with pytest.raises(ValueError, match=r"cannot contain '/'"):  # a param_space's key
        BayesOptSearch().set_search_properties("m", "max", {"b/z": tune.uniform(0, 1)})
