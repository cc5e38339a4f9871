"""TuneBOHB against the real hpbandster and ConfigSpace: spaces, budgets, HyperBandForBOHB."""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import subprocess
import sys
import tempfile

import pytest

import fasttune as tune
from fasttune._support.imports import MissingDependencyError
from fasttune.search.bohb import TuneBOHB
from tests.search import _bohb_driver as driver

# hpbandster and ConfigSpace are imported inside the tests that use them: worker
# processes import this module to load the trainables, and importing them takes seconds.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RANDOM = {"random_fraction": 1.0}  # BOHB samples at random: for checking domains
pytestmark = pytest.mark.usefixtures("two_cpus")


def curve(config):
    """A learning curve whose final loss is (x - 0.3)^2, resumable from checkpoints."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["step"]
    for step in range(start, 9):
        directory = tempfile.mkdtemp()
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump({"step": step + 1}, f)
        loss = (config["x"] - 0.3) ** 2 + 1.0 / (step + 1)
        tune.report({"loss": loss}, checkpoint=tune.Checkpoint.from_directory(directory))


def drive(searcher, count, objective=None, budget=1.0, prefix="t"):
    """Suggest ``count`` trials in process, each told one result at ``budget``."""
    configs = []
    for i in range(count):
        trial_id = f"{prefix}{i}"
        config = searcher.suggest(trial_id)
        configs.append(config)
        if objective is not None:
            result = {"loss": objective(config), "hyperband_info": {"budget": budget}}
            searcher.on_trial_result(trial_id, result)
            searcher.on_trial_complete(trial_id, result)
    return configs


def sample_values(domain, count=200):
    searcher = TuneBOHB({"p": domain}, RANDOM, metric="loss", mode="min", seed=0)
    return [config["p"] for config in drive(searcher, count)]


# ---------------------------------------------------------------------- import
def test_importing_the_module_does_not_import_hpbandster_or_configspace():
    code = (
        "import sys, fasttune.search.bohb; "
        "assert 'hpbandster' not in sys.modules and 'ConfigSpace' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


@pytest.mark.parametrize("module", ["hpbandster", "ConfigSpace"])
def test_a_missing_library_names_the_extra_to_install(monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import <module>` fail
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[bohb\]"'):
        TuneBOHB()


# ---------------------------------------------------------------------- with HyperBandForBOHB
def test_tuner_with_hyperband_for_bohb_feeds_budgets_and_pauses(tmp_path):
    from fasttune.schedulers.hb_bohb import HyperBandForBOHB

    searcher = TuneBOHB(seed=2)
    grid = tune.Tuner(
        curve,
        param_space={"x": tune.uniform(0, 1), "k": "kept"},
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            scheduler=HyperBandForBOHB(max_t=9, reduction_factor=3),
            num_samples=12,
            metric="loss",
            mode="min",
            max_concurrent_trials=2,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert len(grid) == 12 and grid.num_errors == 0
    assert all(r.config["k"] == "kept" for r in grid)
    # The first bracket runs 9 trials to 1 iteration and 3 of them to 3. A result that
    # ends its trial (STOP) is not seen by the searcher, as in Ray Tune, so one per
    # halving may be missing.
    budgets = searcher.bohber.configs
    assert {1.0, 3.0} <= set(budgets) <= {1.0, 3.0, 9.0} and len(budgets[1.0]) >= 7
    assert not searcher.running and not searcher.paused and not searcher.trial_to_params
    assert grid.get_best_result().metrics["loss"] < 0.3


# ---------------------------------------------------------------------- space conversion
def test_convert_search_space_builds_configspace_hyperparameters():
    import ConfigSpace as CS

    space = TuneBOHB.convert_search_space(
        {
            "u": tune.uniform(-1, 2),
            "l": tune.loguniform(1e-4, 1e-1),
            "n": {"i": tune.randint(0, 10), "li": tune.lograndint(1, 100)},
            "r": tune.randn(3, 2),
            "q": tune.quniform(0, 1, 0.25),
            "c": tune.choice(["a", "b"]),
        }
    )
    assert isinstance(space, CS.ConfigurationSpace)
    assert sorted(space.keys()) == ["c", "l", "n/i", "n/li", "q", "r", "u"]
    assert (space["u"].lower, space["u"].upper, space["u"].log) == (-1, 2, False)
    assert space["l"].log and (space["n/i"].lower, space["n/i"].upper) == (0, 9)
    assert space["n/li"].log and space["n/li"].upper == 99
    assert (space["r"].mu, space["r"].sigma, space["r"].lower, space["r"].upper) == (3, 2, -7, 13)
    assert (space["q"].lower, space["q"].upper) == (-0.125, 1.125)
    assert space["c"].choices == ("a", "b")


def test_uniform_and_loguniform_stay_in_bounds():
    values = sample_values(tune.uniform(-2, 3))
    assert all(-2 <= v <= 3 and type(v) is float for v in values)
    values = sample_values(tune.loguniform(1e-4, 1e-1))
    assert all(1e-4 <= v <= 1e-1 for v in values) and min(values) < 1e-3


def test_quantized_domains_round_to_the_step_and_reach_both_bounds():
    assert set(sample_values(tune.quniform(0, 1, 0.25))) == {0.0, 0.25, 0.5, 0.75, 1.0}
    ints = sample_values(tune.qrandint(0, 10, 5))  # ints, not 5.0 nor 3.63 (Ray's test)
    assert set(ints) == {0, 5, 10} and all(type(v) is int for v in ints)
    logs = sample_values(tune.qlograndint(2, 8, 2))
    assert set(logs) == {2, 4, 6, 8} and all(type(v) is int for v in logs)
    values = sample_values(tune.qrandn(10, 2, 0.5))
    assert all(v * 2 == int(v * 2) for v in values)


def test_randint_and_lograndint_exclude_their_upper_bound():
    values = sample_values(tune.randint(0, 3))
    assert set(values) == {0, 1, 2} and all(type(v) is int for v in values)
    assert set(sample_values(tune.lograndint(1, 4))) == {1, 2, 3}


def test_normal_domains_are_sampled_around_their_mean():
    values = sample_values(tune.randn(10, 2), count=300)
    assert 9.5 < sum(values) / len(values) < 10.5 and all(0 <= v <= 20 for v in values)


def test_choice_returns_the_category_objects_even_when_configspace_cannot_hold_them():
    for categories in ([None, [1, 2], {"a": 1}, "s"], [1, True, 1.5]):
        values = sample_values(tune.choice(categories))
        assert {repr(v) for v in values} == {repr(c) for c in categories}
    assert any(type(v) is bool for v in sample_values(tune.choice([1, True])))


def test_nested_spaces_keep_their_shape_and_non_string_keys():
    searcher = TuneBOHB(
        {
            "model": {"lr": tune.loguniform(1e-3, 1), "depth": tune.randint(1, 5)},
            1: tune.choice([0]),
        },
        metric="loss",
        mode="min",
    )
    config = searcher.suggest("t")
    assert set(config) == {"model", 1} and set(config["model"]) == {"lr", "depth"}


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
        TuneBOHB(space)
    with pytest.raises(ValueError, match=match):
        TuneBOHB().set_search_properties("loss", "min", space)


def test_native_configuration_space_and_its_points():
    import ConfigSpace as CS

    space = CS.ConfigurationSpace(space={"net/width": (1, 8), "act": ["relu", "tanh"]})
    points = [{"net": {"width": 3}, "act": "tanh"}]
    searcher = TuneBOHB(space, metric="loss", mode="min", points_to_evaluate=points, seed=0)
    assert searcher.suggest("p") == points[0]
    config = searcher.suggest("t")
    assert set(config) == {"net", "act"} and 1 <= config["net"]["width"] <= 8
    assert type(config["net"]["width"]) is int and type(config["act"]) is str
    with pytest.raises(ValueError, match="does not fit the ConfigSpace space"):
        TuneBOHB(space, points_to_evaluate=[{"net": {"width": 30}, "act": "relu"}])


# ---------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"bohb_config": [1]}, TypeError, "`bohb_config` must be a dict"),
        ({"bohb_config": {"nope": 1}, "space": {"x": tune.uniform(0, 1)}}, ValueError, "nope"),
        ({"points_to_evaluate": {"x": 1}}, ValueError, "must be a list of config dicts"),
        ({"metric": ["a", "b"], "mode": ["min", "max"]}, ValueError, "single metric"),
        ({"mode": "minimize"}, ValueError, "`mode` must be 'min' or 'max'"),
        ({"seed": -1}, ValueError, "`seed` must be an int"),
        ({"max_concurrent": 1.5}, ValueError, "`max_concurrent` must be an int"),
        ({"space": {"x": 3}}, ValueError, "holds no search domains"),
        ({"space": ["x"]}, ValueError, "must be a dict of search domains or a ConfigSpace"),
    ],
)
def test_bad_arguments_are_rejected_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        TuneBOHB(**kwargs)


def test_points_come_first_in_order_and_must_fit_the_space():
    space = {"x": tune.uniform(0, 1), "n": tune.randint(0, 3), "c": tune.choice(["a", "b"])}
    points = [{"x": 0.5, "n": 2, "c": "b"}, {"x": 0.25, "n": 0, "c": "a", "other": 1}]
    searcher = TuneBOHB(space, metric="loss", mode="min", points_to_evaluate=points)
    assert drive(searcher, 2, lambda c: c["x"]) == [points[0], {"x": 0.25, "n": 0, "c": "a"}]
    with pytest.raises(ValueError, match="no value for `c`"):
        TuneBOHB(space, points_to_evaluate=[{"x": 0.5, "n": 1}])
    with pytest.raises(ValueError, match="`n` is 3"):
        TuneBOHB(space, points_to_evaluate=[{"x": 0.5, "n": 3, "c": "a"}])


def test_missing_metric_mode_or_space_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="needs a metric and a mode"):
        TuneBOHB({"x": tune.uniform(0, 1)}, metric="loss").suggest("t")
    with pytest.raises(RuntimeError, match="has no search space yet"):
        TuneBOHB(metric="loss", mode="min").suggest("t")
    with pytest.raises(RuntimeError, match="TuneBOHB has no search space"):
        TuneBOHB().set_search_properties("loss", "min", {"x": 3})
    searcher = TuneBOHB({"x": tune.uniform(0, 1)}, mode="max")
    searcher.suggest("t")  # only a mode: Ray's anonymous metric
    assert searcher.metric == "_metric"


def test_metric_and_mode_from_tune_config_reach_a_searcher_built_with_a_space():
    searcher = TuneBOHB({"x": tune.uniform(0, 1)})
    assert searcher.set_search_properties("loss", "max", {}) is False
    assert (searcher.metric, searcher.mode) == ("loss", "max")


# ---------------------------------------------------------------------- budgets
def test_results_with_a_budget_become_observations_negated_for_max(caplog):
    searcher = TuneBOHB({"x": tune.uniform(0, 1)}, metric="acc", mode="max", seed=0)
    for trial_id in ("a", "b", "c", "d", "e"):
        searcher.suggest(trial_id)
    searcher.on_trial_result("a", {"acc": 0.5, "hyperband_info": {}})  # between milestones
    searcher.on_trial_result("a", {"acc": 0.75, "hyperband_info": {"budget": 3}})
    searcher.on_trial_result("a", {"acc": 0.8, "hyperband_info": {"budget": 3}})  # told once
    searcher.on_trial_result("b", {"acc": 0.25, "hyperband_info/budget": 3})  # flattened
    searcher.on_trial_result("c", {"acc": math.nan, "hyperband_info": {"budget": 1}})
    searcher.on_trial_result("unknown", {"acc": 1.0, "hyperband_info": {"budget": 1}})
    with caplog.at_level(logging.WARNING, logger="fasttune.search.bohb"):
        searcher.on_trial_result("d", {"acc": 1.0})
        searcher.on_trial_result("e", {"acc": 1.0})
        searcher.on_trial_result("d", {"loss": 1.0, "hyperband_info": {"budget": 1}})
    assert searcher.bohber.losses == {3.0: [-0.75, -0.25], 1.0: [math.inf]}
    messages = [r.message for r in caplog.records]
    assert sum("no 'hyperband_info'" in m for m in messages) == 1
    assert sum("reported no numeric 'acc'" in m for m in messages) == 1


def test_max_concurrent_counts_running_trials_not_paused_ones():
    searcher = TuneBOHB({"x": tune.uniform(0, 1)}, metric="loss", mode="min", max_concurrent=2)
    assert searcher.suggest("a") and searcher.suggest("b")
    assert searcher.suggest("c") is None
    searcher.on_pause("a")
    assert searcher.suggest("c") is not None and searcher.suggest("d") is None
    searcher.on_trial_complete("b")
    searcher.on_unpause("a")
    assert searcher.suggest("d") is None
    assert searcher.set_max_concurrency(0) is True
    assert searcher.suggest("d") is not None


# ---------------------------------------------------------------------- seeds and state
def _model_run(seed, numpy_seed=0):
    import numpy as np

    space = {"x": tune.uniform(0, 1), "c": tune.choice(["a", "b"])}
    searcher = TuneBOHB(space, metric="loss", mode="min", seed=seed)
    objective = lambda c: (c["x"] - 0.3) ** 2 + (c["c"] == "b")  # noqa: E731
    np.random.seed(numpy_seed)
    configs = drive(searcher, 20, objective)
    assert np.random.randint(10**6) == np.random.RandomState(numpy_seed).randint(10**6)
    return configs, searcher


def test_a_seed_reproduces_model_based_suggestions_and_leaves_numpy_alone():
    configs, searcher = _model_run(4)
    assert searcher.bohber.kde_models  # the later suggestions came from the model
    assert _model_run(4, numpy_seed=1)[0] == configs
    assert _model_run(5)[0] != configs


def test_save_and_restore_continue_exactly(tmp_path):
    def make():
        return TuneBOHB({"x": tune.uniform(-1, 1)}, metric="loss", mode="min")

    objective = lambda c: (c["x"] - 0.5) ** 2  # noqa: E731
    original = make()
    drive(original, 6, objective)
    running = original.suggest("live")  # still running when saved
    path = str(tmp_path / "searcher.pkl")
    original.save(path)
    restored = make()
    restored.restore(path)
    for searcher in (original, restored):
        result = {"loss": objective(running), "hyperband_info": {"budget": 1}}
        searcher.on_trial_result("live", result)
        assert len(searcher.bohber.losses[1.0]) == 7
    assert drive(restored, 5, objective, prefix="n") == drive(original, 5, objective, prefix="n")


def test_state_pickles_with_the_search_generator():
    from fasttune.search.search_generator import SearchGenerator

    generator = SearchGenerator(TuneBOHB(metric="loss", mode="min"))
    generator.set_search_properties(None, None, {"x": tune.uniform(0, 1)})
    generator.add_configurations({"x": tune.uniform(0, 1)}, num_samples=4)
    live = generator.next_suggestion("a")
    state = pickle.loads(pickle.dumps(generator.get_state()))
    copy = SearchGenerator(TuneBOHB(metric="loss", mode="min"))
    copy.set_state(state)
    copy.on_trial_result("a", {"loss": live.config["x"], "hyperband_info": {"budget": 1}})
    assert copy.searcher.bohber.losses == {1.0: [live.config["x"]]}
    assert copy.searcher.running == {"a"}


@pytest.mark.slow
def test_sigkilled_driver_resumes_with_every_observation_kept(tmp_path):
    grid, before, after = driver.killed_then_restored(tmp_path)
    assert len(grid) == driver.NUM_SAMPLES
    assert grid.num_terminated == driver.NUM_SAMPLES and grid.num_errors == 0
    assert len({r.config["x"] for r in grid}) == driver.NUM_SAMPLES  # nothing suggested twice
    assert before["trial_to_params"]  # the crash came mid-experiment
    for budget, losses in before["bohber"].losses.items():  # hpbandster only appends
        assert after["bohber"].losses[budget][: len(losses)] == losses
    assert sum(map(len, after["bohber"].losses.values())) > sum(
        map(len, before["bohber"].losses.values())
    )
    assert not after["running"] and not after["paused"] and not after["trial_to_params"]
