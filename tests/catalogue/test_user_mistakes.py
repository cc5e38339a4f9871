"""A catalogue of user mistakes: each gives an error that names the parameter (or the
value) and says what to do, and loses no data.

Each row: a description, a call that makes the mistake, the exception type, and a
regular expression the message must match (the parameter's name and a hint). After
each one, every experiment folder it left is checked: one holding ``tuner.pkl`` is
intact (its trials all readable, each result file made of whole lines) and
restorable; any other is cleanly absent (no state file, no trial folder), so a
mistake made before anything was written leaves nothing a restore could take for a run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

import fasttune as tune
from fasttune import schedulers, search, stopper


def fine(config):
    tune.report({"score": 1})


class _Searcher(search.Searcher):
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        return {}


def _tuner(tmp: str, **kw: Any) -> Callable[[], Any]:
    """A fit() of `fine` with the given Tuner arguments, writing under ``tmp``."""
    run_config = kw.pop("run_config", {})
    tune_config = kw.pop("tune_config", {})
    trainable = kw.pop("trainable", fine)

    def call() -> Any:
        return tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(**tune_config),
            run_config=tune.RunConfig(storage_path=tmp, name="m", verbose=0, **run_config),
            **kw,
        ).fit()

    return call


CASES: list[tuple[str, Callable[[str], Callable[[], Any]], type[BaseException], str]] = [
    # ---- TuneConfig
    (
        "mode not min/max",
        lambda t: lambda: tune.TuneConfig(mode="maximum"),
        ValueError,
        r"mode.*'min' or 'max'",
    ),
    ("metric not a str", lambda t: lambda: tune.TuneConfig(metric=3), TypeError, r"metric"),
    (
        "max_concurrent_trials bool",
        lambda t: lambda: tune.TuneConfig(max_concurrent_trials=True),
        ValueError,
        r"max_concurrent_trials.*int >= 1",
    ),
    (
        "num_samples negative",
        lambda t: lambda: tune.TuneConfig(num_samples=-5),
        ValueError,
        r"num_samples.*-1",
    ),
    (
        "num_samples float",
        lambda t: lambda: tune.TuneConfig(num_samples=2.5),
        ValueError,
        r"num_samples",
    ),
    (
        "num_samples bool",
        lambda t: lambda: tune.TuneConfig(num_samples=True),
        ValueError,
        r"num_samples",
    ),
    (
        "max_concurrent_trials negative",
        lambda t: lambda: tune.TuneConfig(max_concurrent_trials=-1),
        ValueError,
        r"max_concurrent_trials",
    ),
    (
        "max_concurrent_trials str",
        lambda t: lambda: tune.TuneConfig(max_concurrent_trials="2"),
        (ValueError, TypeError),
        r"max_concurrent_trials",
    ),
    (
        "time_budget_s negative",
        lambda t: lambda: tune.TuneConfig(time_budget_s=-1),
        ValueError,
        r"time_budget_s",
    ),
    (
        "scheduler class",
        lambda t: _tuner(t, tune_config={"scheduler": schedulers.ASHAScheduler}),
        TypeError,
        r"scheduler=.*is a class.*instance",
    ),
    (
        "search_alg class",
        lambda t: _tuner(t, tune_config={"search_alg": search.BasicVariantGenerator}),
        TypeError,
        r"search_alg=.*is a class",
    ),
    (
        "scheduler unknown name",
        lambda t: _tuner(t, tune_config={"scheduler": "asha"}),
        ValueError,
        r"unknown scheduler 'asha'.*async_hyperband",
    ),
    (
        "search_alg unknown name",
        lambda t: _tuner(t, tune_config={"search_alg": "grid"}),
        ValueError,
        r"unknown search algorithm 'grid'",
    ),
    (
        "search_alg wrong type",
        lambda t: _tuner(t, tune_config={"search_alg": 3}),
        TypeError,
        r"search_alg.*Searcher",
    ),
    (
        "metric conflicts with scheduler",
        lambda t: _tuner(
            t,
            tune_config={
                "metric": "a",
                "mode": "max",
                "scheduler": schedulers.ASHAScheduler(metric="b", mode="max"),
            },
        ),
        ValueError,
        r"metric='a'.*conflicts.*metric='b'",
    ),
    (
        "mode conflicts with searcher",
        lambda t: _tuner(
            t,
            tune_config={
                "metric": "a",
                "mode": "max",
                "scheduler": schedulers.ASHAScheduler(metric="a", mode="min"),
            },
        ),
        ValueError,
        r"mode='max'.*conflicts",
    ),
    # ---- RunConfig and friends
    (
        "stop threshold a str",
        lambda t: _tuner(t, run_config={"stop": {"training_iteration": "2"}}),
        TypeError,
        r"threshold for 'training_iteration' must be a number",
    ),
    (
        "stop key not a str",
        lambda t: _tuner(t, run_config={"stop": {1: 2}}),
        TypeError,
        r"stop.*keys",
    ),
    (
        "stop of wrong type",
        lambda t: _tuner(t, run_config={"stop": 5}),
        TypeError,
        r"RunConfig.stop.*dict.*Stopper.*function",
    ),
    (
        "stop a Stopper class",
        lambda t: _tuner(t, run_config={"stop": stopper.MaximumIterationStopper}),
        TypeError,
        r"stop=MaximumIterationStopper\) is a class",
    ),
    (
        "callbacks a class",
        lambda t: _tuner(t, run_config={"callbacks": [tune.Callback]}),
        TypeError,
        r"callbacks must be Callback instances.*a class.*MyCallback\(\)",
    ),
    (
        "callbacks not Callback",
        lambda t: _tuner(t, run_config={"callbacks": [object()]}),
        TypeError,
        r"callbacks must be Callback instances",
    ),
    (
        "storage_path unwritable",
        lambda t: _tuner("/proc/fasttune_cannot_write"),
        (ValueError, OSError),
        r"storage_path|not writable",
    ),
    (
        "storage_path unknown scheme",
        lambda t: (
            lambda: tune.Tuner(
                fine, run_config=tune.RunConfig(storage_path="nosuchscheme://b/p")
            ).fit()
        ),
        (ValueError, ImportError),
        r"storage_path|nosuchscheme",
    ),
    (
        "checkpoint num_to_keep 0",
        lambda t: lambda: tune.CheckpointConfig(num_to_keep=0),
        ValueError,
        r"num_to_keep",
    ),
    (
        "checkpoint order",
        lambda t: lambda: tune.CheckpointConfig(checkpoint_score_order="up"),
        ValueError,
        r"checkpoint_score_order='up' is invalid.*'max' or 'min'",
    ),
    (
        "checkpoint_frequency negative",
        lambda t: lambda: tune.CheckpointConfig(checkpoint_frequency=-1),
        ValueError,
        r"checkpoint_frequency",
    ),
    (
        "max_failures below -1",
        lambda t: lambda: tune.FailureConfig(max_failures=-2),
        ValueError,
        r"max_failures",
    ),
    (
        "fail_fast unknown",
        lambda t: lambda: tune.FailureConfig(fail_fast="sometimes"),
        ValueError,
        r"fail_fast",
    ),
    ("verbose out of range", lambda t: lambda: tune.RunConfig(verbose=7), ValueError, r"verbose"),
    # ---- trainables
    (
        "trainable an int",
        lambda t: lambda: tune.Tuner(42),
        TypeError,
        r"Unknown trainable type int",
    ),
    (
        "trainable unknown name",
        lambda t: lambda: tune.Tuner("nope"),
        ValueError,
        r"Unknown trainable 'nope'.*register_trainable",
    ),
    (
        "trainable a plain class",
        lambda t: lambda: tune.Tuner(dict),
        TypeError,
        r"not a fasttune.Trainable subclass",
    ),
    (
        "function without config",
        lambda t: lambda: tune.Tuner(lambda: None),
        TypeError,
        r"must take the trial's config",
    ),
    (
        "function with two required args",
        lambda t: lambda: tune.Tuner(lambda config, data: None),
        TypeError,
        r"must take the trial's config.*with_parameters",
    ),
    (
        "param_space a str",
        lambda t: lambda: tune.Tuner(fine, param_space="x"),
        (TypeError, ValueError),
        r"param_space.*dict",
    ),
    (
        "param_space a list",
        lambda t: lambda: tune.Tuner(fine, param_space=[1]),
        (TypeError, ValueError),
        r"param_space.*dict",
    ),
    (
        "tune_config of wrong type",
        lambda t: lambda: tune.Tuner(fine, tune_config={"num_samples": 2}),
        TypeError,
        r"tune_config.*TuneConfig",
    ),
    (
        "run_config of wrong type",
        lambda t: lambda: tune.Tuner(fine, run_config={"name": "x"}),
        TypeError,
        r"run_config.*RunConfig",
    ),
    (
        "with_resources misspelt key",
        lambda t: _tuner(t, trainable=tune.with_resources(fine, {"cpus": 1})),
        ValueError,
        r"custom resource 'cpus'.*never start.*Remove 'cpus'",
    ),
    (
        "with_resources negative",
        lambda t: lambda: tune.with_resources(fine, {"cpu": -1}),
        ValueError,
        r"cpu",
    ),
    (
        "resources never fit",
        lambda t: _tuner(t, trainable=tune.with_resources(fine, {"cpu": 10_000})),
        Exception,
        r"(?i)cpu.*10000|never|fit",
    ),
    # ---- search spaces
    ("uniform lower > upper", lambda t: lambda: tune.uniform(2, 1), ValueError, r"lower|upper"),
    (
        "loguniform lower <= 0",
        lambda t: lambda: tune.loguniform(0, 1),
        ValueError,
        r"(?i)lower.*0|positive",
    ),
    ("randint lower >= upper", lambda t: lambda: tune.randint(5, 5), ValueError, r"lower|upper"),
    ("choice empty", lambda t: lambda: tune.choice([]), ValueError, r"(?i)categories|empty|choice"),
    ("choice not a list", lambda t: lambda: tune.choice(3), TypeError, r"(?i)categories|choice"),
    ("quniform q <= 0", lambda t: lambda: tune.quniform(0, 1, 0), ValueError, r"\bq\b"),
    ("qrandint q <= 0", lambda t: lambda: tune.qrandint(0, 10, 0), ValueError, r"\bq\b"),
    ("randn sd <= 0", lambda t: lambda: tune.randn(0, 0), ValueError, r"sd"),
    (
        "grid_search not a list",
        lambda t: lambda: tune.grid_search(3),
        TypeError,
        r"(?i)grid_search|values",
    ),
    (
        "sample_from not callable",
        lambda t: lambda: tune.sample_from(3),
        TypeError,
        r"(?i)sample_from|callable",
    ),
    ("lograndint base <= 1", lambda t: lambda: tune.lograndint(1, 10, base=1), ValueError, r"base"),
    ("sample size 0", lambda t: lambda: tune.uniform(0, 1).sample(size=0), ValueError, r"size"),
    # ---- schedulers
    (
        "ASHA reduction_factor <= 1",
        lambda t: lambda: schedulers.ASHAScheduler(reduction_factor=1),
        ValueError,
        r"reduction_factor",
    ),
    (
        "ASHA grace_period 0",
        lambda t: lambda: schedulers.ASHAScheduler(grace_period=0),
        ValueError,
        r"grace_period",
    ),
    (
        "ASHA max_t < grace",
        lambda t: lambda: schedulers.ASHAScheduler(max_t=1, grace_period=5),
        ValueError,
        r"max_t|grace_period",
    ),
    ("ASHA mode bad", lambda t: lambda: schedulers.ASHAScheduler(mode="best"), ValueError, r"mode"),
    (
        "HyperBand max_t 0",
        lambda t: lambda: schedulers.HyperBandScheduler(max_t=0),
        ValueError,
        r"max_t",
    ),
    (
        "PBT no mutations",
        lambda t: lambda: schedulers.PopulationBasedTraining(),
        tune.TuneError,
        r"hyperparam_mutations.*custom_explore_fn",
    ),
    (
        "PBT quantile",
        lambda t: (
            lambda: schedulers.PopulationBasedTraining(
                quantile_fraction=0.9, hyperparam_mutations={"a": [1, 2]}
            )
        ),
        ValueError,
        r"quantile_fraction",
    ),
    (
        "PBT interval 0",
        lambda t: (
            lambda: schedulers.PopulationBasedTraining(
                perturbation_interval=0, hyperparam_mutations={"a": [1]}
            )
        ),
        ValueError,
        r"perturbation_interval",
    ),
    (
        "MedianStopping grace negative",
        lambda t: lambda: schedulers.MedianStoppingRule(grace_period=-1),
        ValueError,
        r"grace_period",
    ),
    (
        "PBT needs a metric",
        lambda t: _tuner(
            t,
            tune_config={
                "scheduler": schedulers.PopulationBasedTraining(hyperparam_mutations={"a": [1, 2]})
            },
        ),
        ValueError,
        r"metric",
    ),
    (
        "ASHA needs a metric",
        lambda t: _tuner(t, tune_config={"scheduler": schedulers.ASHAScheduler()}),
        ValueError,
        r"metric",
    ),
    # ---- searchers and wrappers
    (
        "ConcurrencyLimiter max 0",
        lambda t: (
            lambda: search.ConcurrencyLimiter(search.BasicVariantGenerator(), max_concurrent=0)
        ),
        (ValueError, TypeError),
        r"max_concurrent",
    ),
    (
        "Repeater repeat 0",
        lambda t: lambda: search.Repeater(_Searcher(), repeat=0),
        (ValueError, TypeError),
        r"repeat",
    ),
    (
        "Repeater of a non-Searcher",
        lambda t: lambda: search.Repeater(search.BasicVariantGenerator()),
        TypeError,
        r"searcher. must be a Searcher",
    ),
    (
        "BasicVariantGenerator bad random_state",
        lambda t: lambda: search.BasicVariantGenerator(random_state="seed"),
        TypeError,
        r"random_state",
    ),
    (
        "create_searcher not a str",
        lambda t: lambda: search.create_searcher(3),
        TypeError,
        r"search_alg|str",
    ),
    (
        "create_scheduler unknown",
        lambda t: lambda: schedulers.create_scheduler("best"),
        ValueError,
        r"unknown scheduler 'best'",
    ),
    # ---- stoppers
    (
        "MaximumIterationStopper negative",
        lambda t: lambda: stopper.MaximumIterationStopper(-1),
        ValueError,
        r"max_iter",
    ),
    (
        "TimeoutStopper negative",
        lambda t: lambda: stopper.TimeoutStopper(-5),
        ValueError,
        r"timeout",
    ),
    (
        "TrialPlateauStopper std negative",
        lambda t: lambda: stopper.TrialPlateauStopper("m", std=-1),
        ValueError,
        r"std",
    ),
    (
        "TrialPlateauStopper mode bad",
        lambda t: lambda: stopper.TrialPlateauStopper("m", mode="up"),
        ValueError,
        r"mode",
    ),
    (
        "ExperimentPlateauStopper patience negative",
        lambda t: lambda: stopper.ExperimentPlateauStopper("m", patience=-1),
        ValueError,
        r"patience",
    ),
    (
        "CombinedStopper not stoppers",
        lambda t: lambda: stopper.CombinedStopper(3),
        (TypeError, ValueError),
        r"(?i)stopper",
    ),
    # ---- reporting and results
    ("report a non-dict", lambda t: _reported(t, lambda: tune.report(3.0)), Exception, r"(?i)dict"),
    (
        "checkpoint not a Checkpoint",
        lambda t: _reported(t, lambda: tune.report({"a": 1}, checkpoint="/tmp")),
        Exception,
        r"Checkpoint",
    ),
    (
        "metric never reported",
        lambda t: _tuner(t, tune_config={"metric": "acc", "mode": "max"}),
        Exception,
        r"acc",
    ),
    (
        "get_best_result unknown mode",
        lambda t: _best(t, metric="score", mode="up"),
        ValueError,
        r"mode",
    ),
    (
        "get_best_result unknown scope",
        lambda t: _best(t, metric="score", mode="max", scope="first"),
        ValueError,
        r"scope",
    ),
    (
        "get_best_result metric never reported",
        lambda t: _best(t, metric="nope", mode="max"),
        RuntimeError,
        r"'nope'.*Reported metrics",
    ),
    (
        "restore a non-experiment",
        lambda t: lambda: tune.Tuner.restore(t, trainable=fine),
        ValueError,
        r"no fasttune experiment there",
    ),
    (
        "Checkpoint of a missing dir",
        lambda t: (
            lambda: tune.Checkpoint.from_directory(os.path.join(t, "nope")).to_directory(
                os.path.join(t, "x")
            )
        ),
        Exception,
        r"nope",
    ),
]


def _reported(tmp: str, action: Callable[[], Any]) -> Callable[[], Any]:
    def trainable(config):
        action()

    def call() -> Any:
        grid = tune.Tuner(
            trainable, run_config=tune.RunConfig(storage_path=tmp, name="r", verbose=0)
        ).fit()
        if grid.errors:
            raise grid.errors[0]
        return grid

    return call


def _best(tmp: str, **kwargs: Any) -> Callable[[], Any]:
    def call() -> Any:
        grid = tune.Tuner(
            fine,
            tune_config=tune.TuneConfig(num_samples=2),
            run_config=tune.RunConfig(storage_path=tmp, name="b", verbose=0),
        ).fit()
        return grid.get_best_result(**kwargs)

    return call


@pytest.mark.parametrize(
    ("what", "make", "kind", "pattern"), CASES, ids=[case[0] for case in CASES]
)
def test_a_user_mistake_gets_a_clear_error(tmp_path, what, make, kind, pattern):
    tune.init(num_cpus=2)
    try:
        with pytest.raises(kind) as info:
            make(str(tmp_path))()
    finally:
        tune.shutdown()
    import re

    assert re.search(pattern, str(info.value), re.S), f"{what}: {info.value}"
    _assert_no_data_lost(str(tmp_path), what)


def _assert_no_data_lost(tmp: str, what: str) -> None:
    """Every experiment folder under ``tmp`` is intact and restorable, or cleanly absent."""
    from fasttune._internal.state_layout import STATE_FILES, TUNER_FILE
    from fasttune._internal.state_recovery import has_trial_folder

    for root, dirs, names in os.walk(tmp):
        dirs[:] = [d for d in dirs if not d.startswith(("checkpoint_", "."))]
        if TUNER_FILE not in names:
            assert not set(names) & set(STATE_FILES), f"{what}: state without tuner.pkl in {root}"
            if any(n in names for n in ("result.json", "params.json")):
                continue  # a trial folder, checked with its experiment
            assert not has_trial_folder(root), f"{what}: trial folders without tuner.pkl"
            continue
        assert tune.Tuner.can_restore(root), f"{what}: {root} cannot be restored"
        folders = [
            d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "params.json"))
        ]
        analysis = tune.ExperimentAnalysis(root)
        assert len(analysis.trials) >= len(folders), f"{what}: trials lost in {root}"
        for folder in folders:
            path = os.path.join(root, folder, "result.json")
            if os.path.exists(path):
                data = open(path, "rb").read()
                assert not data or data.endswith(b"\n"), f"{what}: torn {path}"
        tune.Tuner.restore(root, trainable=fine)  # rebuilds the run (not run again)


def test_the_catalogue_has_at_least_80_mistakes():
    assert len(CASES) >= 80
