"""Ray Tune behaviours found by running Ray's examples (issue 11, "Ray parity")."""

from __future__ import annotations

import os
from typing import Any

import pytest

import fasttune as tune
from fasttune import RunConfig, TuneConfig, Tuner
from fasttune.search import ConcurrencyLimiter, Searcher


def _two_reports(config: dict[str, Any]) -> None:
    for i in range(2):
        tune.report({"score": config["x"] * (i + 1)})


@pytest.mark.parametrize(("verbose", "level"), [(True, 1), (False, 0)])
def test_run_config_verbose_takes_bools_as_ray_does(
    verbose: bool, level: int, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = RunConfig(storage_path=str(tmp_path), name="v", verbose=verbose)
    assert config.verbose == level and type(config.verbose) is int
    results = Tuner(_two_reports, param_space={"x": 1}, run_config=config).fit()
    assert not results.errors
    printed = capsys.readouterr().out
    assert ("== Status ==" in printed) is verbose


def test_mock_trainable_runs_with_hyperband_and_restores(tmp_path: Any) -> None:
    from fasttune.schedulers import HyperBandScheduler
    from fasttune.utils.mock_trainable import MyTrainableClass

    results = Tuner(
        MyTrainableClass,
        param_space={"width": tune.grid_search([1, 4]), "height": 2},
        tune_config=TuneConfig(
            metric="episode_reward_mean",
            mode="max",
            scheduler=HyperBandScheduler(max_t=4),
        ),
        run_config=RunConfig(
            storage_path=str(tmp_path),
            name="mock",
            stop={"training_iteration": 4},
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
        ),
    ).fit()
    assert not results.errors
    best = results.get_best_result()
    assert best.config["width"] == 1
    assert best.metrics["episode_reward_mean"] == pytest.approx(2 * 0.999329, rel=1e-5)
    trainable = MyTrainableClass(config=best.config)
    trainable.restore(best.checkpoint)
    assert trainable.timestep == 4
    trainable.stop()


class _CountingSearcher(Searcher):
    """Suggests ``total`` configs and records how many were out at once."""

    def __init__(self, total: int) -> None:
        super().__init__(metric="score", mode="max")
        self.total, self.given, self.out, self.most_out = total, 0, 0, 0

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.given >= self.total:
            return Searcher.FINISHED
        self.given += 1
        self.out += 1
        self.most_out = max(self.most_out, self.out)
        return {"x": self.given}

    def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
        self.out -= 1


def test_max_concurrent_trials_wraps_a_searcher_in_a_concurrency_limiter(tmp_path: Any) -> None:
    searcher = _CountingSearcher(total=5)
    results = Tuner(
        _two_reports,
        tune_config=TuneConfig(search_alg=searcher, max_concurrent_trials=1, num_samples=5),
        run_config=RunConfig(storage_path=str(tmp_path), name="limit"),
    ).fit()
    assert not results.errors and len(results) == 5
    # without the limiter, a second trial is created while the first runs
    assert searcher.most_out == 1


def test_max_concurrent_trials_conflicting_with_a_limiter_is_refused(tmp_path: Any) -> None:
    limiter = ConcurrencyLimiter(_CountingSearcher(total=2), max_concurrent=3)
    tuner = Tuner(
        _two_reports,
        tune_config=TuneConfig(search_alg=limiter, max_concurrent_trials=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="conflict"),
    )
    with pytest.raises(ValueError, match=r"max_concurrent_trials=2.*max_concurrent=3"):
        tuner.fit()


def test_param_space_that_is_not_a_dict_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"param_space=.*must be a dict.*str"):
        Tuner(_two_reports, param_space="x")  # type: ignore[arg-type]


def test_restored_tuner_results_use_the_restored_metric_and_mode(tmp_path: Any) -> None:
    Tuner(
        _two_reports,
        param_space={"x": tune.grid_search([1, 3, 2])},
        tune_config=TuneConfig(metric="score", mode="max"),
        run_config=RunConfig(storage_path=str(tmp_path), name="best", verbose=0),
    ).fit()
    restored = Tuner.restore(str(tmp_path / "best"), trainable=_two_reports)
    assert restored.get_results().get_best_result().config == {"x": 3}


def test_an_unserialisable_trainable_is_refused_when_the_tuner_is_built() -> None:
    import threading

    lock = threading.Lock()

    def uses_lock(config: dict[str, Any]) -> None:
        with lock:
            tune.report({"x": 1})

    # Ray raises when the Tuner is built, not when fit() runs the trials
    with pytest.raises(TypeError, match=r"uses_lock cannot be serialised.*captures: lock"):
        Tuner(uses_lock)


def test_hyperband_for_bohb_state_and_trials_have_checkpoints(tmp_path: Any) -> None:
    from fasttune.schedulers import HyperBandForBOHB
    from fasttune.search.bohb import TuneBOHB
    from fasttune.utils.mock_trainable import MyTrainableClass

    scheduler = HyperBandForBOHB(max_t=9, reduction_factor=3)
    assert scheduler.state() == {"num_brackets": 0, "num_stopped": 0}
    analysis = tune.run(
        MyTrainableClass,
        config={"width": tune.uniform(1, 5), "height": 2},
        metric="episode_reward_mean",
        mode="max",
        scheduler=scheduler,
        search_alg=TuneBOHB(seed=0),
        num_samples=6,
        stop={"training_iteration": 9},
        checkpoint_at_end=True,
        storage_path=str(tmp_path),
        name="bohb",
        verbose=0,
    )
    state = scheduler.state()
    assert state["num_brackets"] >= 1 and state["num_stopped"] >= 1
    assert len(analysis.trials) == 6
    assert all(trial.has_checkpoint() for trial in analysis.trials)


def test_tune_run_takes_an_experiment_and_run_experiments_a_dict_of_specs(tmp_path: Any) -> None:
    experiment = tune.Experiment(
        "exp",
        _two_reports,
        config={"x": tune.grid_search([1, 2])},
        stop={"training_iteration": 1},
        storage_path=str(tmp_path),
    )
    analysis = tune.run(experiment, metric="score", mode="max", verbose=0)
    assert sorted(t.config["x"] for t in analysis.trials) == [1, 2]
    assert all(t.last_result["training_iteration"] == 1 for t in analysis.trials)  # its stop
    assert (tmp_path / "exp").is_dir()

    trials = tune.run_experiments(
        {"a": {"run": _two_reports, "config": {"x": 3}, "storage_path": str(tmp_path)},
         "b": {"run": _two_reports, "config": {"x": 4}, "num_samples": 2,
               "storage_path": str(tmp_path)}},
        verbose=0,
    )  # fmt: skip
    assert [t.config["x"] for t in trials] == [3, 4, 4]
    assert (tmp_path / "a").is_dir() and (tmp_path / "b").is_dir()


def test_experiment_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['stopp'\]"):
        tune.Experiment("e", _two_reports, stopp={"training_iteration": 1})
    with pytest.raises(ValueError, match=r"`num_samples` must be an int >= 1"):
        tune.Experiment("e", _two_reports, num_samples=0)
    with pytest.raises(TypeError, match=r"the spec must be a dict with a 'run' key"):
        tune.run_experiments({"e": {"config": {}}})


def test_basic_variant_generator_makes_trials_of_an_experiment() -> None:
    from fasttune.search import BasicVariantGenerator

    experiment = tune.Experiment(
        "e",
        "my_trainable",
        config={"a": tune.grid_search([1, 2]), "b": tune.uniform(0, 1)},
        stop={"training_iteration": 2},
        num_samples=2,
    )
    generator = BasicVariantGenerator(random_state=0)
    generator.add_configurations([experiment])
    trials = []
    while (trial := generator.next_trial()) is not None:
        trials.append(trial)
    assert [t.config["a"] for t in trials] == [1, 2, 1, 2]
    assert len({t.trial_id for t in trials}) == 4 and generator.is_finished()
    assert all(t.trainable_name == "my_trainable" for t in trials)
    assert all(t.stopping_criterion == {"training_iteration": 2} for t in trials)
    assert trials[1].experiment_tag.startswith("1_a=2,b=")
    with pytest.raises(RuntimeError, match=r"pass one to add_configurations\(\) first"):
        BasicVariantGenerator().next_trial()


class _SpecRecorder(_CountingSearcher):
    """Records what set_search_properties hears."""

    def set_search_properties(self, metric: Any, mode: Any, config: Any, **spec: Any) -> bool:
        self.spec = spec
        return False


@pytest.mark.parametrize("limit", [None, 2])  # bare, and wrapped in a ConcurrencyLimiter
def test_num_samples_stop_and_time_budget_reach_set_search_properties(
    limit: int | None, tmp_path: Any
) -> None:
    searcher = _SpecRecorder(total=3)
    Tuner(
        _two_reports,
        param_space={"a": 1},  # without a space (or metric) Ray does not call it
        tune_config=TuneConfig(
            search_alg=searcher, num_samples=3, time_budget_s=600, max_concurrent_trials=limit
        ),
        run_config=RunConfig(storage_path=str(tmp_path), stop={"training_iteration": 1}, verbose=0),
    ).fit()
    assert searcher.spec == {
        "num_samples": 3,
        "stop": {"training_iteration": 1},
        "time_budget_s": 600,
    }


class _Introspecting(tune.Trainable):
    """Reports what the older Trainable API says about where it runs."""

    def step(self) -> dict[str, Any]:
        return {
            "actor": self.is_actor(),
            "ip": self.get_current_ip(),
            "cloud": self.uses_cloud_checkpointing,
        }

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        with open(f"{checkpoint_dir}/weights.txt", "w") as f:
            f.write(str(self.iteration))
        return {"iteration": self.iteration}

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        pass


def test_older_trainable_api_inside_a_run_and_by_hand(tmp_path: Any) -> None:
    from fasttune.result import NODE_IP

    results = Tuner(
        _Introspecting,
        run_config=RunConfig(
            storage_path=str(tmp_path), name="old", stop={"training_iteration": 1}, verbose=0
        ),
    ).fit()
    metrics = results[0].metrics
    assert metrics["actor"] is True and metrics["cloud"] is False
    assert metrics["ip"] == metrics[NODE_IP]

    trainable = _Introspecting(config={}, logger_creator=None)
    try:
        assert trainable.is_actor() is False and trainable.uses_cloud_checkpointing is False
        on_s3 = _Introspecting(config={}, logger_creator=None, storage="s3://bucket/exp")
        assert on_s3.uses_cloud_checkpointing
        on_s3.stop()
        trainable.train()
        path = trainable.save(str(tmp_path / "by_hand" / "checkpoint_000001"))
        # A file inside the checkpoint names it too; the whole directory goes.
        trainable.delete_checkpoint(f"{path}/weights.txt")
        assert not (tmp_path / "by_hand" / "checkpoint_000001").exists()
        assert (tmp_path / "by_hand").is_dir()
        trainable.delete_checkpoint(path)  # already gone: skipped, as Ray does
    finally:
        trainable.stop()


def _fails_until_gate_opens(config: dict[str, Any]) -> None:
    with open(config["calls"], "a") as f:
        f.write("call\n")
    if not os.path.exists(config["gate"]):
        raise RuntimeError("the gate is closed")
    tune.report({"score": 1})


def _run_gated(tmp_path: Any, resume: Any) -> Any:
    return tune.run(
        _fails_until_gate_opens,
        name="gated",
        storage_path=str(tmp_path),
        config={"gate": str(tmp_path / "gate"), "calls": str(tmp_path / "calls")},
        resume=resume,
        raise_on_failed_trial=False,
        verbose=0,
    )


def _calls(tmp_path: Any) -> int:
    return len((tmp_path / "calls").read_text().splitlines())


@pytest.mark.parametrize("resume", ["AUTO+ERRORED", "LOCAL+RESTART_ERRORED", "ERRORED_ONLY"])
def test_tune_run_resume_with_an_errored_suffix_retries_errored_trials(
    resume: str, tmp_path: Any
) -> None:
    first = _run_gated(tmp_path, resume="AUTO")  # nothing to resume yet: a new run
    assert [t.status for t in first.trials] == ["ERROR"] and _calls(tmp_path) == 1
    again = _run_gated(tmp_path, resume="AUTO")  # errored trials stay as they are
    assert [t.status for t in again.trials] == ["ERROR"] and _calls(tmp_path) == 1

    (tmp_path / "gate").touch()
    if resume == "ERRORED_ONLY":  # Ray's deprecated spelling of LOCAL+RESTART_ERRORED_ONLY
        with pytest.warns(DeprecationWarning, match="LOCAL\\+RESTART_ERRORED_ONLY"):
            retried = _run_gated(tmp_path, resume=resume)
    else:
        retried = _run_gated(tmp_path, resume=resume)
    assert [t.status for t in retried.trials] == ["TERMINATED"] and _calls(tmp_path) == 2
    assert retried.trials[0].last_result["score"] == 1


def test_tune_run_resume_values_are_ray_s() -> None:
    from fasttune.tune import resume_flags

    assert resume_flags(False) is None and resume_flags(None) is None
    assert resume_flags(True) == resume_flags("LOCAL") == resume_flags("AUTO") == {}
    assert resume_flags("AUTO+ERRORED_ONLY") == {
        "resume_unfinished": False,
        "resume_errored": True,
        "restart_errored": False,
    }
    for bad in ["auto", "AUTO+ERRORS", "SOMETIMES"]:
        with pytest.raises(ValueError, match="AUTO\\+ERRORED"):
            tune.run(_two_reports, name="x", resume=bad)


def _other_trainable(config: dict[str, Any]) -> None:
    tune.report({"score": 0})


def test_restore_with_another_trainable_or_other_param_keys_is_refused(tmp_path: Any) -> None:
    space = {"x": tune.grid_search([1, 2]), "opt": {"lr": 0.1}}
    Tuner(
        _two_reports,
        param_space=space,
        run_config=RunConfig(storage_path=str(tmp_path), name="same", verbose=0),
    ).fit()
    path = str(tmp_path / "same")
    other = Tuner.restore(path, trainable=_other_trainable)
    assert len(other.get_results()) == 2  # reading the results back needs no trainable
    with pytest.raises(ValueError, match="'_other_trainable', but the experiment ran '_two_"):
        other.fit()  # running them with another does
    with pytest.raises(ValueError, match=r"\(new: \['opt/momentum'\]\)"):
        Tuner.restore(path, _two_reports, param_space={**space, "opt": {"lr": 0.1, "momentum": 0}})
    with pytest.raises(ValueError, match=r"\(new: \[.opt/momentum.\]\) \(missing: \[.opt/lr.\]\)"):
        Tuner.restore(path, _two_reports, param_space={"x": 1, "opt": {"momentum": 0}})
    # The same trainable and keys (values refreshed) restore as before.
    results = Tuner.restore(path, _two_reports, param_space={**space, "opt": {"lr": 0.5}}).fit()
    assert not results.errors and sorted(r.metrics["score"] for r in results) == [2, 4]
