"""Bad input gives a clear error that names the cause, before or during fit()."""

from __future__ import annotations

import os
import threading

import pytest

import fasttune as tune


def fine(config):
    tune.report({"score": 1})


def test_unknown_trainable_type(run_config):
    with pytest.raises(TypeError, match="Unknown trainable type int"):
        tune.Tuner(42, run_config=run_config())
    with pytest.raises(ValueError, match="Unknown trainable 'nope'.*register_trainable"):
        tune.Tuner("nope", run_config=run_config())

    class NotATrainable:
        pass

    with pytest.raises(TypeError, match="not a fasttune.Trainable subclass"):
        tune.Tuner(NotATrainable)


def test_non_dict_result_fails_the_trial_with_a_clear_message(run_config):
    class Bad(tune.Trainable):
        def step(self):
            return [1, 2]

    grid = tune.Tuner(Bad, run_config=run_config()).fit()
    assert grid.num_errors == 1
    assert "step() must return a dict" in str(grid.errors[0])

    def bad_fn(config):
        tune.report(3.0)

    grid = tune.Tuner(bad_fn, run_config=run_config(name="exp2")).fit()
    assert "report(metrics=...) expects a dict" in str(grid.errors[0])


def test_metric_never_reported(run_config):
    with pytest.raises(ValueError, match="without the metric 'accuracy'.*Reported keys.*score"):
        tune.Tuner(
            fine,
            tune_config=tune.TuneConfig(metric="accuracy", mode="max"),
            run_config=run_config(),
        ).fit()


def test_TUNE_DISABLE_STRICT_METRIC_CHECKING_lets_results_lack_the_metric(run_config, monkeypatch):
    """Ray Tune's switch, which its error message names: TuneConfig's metric, a
    scheduler that skips results without it (ASHA) and a searcher's metric."""
    from fasttune.schedulers import ASHAScheduler

    monkeypatch.setenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    for name, extra in (("plain", {}), ("asha", {"scheduler": ASHAScheduler()})):
        grid = tune.Tuner(
            fine,
            tune_config=tune.TuneConfig(metric="accuracy", mode="max", num_samples=2, **extra),
            run_config=run_config(name=name),
        ).fit()
        assert grid.num_errors == 0 and len(grid) == 2
        assert [r.metrics["score"] for r in grid] == [1, 1]


class _TwoObjectives(tune.search.Searcher):
    """A multi-objective searcher (as OptunaSearch(metric=[...]) is)."""

    def __init__(self):
        super().__init__(metric=["score", "score2"], mode=["max", "min"])

    def suggest(self, trial_id):
        return {"x": 1}

    def on_trial_complete(self, trial_id, result=None, error=False):
        pass


def test_every_objective_of_a_multi_objective_searcher_must_be_reported(run_config):
    """As on Ray Tune: a searcher left without one of its objectives learns nothing
    (Optuna marked every such trial pruned), so the run stops with the reason."""
    with pytest.raises(ValueError, match="without the metric 'score2'.*Reported keys.*score"):
        tune.Tuner(
            fine,
            tune_config=tune.TuneConfig(search_alg=_TwoObjectives(), num_samples=2),
            run_config=run_config(),
        ).fit()


def test_metric_and_mode_conflicts():
    from fasttune.schedulers import FIFOScheduler
    from fasttune.search import BasicVariantGenerator

    class Picky(FIFOScheduler):
        def __init__(self):
            super().__init__()
            self._metric, self._mode = "loss", "min"

    with pytest.raises(ValueError, match="conflicts with the scheduler's own metric='loss'"):
        tune.Tuner(
            fine, tune_config=tune.TuneConfig(metric="score", mode="min", scheduler=Picky())
        ).fit()
    with pytest.raises(ValueError, match="mode"):
        tune.TuneConfig(metric="score", mode="maximum")
    assert BasicVariantGenerator  # imported for the namespace check


def test_unwritable_storage_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ValueError, match="storage_path=.*is not writable"):
        tune.Tuner(
            fine, run_config=tune.RunConfig(storage_path=str(blocker), name="x", verbose=0)
        ).fit()
    if os.geteuid() != 0:  # root can write anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="is not writable"):
            tune.Tuner(fine, run_config=tune.RunConfig(storage_path=str(ro), verbose=0)).fit()


def test_unpicklable_trainable_names_the_culprit(run_config):
    lock = threading.Lock()

    def uses_lock(config):
        with lock:
            tune.report({"x": 1})

    with pytest.raises(TypeError, match="cannot be serialised.*lock"):
        tune.Tuner(uses_lock, run_config=run_config()).fit()


def test_bad_config_values():
    with pytest.raises(ValueError, match="num_samples"):
        tune.TuneConfig(num_samples=-2)
    with pytest.raises(ValueError, match="max_failures"):
        tune.FailureConfig(max_failures=-2)
    with pytest.raises(ValueError, match="num_to_keep"):
        tune.CheckpointConfig(num_to_keep=0)
    with pytest.raises(ValueError, match="verbose"):
        tune.RunConfig(verbose=7)
    with pytest.raises(ValueError, match="param_space"):
        tune.Tuner(fine, param_space=[1, 2])
    with pytest.raises(TypeError, match="RunConfig.stop"):
        tune.Tuner(fine, run_config=tune.RunConfig(stop=5, verbose=0)).fit()


def test_request_that_can_never_fit(run_config):
    with pytest.raises(ValueError, match="CPU"):
        tune.Tuner(tune.with_resources(fine, {"cpu": 64}), run_config=run_config()).fit()


def test_function_trainable_with_checkpoint_frequency(run_config):
    with pytest.raises(ValueError, match="only apply to class trainables"):
        tune.Tuner(
            fine,
            run_config=run_config(checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2)),
        ).fit()


# ---------------------------------------------------------------- issue 12's mistakes
def test_a_plugin_class_instead_of_an_instance_is_refused_by_name(run_config):
    from fasttune.schedulers import ASHAScheduler
    from fasttune.search import BasicVariantGenerator

    for parameter, cls in (("scheduler", ASHAScheduler), ("search_alg", BasicVariantGenerator)):
        tuner = tune.Tuner(
            fine, tune_config=tune.TuneConfig(**{parameter: cls}), run_config=run_config()
        )
        with pytest.raises(TypeError, match=rf"TuneConfig\({parameter}=\w+\) is a class"):
            tuner.fit()
    with pytest.raises(TypeError, match=r"RunConfig\(stop=MaximumIterationStopper\) is a class"):
        tune.Tuner(fine, run_config=run_config(stop=tune.stopper.MaximumIterationStopper)).fit()


def test_plugins_by_name_as_ray_accepts_them(run_config):
    grid = tune.Tuner(
        fine,
        param_space={"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(search_alg="random", scheduler="fifo", num_samples=3),
        run_config=run_config(),
    ).fit()
    assert len(grid) == 3 and grid.num_errors == 0
    with pytest.raises(ValueError, match="unknown scheduler 'asha'.*async_hyperband"):
        tune.Tuner(
            fine, tune_config=tune.TuneConfig(scheduler="asha"), run_config=run_config()
        ).fit()


def test_a_stop_threshold_that_is_not_a_number(run_config):
    with pytest.raises(TypeError, match=r"threshold for 'training_iteration' must be a number"):
        tune.Tuner(fine, run_config=run_config(stop={"training_iteration": "2"})).fit()


def test_a_function_without_a_config_parameter_is_refused_before_any_trial():
    def no_config():
        tune.report({"score": 1})

    with pytest.raises(TypeError, match=r"must take the trial's config.*def no_config\(config\)"):
        tune.Tuner(no_config)


def test_a_mode_without_a_metric_names_what_to_set_not_an_internal_key(run_config):
    grid = tune.Tuner(
        fine, tune_config=tune.TuneConfig(mode="min", num_samples=2), run_config=run_config()
    ).fit()
    with pytest.raises(RuntimeError, match=r"without TuneConfig\(metric=\.\.\.\)") as info:
        grid.get_best_result()
    assert "_metric" not in str(info.value) and "__duplicate__" not in str(info.value)


def test_a_metric_with_text_values_says_so(run_config):
    def labelled(config):
        tune.report({"label": "cat"})

    grid = tune.Tuner(
        labelled, tune_config=tune.TuneConfig(num_samples=2), run_config=run_config()
    ).fit()
    with pytest.raises(RuntimeError, match=r"'label': its values are not numbers \(str\)"):
        grid.get_best_result(metric="label", mode="max")


def test_internal_keys_never_reach_result_metrics(run_config):
    [result] = tune.Tuner(fine, run_config=run_config()).fit()
    assert "__duplicate__" not in result.metrics and result.metrics["done"] is True


def test_a_large_array_in_param_space_suggests_with_parameters(run_config, caplog):
    import numpy as np

    from fasttune._internal.spec_builder import LARGE_VALUE_BYTES

    big = np.zeros(LARGE_VALUE_BYTES // 8 + 1)
    tune.Tuner(fine, param_space={"data": big}, run_config=run_config()).fit()
    assert "param_space['data'] holds" in caplog.text and "with_parameters" in caplog.text


def test_an_unreported_checkpoint_score_attribute_is_named(run_config, caplog, tmp_path):
    def checkpointing(config):
        for i in range(3):
            d = tmp_path / f"ck{i}"
            d.mkdir(exist_ok=True)
            tune.report({"score": i}, checkpoint=tune.Checkpoint.from_directory(str(d)))

    checkpoint_config = tune.CheckpointConfig(
        num_to_keep=1, checkpoint_score_attribute="acc_never_reported"
    )
    tune.Tuner(checkpointing, run_config=run_config(checkpoint_config=checkpoint_config)).fit()
    assert (
        "checkpoint_score_attribute='acc_never_reported') is not among the metrics" in caplog.text
    )
