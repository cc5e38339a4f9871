"""PB2: bounds, the data its GP learns from, the GP-UCB choice, and a real run."""

from __future__ import annotations

import itertools
import json
import os
import random
import sys

import numpy as np
import pytest

import fasttune as tune
from fasttune._support.imports import MissingDependencyError
from fasttune.error import TuneError
from fasttune.experiment.trial import TrialStatus
from fasttune.schedulers import _pb2_gp as gp
from fasttune.schedulers._pb2_data import Row, training_set
from fasttune.schedulers.pb2 import PB2
from tests.schedulers._population_helpers import RecordingView, make_trial, result
from tests.schedulers._population_trainables import Climber

BOUNDS = {"lr": [0.1, 0.9], "opt": {"momentum": [0.5, 0.99]}}


def make_pb2(**kwargs):
    kwargs.setdefault("time_attr", "training_iteration")
    kwargs.setdefault("metric", "score")
    kwargs.setdefault("mode", "max")
    kwargs.setdefault("perturbation_interval", 2)
    kwargs.setdefault("hyperparam_bounds", BOUNDS)
    kwargs.setdefault("log_config", False)
    pb2 = PB2(**kwargs)
    pb2._rng = random.Random(0)
    return pb2


# ---------------------------------------------------------------------- arguments
def test_bounds_are_validated_naming_the_parameter():
    with pytest.raises(TuneError, match="hyperparam_bounds"):
        make_pb2(hyperparam_bounds=None)
    with pytest.raises(ValueError, match=r"hyperparam_bounds\['lr'\] must be a list .* \[0.1\]"):
        make_pb2(hyperparam_bounds={"lr": [0.1]})
    with pytest.raises(ValueError, match=r"hyperparam_bounds\['opt/m'\] .*low <= high"):
        make_pb2(hyperparam_bounds={"opt": {"m": [0.9, 0.1]}})
    with pytest.raises(ValueError, match="two finite numbers"):
        make_pb2(hyperparam_bounds={"lr": ["a", "b"]})
    with pytest.raises(ValueError, match="quantile_fraction"):
        make_pb2(quantile_fraction=0.9)


def test_missing_scikit_learn_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn raises ImportError
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[pb2\]"'):
        make_pb2()


def test_missing_hyperparameters_are_drawn_within_the_bounds():
    pb2 = make_pb2()
    trial = make_trial("a", {"opt": {"other": 1}, "keep": 2})
    pb2.on_trial_add(RecordingView([trial]), trial)
    assert 0.1 <= trial.config["lr"] <= 0.9
    assert 0.5 <= trial.config["opt"]["momentum"] <= 0.99
    assert trial.config["opt"]["other"] == 1 and trial.config["keep"] == 2
    assert trial.evaluated_params["opt/momentum"] == trial.config["opt"]["momentum"]


# ---------------------------------------------------------------------- data
def test_training_set_holds_improvement_rates_per_trial_and_config():
    rows = [
        Row("a", 2, (0.1,), 1.0),
        Row("b", 2, (0.5,), 2.0),
        Row("a", 4, (0.1,), 2.0),
        Row("b", 4, (0.5,), 6.0),
        Row("a", 4, (0.5,), 6.0),  # a exploited b: new config, b's point
        Row("a", 6, (0.5,), 9.0),
    ]
    data = training_set(rows, "b")
    # Rates: (2-1)/2 for a, (6-2)/2 for b, (9-6)/2 for a under its new config.
    assert data.y.tolist() == [0.5, 2.0, 1.5]
    assert data.x.tolist() == [[4, 1.0, 0.1], [4, 2.0, 0.5], [6, 6.0, 0.5]]
    assert data.newpoint.tolist() == [4, 2.0] and (data.donor_time, data.donor_reward) == (4, 6.0)
    assert training_set(rows, "c") is None
    assert len(training_set(rows, "a", max_rows=1).y) == 1


# ---------------------------------------------------------------------- the GP
def test_kernel_is_time_varying_squared_exponential():
    k = gp.time_varying_kernel(3)
    x = np.array([[0.0, 0.3, 0.3], [1.0, 0.3, 0.3], [0.0, 0.3, 0.8]])
    cov = k(x) - np.eye(3)  # less the initial observation noise
    assert cov[0, 1] == pytest.approx(0.9**0.5)  # (1 - eps) ** (|dt| / 2), eps = 0.1
    assert cov[0, 2] == pytest.approx(np.exp(-(0.5**2)))  # exp(-d**2 / l), l = 1
    assert "OnColumns(RBF" in repr(k)


def test_kernel_gradient_matches_finite_differences():
    from sklearn.gaussian_process import GaussianProcessRegressor

    rng = np.random.default_rng(0)
    x = rng.uniform(size=(20, 3))
    model = GaussianProcessRegressor(gp.time_varying_kernel(3), optimizer=None)
    model.fit(x, np.sin(3 * x[:, 2]))
    theta = model.kernel_.theta + 0.3
    _, grad = model.log_marginal_likelihood(theta, eval_gradient=True)
    step = np.eye(len(theta)) * 1e-5
    numeric = [
        (model.log_marginal_likelihood(theta + s) - model.log_marginal_likelihood(theta - s)) / 2e-5
        for s in step
    ]
    assert grad == pytest.approx(numeric, rel=1e-3, abs=1e-4)


def test_ucb_finds_the_best_hyperparameter():
    rng = np.random.default_rng(0)
    x = np.column_stack(
        [np.repeat(np.arange(1, 11), 4), rng.uniform(0, 1, 40), rng.uniform(0, 1, 40)]
    )
    y = -((x[:, 2] - 0.7) ** 2) + 0.01 * rng.normal(size=40)
    args = (np.array([10.0, 0.5]), np.array([0.0]), np.array([1.0]))
    chosen = gp.select_config(x, y, None, *args, np.random.default_rng(1))
    assert chosen.dtype == np.float32 and abs(chosen[0] - 0.7) < 0.06
    # Bounds other than [0, 1] map back.
    args = (np.array([10.0, 0.5]), np.array([0.0]), np.array([10.0]))
    scaled = gp.select_config(x * [1, 1, 10], y, None, *args, np.random.default_rng(1))
    assert abs(scaled[0] - 7.0) < 0.6


def test_points_other_trials_try_spread_the_choice():
    rng = np.random.default_rng(0)
    x = np.column_stack([np.arange(1, 7), rng.uniform(0, 1, 6), 0.45 + 0.1 * rng.uniform(0, 1, 6)])
    y = rng.normal(size=6) * 0.1
    args = (np.array([6.0, 0.5]), np.array([0.0]), np.array([1.0]))
    first = gp.select_config(x, y, None, *args, np.random.default_rng(1))
    second = gp.select_config(x, y, first[None, :].astype(float), *args, np.random.default_rng(1))
    assert abs(float(second[0]) - float(first[0])) > 0.1


def test_window_length():
    x, y = np.random.default_rng(0).uniform(size=(230, 3)), np.zeros(230)
    low, high = np.array([0.0]), np.array([1.0])
    assert gp.window_length(x[:150], y[:150], low, high, 2) == 150
    assert gp.window_length(x, y, low, high, 2) in (200, 210, 220, 230)


# ---------------------------------------------------------------------- the scheduler
def population(pb2, configs):
    trials = [make_trial(f"t{i}", c, checkpoint_dir=f"ck{i}") for i, c in enumerate(configs)]
    view = RecordingView(trials)
    for trial in trials:
        pb2.on_trial_add(view, trial)
    return trials, view


def test_exploit_chooses_values_within_the_bounds_and_keeps_types():
    pb2 = make_pb2(hyperparam_bounds={"lr": [0.1, 0.9], "layers": [1, 8]})
    configs = [{"lr": 0.1 + 0.2 * i, "layers": 2 + i, "name": "x"} for i in range(4)]
    trials, view = population(pb2, configs)
    for iteration in (2, 4, 6):
        for i, trial in enumerate(trials):  # t0 is always the worst, t3 the best
            pb2.on_trial_result(view, trial, result(iteration, i * iteration))
        for target, options in view.of("exploit"):
            new = options["config"]
            assert 0.1 <= new["lr"] <= 0.9 and isinstance(new["lr"], float)
            assert 1 <= new["layers"] <= 8 and isinstance(new["layers"], int)
            assert new["name"] == "x" and options["tag"].startswith(f"{target.trial_id}@perturbed[")
        view.apply()
        for trial in trials:
            trial.set_status(TrialStatus.RUNNING)
    assert pb2._num_perturbations >= 2
    # The exploiting trial's new point is recorded at the donor's time and reward.
    exploit_rows = [r for r in pb2._rows if r.trial_id == "t0" and r.time in (4, 6)]
    assert len(exploit_rows) >= 2


def test_current_batch_resets_at_a_new_time_and_state_round_trips():
    pb2 = make_pb2(hyperparam_bounds={"lr": [0.0, 1.0]})
    trials, _ = population(pb2, [{"lr": v} for v in (0.1, 0.3, 0.5, 0.7, 0.9, 0.6)])
    for it in (2, 4):
        for i, trial in enumerate(trials):
            pb2._save_trial_state(pb2._state(trial), it, result(it, i * it), trial)
    first, _ = pb2._get_new_config(trials[0], trials[5])
    second, _ = pb2._get_new_config(trials[1], trials[4])
    # Both chosen at time 4: one batch, which the second choice took into account.
    assert pb2._current == [[first["lr"]], [second["lr"]]]
    assert pb2._last_exploration_time == 4
    pb2._save_trial_state(pb2._state(trials[2]), 6, result(6, 50), trials[2])
    pb2._get_new_config(trials[3], trials[2])
    assert len(pb2._current) == 1  # a new round
    restored = make_pb2(hyperparam_bounds={"lr": [0.0, 1.0]})
    restored.set_state(pb2.get_state())
    assert restored.get_state() == pb2.get_state()
    assert restored._rows == pb2._rows


def test_donor_without_data_keeps_its_config():
    pb2 = make_pb2(hyperparam_bounds={"lr": [0.0, 1.0]}, custom_explore_fn=lambda c: {**c, "x": 1})
    trials, _ = population(pb2, [{"lr": 0.2}, {"lr": 0.8}])
    new, ops = pb2._get_new_config(trials[0], trials[1])
    assert new == {"lr": 0.8, "x": 1} and ops == {}


# ---------------------------------------------------------------------- end to end
@pytest.fixture
def two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


def test_pb2_run_changes_configs_within_the_bounds(tmp_path, two_cpus):
    random.seed(1)
    pb2 = PB2(
        time_attr="training_iteration",
        perturbation_interval=2,
        hyperparam_bounds={"lr": [0.1, 0.9]},
        quantile_fraction=0.5,
    )
    grid = tune.Tuner(
        Climber,
        param_space={"lr": tune.grid_search([0.1, 0.2, 0.3, 0.4])},
        tune_config=tune.TuneConfig(scheduler=pb2, metric="score", mode="max"),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="pb2", verbose=0, stop={"training_iteration": 6}
        ),
    ).fit()
    assert grid.num_terminated == 4 and pb2._num_perturbations >= 1
    changed = 0
    for res in grid:
        lines = [json.loads(line) for line in open(os.path.join(res.path, "result.json"))]
        assert lines[-1]["training_iteration"] == 6
        assert all(0.1 <= line["lr"] <= 0.9 for line in lines)
        for before, after in itertools.pairwise(lines):
            if after["origin"] != before["origin"]:
                changed += 1
                assert "@perturbed[lr=" in after["experiment_tag"]
    assert changed >= 1
