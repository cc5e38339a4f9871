"""OptunaSearch against the real optuna library: spaces, ask/tell, warm starts, resume."""

from __future__ import annotations

import math
import os
import pickle
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

import fasttune as tune
from fasttune._internal.experiment_state import ExperimentStateStore
from fasttune._support.imports import MissingDependencyError
from fasttune.search.optuna import OptunaSearch
from tests.search import _optuna_driver as driver
from tests.search._saved_state import unwrap_limiter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    yield
    optuna.logging.set_verbosity(optuna.logging.INFO)
    tune.shutdown()


def quadratic(config):
    tune.report({"loss": (config["x"] - 0.3) ** 2 + (config["y"] + 0.2) ** 2})


def drive(searcher, count, objective=None):
    """Suggest and complete ``count`` trials in process; return the configs."""
    configs = []
    for i in range(count):
        config = searcher.suggest(f"t{i}")
        configs.append(config)
        if objective is not None:
            searcher.on_trial_complete(f"t{i}", {"loss": objective(config)})
    return configs


def sample_values(domain, count=300):
    searcher = OptunaSearch({"p": domain}, metric="loss", mode="min", seed=0)
    return [config["p"] for config in drive(searcher, count)]


def test_a_nested_metric_is_told_to_the_study(tmp_path):
    # The searcher hears each trial's end as Ray tells it: its last result flattened,
    # where "val/loss" is a key. With the nested result every trial was PRUNED, and the
    # study learned nothing.
    def nested(config):
        tune.report({"val": {"loss": (config["x"] - 1) ** 2}})

    searcher = OptunaSearch(seed=0)
    grid = tune.Tuner(
        nested,
        param_space={"x": tune.uniform(0, 2)},
        tune_config=tune.TuneConfig(
            search_alg=searcher, metric="val/loss", mode="min", num_samples=4
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert grid.num_errors == 0
    trials = searcher._ot_study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    losses = sorted(r.metrics["val"]["loss"] for r in grid)
    assert sorted(t.value for t in trials) == pytest.approx(losses)


# ---------------------------------------------------------------------- import
def test_importing_the_module_does_not_import_optuna():
    code = "import sys, fasttune.search.optuna; assert 'optuna' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_missing_optuna_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # makes `import optuna` fail
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[optuna\]"'):
        OptunaSearch()


# ---------------------------------------------------------------------- through the Tuner
def test_tuner_finds_a_near_optimum_of_a_quadratic(run_tuner):
    searcher = OptunaSearch(seed=0)
    space = {"x": tune.uniform(-1, 1), "y": tune.uniform(-1, 1)}
    grid = run_tuner(
        quadratic, searcher, space, num_samples=30, concurrent=1, metric="loss", mode="min"
    )
    assert len(grid) == 30 and grid.num_errors == 0
    best = grid.get_best_result()
    assert best.metrics["loss"] < 0.02
    assert best.config["x"] == pytest.approx(0.3, abs=0.15)
    study = searcher._ot_study
    assert len(study.trials) == 30
    assert all(trial.state == TrialState.COMPLETE for trial in study.trials)
    assert study.best_value == pytest.approx(best.metrics["loss"])


def test_points_to_evaluate_run_first_and_constants_are_kept(run_tuner):
    points = [{"x": 0.5, "nest": {"y": 1}}, {"x": -0.25, "nest": {"y": 4}}]
    searcher = OptunaSearch(points_to_evaluate=points, seed=1)

    def fn(config):
        tune.report({"loss": abs(config["x"]), "c": config["const"]})

    space = {"x": tune.uniform(-1, 1), "nest": {"y": tune.randint(0, 5)}, "const": 7}
    grid = run_tuner(fn, searcher, space, num_samples=5, concurrent=1, metric="loss", mode="min")
    configs = [result.config for result in grid]
    assert configs[0] == {"x": 0.5, "nest": {"y": 1}, "const": 7}
    assert configs[1] == {"x": -0.25, "nest": {"y": 4}, "const": 7}
    assert all(config["const"] == 7 for config in configs)
    assert [t.params for t in searcher._ot_study.trials[:2]] == [
        {"x": 0.5, "nest/y": 1},
        {"x": -0.25, "nest/y": 4},
    ]


def test_evaluated_rewards_are_added_as_finished_trials_not_run(run_tuner):
    points = [{"x": 0.3, "y": -0.2}, {"x": 1.0, "y": 1.0}]
    searcher = OptunaSearch(
        {"x": tune.uniform(-1, 1), "y": tune.uniform(-1, 1)},
        metric="loss",
        mode="min",
        points_to_evaluate=points,
        evaluated_rewards=[0.0, 2.44],
        seed=2,
    )
    grid = run_tuner(quadratic, searcher, num_samples=4)
    ran = [{"x": r.config["x"], "y": r.config["y"]} for r in grid]
    assert len(ran) == 4 and not any(point in ran for point in points)
    trials = searcher._ot_study.trials
    assert len(trials) == 6
    assert [(t.params, t.value, t.state) for t in trials[:2]] == [
        (points[0], 0.0, TrialState.COMPLETE),
        (points[1], 2.44, TrialState.COMPLETE),
    ]
    assert searcher._ot_study.best_value == 0.0


def test_define_by_run_space_with_constants_through_the_tuner(run_tuner):
    def space(trial):
        kind = trial.suggest_categorical("kind", ["linear", "square"])
        if kind == "square":
            trial.suggest_float("opt/scale", 0.5, 2.0)
        return {"fixed": "yes", "opt/depth": 3}

    def fn(config):
        scale = config.get("opt", {}).get("scale", 1.0)
        tune.report({"loss": scale if config["kind"] == "square" else 5.0})

    searcher = OptunaSearch(space, metric="loss", mode="min", seed=3)
    grid = run_tuner(fn, searcher, num_samples=12)
    assert grid.num_errors == 0
    for result in grid:
        config = result.config
        assert config["fixed"] == "yes" and config["opt"]["depth"] == 3
        assert config["kind"] in ("linear", "square")
        assert ("scale" in config["opt"]) == (config["kind"] == "square")
        if config["kind"] == "square":
            assert 0.5 <= config["opt"]["scale"] <= 2.0
    assert {r.config["kind"] for r in grid} == {"linear", "square"}


def test_native_optuna_space_nested_through_the_tuner(run_tuner):
    space = {
        "lr": FloatDistribution(1e-4, 1e-1, log=True),
        "model": {"layers": IntDistribution(1, 3), "act": CategoricalDistribution(["relu"])},
    }
    searcher = OptunaSearch(space, metric="loss", mode="min", seed=4)

    def fn(config):
        tune.report({"loss": config["lr"] * config["model"]["layers"]})

    grid = run_tuner(fn, searcher, num_samples=10)
    for result in grid:
        assert 1e-4 <= result.config["lr"] <= 1e-1
        assert result.config["model"]["layers"] in (1, 2, 3)
        assert result.config["model"]["act"] == "relu"


def test_multi_objective_through_the_tuner(run_tuner):
    def fn(config):
        tune.report({"a": config["x"] ** 2, "b": (config["x"] - 1) ** 2})

    searcher = OptunaSearch(
        {"x": tune.uniform(-1, 2)}, metric=["a", "b"], mode=["min", "max"], seed=5
    )
    grid = run_tuner(fn, searcher, num_samples=8)
    by_x = {result.config["x"]: result.metrics for result in grid}
    for trial in searcher._ot_study.trials:
        metrics = by_x[trial.params["x"]]
        assert trial.values == [metrics["a"], metrics["b"]]


def test_multi_objective_tells_every_objective():
    searcher = OptunaSearch(
        {"x": tune.uniform(-1, 2)}, metric=["a", "b"], mode=["min", "max"], seed=5
    )
    for i in range(6):
        x = searcher.suggest(f"t{i}")["x"]
        result = {"a": x**2, "b": (x - 1) ** 2, "training_iteration": 1}
        searcher.on_trial_result(f"t{i}", result)
        searcher.on_trial_complete(f"t{i}", result)
    searcher.suggest("partial")
    searcher.on_trial_complete("partial", {"a": 1.0})  # one objective missing
    study = searcher._ot_study
    assert [d.name for d in study.directions] == ["MINIMIZE", "MAXIMIZE"]
    for trial in study.trials[:6]:
        x = trial.params["x"]
        assert trial.values == [x**2, (x - 1) ** 2]
        assert trial.intermediate_values == {}  # Optuna keeps them for one objective only
    assert study.trials[6].state == TrialState.PRUNED
    assert study.best_trials


def test_any_optuna_sampler_is_used():
    sampler = optuna.samplers.NSGAIISampler(seed=6, population_size=4)
    searcher = OptunaSearch(
        {"x": tune.uniform(0, 1)}, metric=["a", "b"], mode=["min", "min"], sampler=sampler
    )
    for i in range(10):
        x = searcher.suggest(f"t{i}")["x"]
        searcher.on_trial_complete(f"t{i}", {"a": x, "b": 1 - x})
    assert searcher._ot_study.sampler is sampler
    assert len(searcher._ot_study.best_trials) == 10  # every point is on this Pareto front

    other = optuna.samplers.RandomSampler(seed=0)
    searcher = OptunaSearch({"x": tune.uniform(0, 1)}, metric="a", mode="min", sampler=other)
    assert 0 <= drive(searcher, 1)[0]["x"] <= 1
    assert searcher._ot_study.sampler is other


def test_metric_and_mode_from_tune_config_reach_a_searcher_built_with_a_space(run_tuner):
    searcher = OptunaSearch({"x": tune.uniform(-1, 1), "y": 0.0}, seed=7)
    grid = run_tuner(quadratic, searcher, num_samples=4, metric="loss", mode="max")
    assert searcher.metric == "loss" and searcher.mode == "max"
    assert searcher._ot_study.direction.name == "MAXIMIZE"
    assert all(result.config["y"] == 0.0 for result in grid)


def test_only_mode_uses_the_anonymous_metric():
    searcher = OptunaSearch({"x": tune.uniform(0, 1)}, mode="max")
    searcher.suggest("t0")
    assert searcher.metric == "_metric"
    searcher.on_trial_complete("t0", {"_metric": 1.5})
    assert searcher._ot_study.best_value == 1.5


# ---------------------------------------------------------------------- space conversion
def test_uniform_floats_stay_in_bounds():
    values = sample_values(tune.uniform(2, 3))
    assert all(type(v) is float and 2 <= v <= 3 for v in values)
    assert len(set(values)) == len(values)


def test_loguniform_is_log_scaled_and_in_bounds():
    assert OptunaSearch.convert_search_space({"p": tune.loguniform(1e-4, 1)}) == {
        "p": FloatDistribution(1e-4, 1, log=True)
    }
    values = sample_values(tune.loguniform(1e-4, 1))
    assert all(type(v) is float and 1e-4 <= v <= 1 for v in values)
    assert sum(v < 1e-2 for v in values) > 100  # half of the decades lie below 1e-2


def test_quniform_reaches_its_upper_bound_and_rounds_to_the_step():
    values = sample_values(tune.quniform(0, 1, 0.25))
    assert set(values) == {0.0, 0.25, 0.5, 0.75, 1.0}
    tenths = set(sample_values(tune.quniform(0, 1, 0.1)))
    assert tenths <= {round(i / 10, 1) for i in range(11)} and 0.3 in tenths


def test_qloguniform_drops_the_step_with_a_warning(caplog):
    with caplog.at_level("WARNING"):
        converted = OptunaSearch.convert_search_space({"p": tune.qloguniform(1, 100, 1)})
    assert converted == {"p": FloatDistribution(1, 100, log=True)}
    assert "`p`" in caplog.text and "quantize" in caplog.text


def test_randint_excludes_its_upper_bound():
    values = sample_values(tune.randint(0, 3))
    assert set(values) == {0, 1, 2} and all(type(v) is int for v in values)


def test_lograndint_excludes_its_upper_bound():
    values = sample_values(tune.lograndint(1, 10))
    assert all(type(v) is int and 1 <= v <= 9 for v in values)
    assert {1, 9} <= set(values)
    assert OptunaSearch.convert_search_space({"p": tune.lograndint(1, 10)}) == {
        "p": IntDistribution(1, 9, log=True)
    }


def test_qrandint_includes_its_upper_bound_and_uses_multiples_of_q():
    assert set(sample_values(tune.qrandint(0, 10, 5))) == {0, 5, 10}
    assert set(sample_values(tune.qrandint(1, 10, 5))) == {5, 10}  # as fasttune samples it
    assert all(type(v) is int for v in sample_values(tune.qrandint(0, 10, 5), 20))


def test_qlograndint_with_q_1_includes_its_upper_bound():
    values = sample_values(tune.qlograndint(1, 10, 1))
    assert all(type(v) is int and 1 <= v <= 10 for v in values) and 10 in values
    with pytest.raises(ValueError, match=r"`p` is qlograndint with q=2.*lograndint.*qrandint"):
        OptunaSearch({"p": tune.qlograndint(2, 64, 2)})


def test_choice_of_plain_values_and_of_objects():
    assert set(sample_values(tune.choice(["a", "b", "c"]))) == {"a", "b", "c"}
    assert set(sample_values(tune.choice([True, False]))) == {True, False}
    objects = [[1, 2], {"k": 1}, None, dict]
    values = sample_values(tune.choice(objects), 100)
    assert all(value in objects for value in values)
    assert {repr(v) for v in values} == {repr(o) for o in objects}
    converted = OptunaSearch.convert_search_space({"p": tune.choice(objects)})
    assert converted == {"p": CategoricalDistribution([0, 1, 2, 3])}  # drawn by index


def test_nested_spaces_are_flattened_for_optuna_and_nested_back():
    searcher = OptunaSearch(
        {"a": {"b": tune.uniform(0, 1), "c": {"d": tune.randint(0, 2)}}, "e": "const"},
        metric="loss",
        mode="min",
    )
    config = searcher.suggest("t0")
    assert set(config) == {"a", "e"} and set(config["a"]) == {"b", "c"}
    assert config["a"]["c"]["d"] in (0, 1) and config["e"] == "const"
    assert set(searcher._ot_study.trials[0].params) == {"a/b", "a/c/d"}


@pytest.mark.parametrize(
    "space, match",
    [
        ({"p": tune.grid_search([1, 2])}, r"`p` uses grid_search.*tune\.choice"),
        ({"n": {"p": tune.grid_search([1, 2])}}, r"`n/p` uses grid_search"),
        ({"p": tune.sample_from(lambda _: 1)}, r"`p` uses sample_from.*define-by-run"),
        ({"p": tune.randn(0, 1)}, r"`p` samples from a normal.*tune\.uniform"),
        ({"p": tune.qrandn(0, 1, 0.5)}, r"`p` samples from a normal"),
        ({"p": [tune.uniform(0, 1)]}, r"`p` holds a search-space definition inside a list"),
        ({"a/b": tune.uniform(0, 1)}, r"'a/b' contains '/'"),
        (  # Ray parity (issue 11): a clear error pointing to define-by-run
            {"m": tune.choice([{"a": tune.uniform(0, 1)}, {"b": 1}])},
            r"`m` is a choice of categories holding search domains.*define-by-run",
        ),
    ],
)
def test_unsupported_domains_name_the_key_and_the_alternative(space, match):
    with pytest.raises(ValueError, match=match):
        OptunaSearch(space, metric="loss", mode="min")
    with pytest.raises(ValueError, match=match):
        OptunaSearch().set_search_properties("loss", "min", space)


# ---------------------------------------------------------------------- errors
def test_grid_search_in_the_tuner_space_is_a_value_error(run_tuner):
    space = {"x": tune.grid_search([0.1, 0.2])}
    with pytest.raises(ValueError, match="`x` uses grid_search"):
        run_tuner(quadratic, OptunaSearch(), space, metric="loss", mode="min")


def test_no_space_at_all_is_a_runtime_error(run_tuner):
    with pytest.raises(RuntimeError, match="no search space"):
        run_tuner(quadratic, OptunaSearch(), {"x": 1}, metric="loss", mode="min")
    with pytest.raises(RuntimeError, match="no search space"):
        OptunaSearch(metric="loss", mode="min").suggest("t0")


def test_missing_metric_or_mode_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="no metric .* or mode"):
        OptunaSearch({"x": tune.uniform(0, 1)}, metric="loss").suggest("t0")


def test_searcher_space_and_tuner_domains_together_are_a_value_error(run_tuner):
    searcher = OptunaSearch({"x": tune.uniform(0, 1)}, metric="loss", mode="min")
    with pytest.raises(ValueError, match="`y`.*already built with its own search space"):
        run_tuner(quadratic, searcher, {"y": tune.uniform(0, 1)})


@pytest.mark.parametrize(
    "metric, mode, match",
    [
        (["a", "b"], "min", "give one mode per metric"),
        (["a", "b"], None, r"`metric` is a list"),
        (["a", "b"], ["min"], "as many"),
        (None, ["min", "max"], r"`mode` is a list"),
        (["a", "b"], ["min", "obs"], "'min' or 'max'"),
        ("a", "minimize", "'min' or 'max'"),
    ],
)
def test_mismatched_metric_and_mode_are_value_errors(metric, mode, match):
    with pytest.raises(ValueError, match=match):
        OptunaSearch(metric=metric, mode=mode)


def test_bad_arguments_are_rejected_at_construction():
    with pytest.raises(TypeError, match="optuna.samplers.BaseSampler"):
        OptunaSearch(sampler="tpe")
    with pytest.raises(TypeError, match="storage"):
        OptunaSearch(storage=42)
    with pytest.raises(TypeError, match="define-by-run"):
        OptunaSearch(space=[("x", 1)])
    with pytest.raises(TypeError, match="list of config dicts"):
        OptunaSearch(points_to_evaluate={"x": 1})
    with pytest.raises(ValueError, match="2 values but `points_to_evaluate` has 1"):
        OptunaSearch(points_to_evaluate=[{"x": 1}], evaluated_rewards=[1, 2])
    with pytest.raises(TypeError, match="define-by-run"):
        OptunaSearch(lambda t: None, points_to_evaluate=[{"x": 1}], evaluated_rewards=[1])
    with pytest.raises(ValueError, match=r"points_to_evaluate\[0\] lacks `y`"):
        OptunaSearch(
            {"x": tune.uniform(0, 1), "y": tune.uniform(0, 1)}, points_to_evaluate=[{"x": 0.5}]
        )
    with pytest.raises(ValueError, match=r"`c` = 'z' is not one of its choices"):
        OptunaSearch({"c": tune.choice([[1], [2]])}, points_to_evaluate=[{"c": "z"}])


def test_seed_with_a_sampler_is_ignored_with_a_warning(caplog):
    with caplog.at_level("WARNING"):
        OptunaSearch(sampler=optuna.samplers.RandomSampler(seed=0), seed=3)
    assert "`seed` is ignored" in caplog.text


def test_define_by_run_must_return_a_dict_or_none():
    searcher = OptunaSearch(lambda trial: [trial.suggest_float("x", 0, 1)], metric="m", mode="min")
    with pytest.raises(TypeError, match="must return None or a dict"):
        searcher.suggest("t0")
    assert searcher._ot_study.trials[0].state == TrialState.FAIL  # no trial left running


# ---------------------------------------------------------------------- ask / tell
def test_trial_endings_map_to_optuna_states():
    searcher = OptunaSearch({"x": tune.uniform(0, 1)}, metric="loss", mode="min", seed=8)
    drive(searcher, 5)
    searcher.on_trial_complete("t0", {"loss": 0.5})
    searcher.on_trial_complete("t1", None, error=True)
    searcher.on_trial_complete("t2", {"other": 1})
    searcher.on_trial_complete("t3", {"loss": float("nan")})
    searcher.on_trial_complete("t4", {"loss": 0.25}, error=True)
    states = [(t.state, t.value) for t in searcher._ot_study.trials]
    assert states == [
        (TrialState.COMPLETE, 0.5),
        (TrialState.FAIL, None),
        (TrialState.PRUNED, None),
        (TrialState.FAIL, None),
        (TrialState.COMPLETE, 0.25),  # errored, but its last result holds the metric
    ]
    searcher.on_trial_complete("t0", {"loss": 0.1})  # twice: ignored
    searcher.on_trial_complete("unknown", {"loss": 0.1})
    assert len(searcher._ot_study.trials) == 5


def test_intermediate_results_are_reported_once_per_step():
    searcher = OptunaSearch({"x": tune.uniform(0, 1)}, metric="loss", mode="min")
    searcher.suggest("t0")
    for step, loss in [(1, 3.0), (2, 2.0), (2, 9.0), (1, 9.0), (3, None), (4, float("nan"))]:
        searcher.on_trial_result("t0", {"loss": loss, "training_iteration": step})
    searcher.on_trial_result("t0", {"training_iteration": 5})
    searcher.on_trial_complete("t0", {"loss": 1.0, "training_iteration": 6})
    assert searcher._ot_study.trials[0].intermediate_values == {1: 3.0, 2: 2.0}


def test_add_evaluated_point_and_trials():
    searcher = OptunaSearch(
        {"x": tune.uniform(0, 1), "n": {"c": tune.choice([[1], [2]])}}, metric="loss", mode="min"
    )
    searcher.add_evaluated_point({"x": 0.1, "n": {"c": [2]}, "extra": 1}, 0.7)
    searcher.add_evaluated_point({"x": 0.2, "n": {"c": [1]}}, 0.0, error=True)
    searcher.add_evaluated_point(
        {"x": 0.3, "n": {"c": [1]}}, 0.5, pruned=True, intermediate_values=[0.9, 0.5]
    )
    trials = searcher._ot_study.trials
    assert [(t.state, t.value) for t in trials] == [
        (TrialState.COMPLETE, 0.7),
        (TrialState.FAIL, None),
        (TrialState.PRUNED, None),
    ]
    assert trials[0].params == {"x": 0.1, "n/c": 1}  # the index of [2]
    assert trials[2].intermediate_values == {0: 0.9, 1: 0.5}
    with pytest.raises(ValueError, match="lacks `n/c`"):
        searcher.add_evaluated_point({"x": 0.5}, 1.0)
    with pytest.raises(ValueError, match="1 number"):
        searcher.add_evaluated_point({"x": 0.5, "n": {"c": [1]}}, [1.0, 2.0])

    dbr = OptunaSearch(lambda trial: None, metric="loss", mode="min")
    with pytest.raises(TypeError, match="define-by-run"):
        dbr.add_evaluated_point({"x": 1}, 1.0)


def test_add_evaluated_trials_from_a_finished_experiment(run_tuner):
    space = {"x": tune.uniform(-1, 1), "y": tune.uniform(-1, 1)}
    grid = run_tuner(
        quadratic, OptunaSearch(seed=9), space, num_samples=3, metric="loss", mode="min"
    )
    warm = OptunaSearch(space, metric="loss", mode="min")
    warm.add_evaluated_trials(grid._experiment_analysis.trials, "loss")
    values = sorted(t.value for t in warm._ot_study.trials)
    assert values == sorted(result.metrics["loss"] for result in grid)


def test_multi_objective_evaluated_point_takes_one_value_per_metric():
    searcher = OptunaSearch({"x": tune.uniform(0, 1)}, metric=["a", "b"], mode=["min", "max"])
    searcher.add_evaluated_point({"x": 0.5}, [1.0, 2.0])
    assert searcher._ot_study.trials[0].values == [1.0, 2.0]


# ---------------------------------------------------------------------- seeds and state
def test_same_seed_gives_the_same_suggestions():
    space = {"x": tune.uniform(-1, 1), "n": tune.randint(0, 100), "c": tune.choice(["a", "b", "c"])}

    def objective(config):
        return config["x"] ** 2 + config["n"]

    def run(seed):
        searcher = OptunaSearch(space, metric="loss", mode="min", seed=seed)
        return drive(searcher, 14, objective)  # past TPE's 10 random start-up trials

    assert run(42) == run(42)
    assert run(42) != run(43)


def test_save_and_restore_continue_exactly(tmp_path):
    space = {"x": tune.uniform(-1, 1), "c": tune.choice([[1], [2], [3]])}

    def objective(config):
        return (config["x"] - 0.2) ** 2 + config["c"][0]

    original = OptunaSearch(space, metric="loss", mode="min", seed=10)
    drive(original, 12, objective)
    pending = original.suggest("pending")  # asked, not yet told
    path = str(tmp_path / "searcher.pkl")
    original.save(path)

    restored = OptunaSearch()
    restored.restore(path)
    assert restored.metric == "loss" and len(restored._ot_study.trials) == 13
    for searcher in (original, restored):
        searcher.on_trial_complete("pending", {"loss": objective(pending)})
    assert restored._ot_study.trials[-1].state == TrialState.COMPLETE
    assert [original.suggest(f"n{i}") for i in range(3)] == [
        restored.suggest(f"n{i}") for i in range(3)
    ]


def test_state_with_a_define_by_run_lambda_pickles(tmp_path):
    searcher = OptunaSearch(lambda t: {"y": t.suggest_int("x", 0, 3) * 2}, metric="m", mode="max")
    config = searcher.suggest("a")
    path = str(tmp_path / "s.pkl")
    searcher.save(path)
    restored = OptunaSearch()
    restored.restore(path)
    restored.on_trial_complete("a", {"m": 1.0})
    assert config["y"] == 2 * config["x"] and restored._ot_study.trials[0].value == 1.0


def test_rdb_storage_and_study_name_are_used(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    searcher = OptunaSearch(
        {"x": tune.uniform(0, 1)}, metric="loss", mode="min", study_name="mine", storage=url
    )
    drive(searcher, 3, lambda config: config["x"])
    study = optuna.load_study(study_name="mine", storage=url)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3


# ---------------------------------------------------------------------- driver crash
def _wait_for_lines(path: str, count: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the driver exited early ({proc.returncode})")
        time.sleep(0.02)
    raise AssertionError("the experiment made no progress")


def _configs(grid) -> list[tuple[float, int]]:
    return [(result.config["x"], result.config["opt"]["y"]) for result in grid]


@pytest.mark.slow
def test_sigkilled_driver_resumes_without_repeated_or_lost_suggestions(tmp_path):
    storage, workdir = str(tmp_path / "store"), tmp_path / "work"
    workdir.mkdir()
    block_at = 4  # the 4th trial hangs until released: 3 finished, 1 running
    with open(tmp_path / "driver.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.search._optuna_driver", storage, str(workdir),
             str(block_at)],
            cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
            stderr=log, text=True,
        )  # fmt: skip
        assert proc.stdout.readline().strip() == "started"
        _wait_for_lines(str(workdir / "starts"), block_at, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    (workdir / "release").touch()
    path = os.path.join(storage, "optuna_killed")
    assert tune.Tuner.can_restore(path)

    grid = tune.Tuner.restore(path, trainable=driver.quadratic).fit()
    assert len(grid) == driver.NUM_SAMPLES
    assert grid.num_terminated == driver.NUM_SAMPLES and grid.num_errors == 0
    configs = _configs(grid)
    assert len(set(configs)) == driver.NUM_SAMPLES  # nothing suggested twice
    assert configs[:2] == [(p["x"], p["opt"]["y"]) for p in driver.POINTS]  # enqueued once

    # The same seeded search without a crash suggests the same configs.
    reference = driver.make_tuner(str(tmp_path / "reference"), str(workdir)).fit()
    assert sorted(configs) == sorted(_configs(reference))

    # The saved study holds every trial's observation, the ones before the crash too.
    loaded = ExperimentStateStore(path).load()
    searcher = OptunaSearch()
    searcher.set_state(unwrap_limiter(pickle.loads(loaded.search_state["searcher"])))
    trials = searcher._ot_study.trials
    assert len(trials) == driver.NUM_SAMPLES
    assert all(t.state == TrialState.COMPLETE for t in trials)
    losses = {config: r.metrics["loss"] for config, r in zip(configs, grid)}
    for trial in trials:
        config = (trial.params["x"], trial.params["opt/y"])
        assert math.isclose(trial.value, losses[config])
    assert not searcher._ot_trials  # no ask-ed trial left pending
