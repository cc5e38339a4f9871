"""Ray Tune behaviours found by running the same scripts on Ray Tune 2.60 and on
fasttune side by side (2026-11-25): what a user of each observes must match."""

from __future__ import annotations

import os
from typing import Any

import pytest

import fasttune as tune
from fasttune import Callback, RunConfig, TuneConfig, Tuner


def _report_i(config: dict[str, Any]) -> None:
    tune.report({"i": config["i"]})


@pytest.fixture
def run_config(tmp_path: Any) -> Any:
    def make(**kwargs: Any) -> RunConfig:
        return RunConfig(storage_path=str(tmp_path), name="exp", verbose=0, **kwargs)

    return make


def test_num_samples_zero_gives_an_empty_grid(run_config: Any) -> None:
    grid = Tuner(
        _report_i,
        param_space={"i": tune.uniform(0, 1)},
        tune_config=TuneConfig(num_samples=0),
        run_config=run_config(),
    ).fit()
    assert len(grid) == 0 and not grid.errors


def test_max_concurrent_trials_zero_means_no_limit(run_config: Any) -> None:
    grid = Tuner(
        _report_i,
        param_space={"i": tune.grid_search([0, 1, 2])},
        tune_config=TuneConfig(max_concurrent_trials=0),
        run_config=run_config(),
    ).fit()
    assert sorted(r.metrics["i"] for r in grid) == [0, 1, 2]


class _TrialsSeenAtStart(Callback):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.seen.append(len(trials))


def test_with_max_concurrent_trials_a_trial_is_created_when_a_slot_frees(
    run_config: Any,
) -> None:
    # Ray's default generator creates trials lazily under the limit: schedulers such as
    # HyperBand see each trial alone, and a run cut short leaves no never-run trials.
    seen = _TrialsSeenAtStart()
    grid = Tuner(
        _report_i,
        param_space={"i": tune.grid_search([0, 1, 2, 3])},
        tune_config=TuneConfig(max_concurrent_trials=1),
        run_config=run_config(callbacks=[seen]),
    ).fit()
    assert seen.seen == [1, 2, 3, 4]
    assert sorted(r.metrics["i"] for r in grid) == [0, 1, 2, 3]


def test_fail_fast_under_a_concurrency_limit_leaves_no_never_started_trial(
    run_config: Any,
) -> None:
    def fails_first(config: dict[str, Any]) -> None:
        if config["i"] == 0:
            raise ValueError("boom")
        tune.report({"i": config["i"]})

    grid = Tuner(
        fails_first,
        param_space={"i": tune.grid_search([0, 1, 2])},
        tune_config=TuneConfig(max_concurrent_trials=1),
        run_config=run_config(failure_config=tune.FailureConfig(fail_fast=True)),
    ).fit()
    assert len(grid) == 1 and grid.num_errors == 1


_SEQUENCES = {1: [5, 1, 9], 2: [3, 4, 6], 3: [8, 0, 7]}


def _reports_sequence(config: dict[str, Any]) -> None:
    for value in _SEQUENCES[config["k"]]:
        tune.report({"m": value, "nested": {"v": -value}})


def test_metric_analysis_of_trials_read_back_covers_every_result(run_config: Any) -> None:
    grid = Tuner(
        _reports_sequence,
        param_space={"k": tune.grid_search([1, 2, 3])},
        run_config=run_config(),
    ).fit()
    expected = {
        k: {"min": min(v), "max": max(v), "avg": sum(v) / len(v), "last": v[-1]}
        for k, v in _SEQUENCES.items()
    }

    def analysed(trials: list[Any]) -> dict[int, dict[str, float]]:
        return {
            t.config["k"]: {key: t.metric_analysis["m"][key] for key in expected[1]} for t in trials
        }

    loaded = tune.ExperimentAnalysis(grid.experiment_path)
    assert analysed(loaded.trials) == expected
    assert {t.config["k"]: t.metric_analysis["nested/v"]["max"] for t in loaded.trials} == {
        k: -min(v) for k, v in _SEQUENCES.items()
    }
    restored = Tuner.restore(grid.experiment_path, trainable=_reports_sequence).get_results()
    assert analysed(restored._experiment_analysis.trials) == expected
    assert restored.get_best_result("m", "min", scope="all").config["k"] == 3
    assert restored.get_best_result("m", "min", scope="avg").config["k"] == 2


def test_mistakes_raise_what_ray_tune_raises_and_what_fasttune_raised(
    run_config: Any, tmp_path: Any
) -> None:
    from fasttune.error import TuneError

    for ray_type, old_type, call in [
        (TuneError, ValueError, lambda: Tuner("no_such_trainable")),
        (TuneError, TypeError, lambda: Tuner(5)),
        (ValueError, TypeError, lambda: Tuner(_report_i, run_config=run_config(stop=5)).fit()),
        (FileNotFoundError, ValueError, lambda: Tuner.restore(str(tmp_path / "none"), _report_i)),
        (
            TuneError,
            ValueError,
            lambda: Tuner(
                _report_i,
                param_space={"i": 1},
                tune_config=TuneConfig(metric="never", mode="max"),
                run_config=run_config(),
            ).fit(),
        ),
    ]:
        with pytest.raises(ray_type) as info:
            call()
        assert isinstance(info.value, old_type), info.value


def test_the_context_answers_none_for_ray_trains_ranks(run_config: Any) -> None:
    def ranks(config: dict[str, Any]) -> None:
        ctx = tune.get_context()
        tune.report(
            {
                "ranks": [
                    ctx.get_world_size(),
                    ctx.get_world_rank(),
                    ctx.get_local_rank(),
                    ctx.get_local_world_size(),
                    ctx.get_node_rank(),
                ]
            }
        )

    grid = Tuner(ranks, run_config=run_config()).fit()
    assert grid[0].metrics["ranks"] == [None] * 5


class _NamesItsFolder(tune.Trainable):
    def step(self) -> dict[str, Any]:
        return {"folder": os.path.basename(self.logdir), "done": True}


def test_a_trainables_logdir_has_no_trailing_separator(run_config: Any) -> None:
    result = Tuner(_NamesItsFolder, run_config=run_config()).fit()[0]
    assert result.metrics["folder"] == os.path.basename(result.path)


class _SetupArguments(Callback):
    def setup(self, **info: Any) -> None:
        self.info = info


@pytest.mark.parametrize(
    ("stop", "expected"),
    [({"training_iteration": 2}, {"training_iteration": 2}), (lambda i, r: False, {})],
)
def test_callbacks_are_set_up_with_rays_arguments(
    run_config: Any, stop: Any, expected: Any
) -> None:
    seen = _SetupArguments()
    Tuner(
        _report_i,
        param_space={"i": tune.grid_search([1, 2])},
        tune_config=TuneConfig(time_budget_s=60),
        run_config=run_config(stop=stop, callbacks=[seen]),
    ).fit()
    assert seen.info == {
        "stop": expected,
        "num_samples": 1,
        "time_budget_s": 60,
        "total_num_samples": 2,
    }


def _loss(config: dict[str, Any]) -> None:
    tune.report({"loss": (config["x"] - 0.3) ** 2})


@pytest.mark.parametrize("library", ["hyperopt", "optuna"])
@pytest.mark.parametrize("limit", [None, 2])
def test_a_searcher_restores_from_the_experiment_directory(
    run_config: Any, library: str, limit: int | None
) -> None:
    # As Ray Tune's docs show: fit with a searcher, then a new searcher of the same
    # class takes the state a run left in its directory (with max_concurrent_trials
    # the run's searcher is wrapped in a ConcurrencyLimiter; the file is the user's).
    if library == "hyperopt":
        from fasttune.search.hyperopt import HyperOptSearch as cls

        kwargs: dict[str, Any] = {"random_state_seed": 1}
    else:
        from fasttune.search.optuna import OptunaSearch as cls  # type: ignore[assignment]

        kwargs = {"seed": 1}
    grid = Tuner(
        _loss,
        param_space={"x": tune.uniform(0, 1)},
        tune_config=TuneConfig(
            search_alg=cls(metric="loss", mode="min", **kwargs),
            num_samples=3,
            max_concurrent_trials=limit,
        ),
        run_config=run_config(),
    ).fit()
    assert len(grid) == 3
    restored = cls(**kwargs)
    restored.restore_from_dir(grid.experiment_path)
    assert (restored.metric, restored.mode) == ("loss", "min")
    assert isinstance(restored.suggest("next"), dict)
