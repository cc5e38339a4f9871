"""The function API: report, returns, checkpoints, context, stopping, speed-path semantics."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import traceback
import warnings

import pytest

import fasttune as tune
from fasttune import result as R
from fasttune.trainable import wrap_function
from fasttune.trainable.trial_info import TRIAL_INFO, TrialInfo


def reporting(config):
    for i in range(config.get("n", 3)):
        tune.report({"i": i, "score": i * config.get("scale", 1)})


def test_each_report_is_one_iteration(make_trainable):
    t = make_trainable(wrap_function(reporting), {"n": 3, "scale": 2})
    results = [t.train() for _ in range(3)]
    assert [r["score"] for r in results] == [0, 2, 4]
    assert [r[R.TRAINING_ITERATION] for r in results] == [1, 2, 3]
    assert all(r[R.DONE] is False for r in results)
    final = t.train()
    assert final[R.DONE] is True and final[R.RESULT_DUPLICATE] is True
    assert final["score"] == 4 and t.iteration == 3
    assert t.train()[R.DONE] is True  # stays finished


def test_returned_dict_is_a_final_result(make_trainable):
    def fn(config):
        tune.report({"a": 1})
        return {"a": 2}

    t = make_trainable(wrap_function(fn))
    assert t.train()["a"] == 1
    second = t.train()
    assert second["a"] == 2 and second[R.TRAINING_ITERATION] == 2
    assert t.train()[R.DONE] is True


def test_returned_number_becomes_default_metric(make_trainable):
    t = make_trainable(wrap_function(lambda config: 0.5))
    assert t.train()[R.DEFAULT_METRIC] == 0.5


def test_bad_return_type_is_a_clear_error(make_trainable):
    def fn(config):
        return "nope"

    with pytest.raises(TypeError, match="returned str"):
        make_trainable(wrap_function(fn)).train()


def test_function_without_reports_finishes_done(make_trainable):
    t = make_trainable(wrap_function(lambda config: None))
    result = t.train()
    assert result[R.DONE] is True and t.iteration == 0


def test_exception_keeps_original_traceback(make_trainable):
    def failing(config):
        tune.report({"ok": 1})
        raise KeyError("missing-thing")

    t = make_trainable(wrap_function(failing))
    t.train()
    with pytest.raises(KeyError, match="missing-thing") as info:
        t.train()
    text = "".join(traceback.format_exception(info.value))
    assert "in failing" in text and 'raise KeyError("missing-thing")' in text


def test_report_outside_a_trial_warns_once_how_to_run_and_returns(monkeypatch):
    # As Ray Tune's: calling train_fn(config) directly, to debug it, runs through.
    from fasttune._support import log_once

    monkeypatch.setattr(log_once, "_seen", set())
    with pytest.warns(UserWarning, match=r"outside of a trial.*Tuner"):
        assert tune.report({"x": 1}) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tune.report({"x": 2}) is None  # once per process


def test_report_non_dict_names_the_parameter(make_trainable):
    def fn(config):
        tune.report(0.3)

    with pytest.raises(TypeError, match=r"report\(metrics=...\) expects a dict"):
        make_trainable(wrap_function(fn)).train()


def test_report_from_another_thread_is_a_clear_error(make_trainable):
    errors = []

    def fn(config):
        def worker():
            try:
                tune.report({"x": 1})
            except RuntimeError as e:
                errors.append(str(e))

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        tune.report({"x": 2})

    t = make_trainable(wrap_function(fn))
    assert t.train()["x"] == 2
    assert errors and "another thread" in errors[0]


def checkpointing(config):
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            start = int(open(os.path.join(d, "step.txt")).read()) + 1
    for step in range(start, config["n"]):
        tmp = tempfile.mkdtemp()
        with open(os.path.join(tmp, "step.txt"), "w") as f:
            f.write(str(step))
        tune.report({"step": step}, checkpoint=tune.Checkpoint.from_directory(tmp))
        shutil.rmtree(tmp)  # the user's temp dir is gone; fasttune must have copied it


def test_reported_checkpoints_are_persisted_and_resumable(make_trainable):
    cls = wrap_function(checkpointing)
    t = make_trainable(cls, {"n": 5})
    assert tune.get_checkpoint() is None
    r1 = t.train()
    r2 = t.train()
    assert r1[R.CHECKPOINT_DIR_NAME] == "checkpoint_000000"
    assert r2[R.CHECKPOINT_DIR_NAME] == "checkpoint_000001"
    saved = t.save()
    assert saved == os.path.join(t.logdir, "checkpoint_000001")
    assert open(os.path.join(saved, "step.txt")).read() == "1"

    t2 = make_trainable(cls, {"n": 5})
    t2.restore(saved)
    assert t2.iteration == 2
    resumed = t2.train()
    assert resumed["step"] == 2 and resumed[R.TRAINING_ITERATION] == 3
    assert resumed[R.CHECKPOINT_DIR_NAME] == "checkpoint_000002"


def test_save_before_any_checkpoint_restarts_fresh(make_trainable):
    cls = wrap_function(checkpointing)
    t = make_trainable(cls, {"n": 3})
    path = t.save()
    t2 = make_trainable(cls, {"n": 3})
    t2.restore(path)
    assert t2.train()["step"] == 0


def test_save_to_object_roundtrip(make_trainable):
    cls = wrap_function(checkpointing)
    t = make_trainable(cls, {"n": 4})
    t.train()
    t.train()
    data = t.save_to_object()
    t2 = make_trainable(cls, {"n": 4})
    t2.restore_from_object(data)
    result = t2.train()
    assert result["step"] == 2 and result[R.TRAINING_ITERATION] == 3


def test_restore_while_running_restarts_from_checkpoint(make_trainable):
    t = make_trainable(wrap_function(checkpointing), {"n": 6})
    t.train()
    path = t.save()
    t.train()
    t.train()
    t.restore(path)
    assert t.train()["step"] == 1


def test_context_inside_function(make_trainable):
    seen = {}

    def fn(config):
        ctx = tune.get_context()
        seen.update(
            trial_id=ctx.get_trial_id(), trial_name=ctx.get_trial_name(),
            trial_dir=ctx.get_trial_dir(), experiment=ctx.get_experiment_name(),
            resources=ctx.get_trial_resources(),
        )  # fmt: skip
        tune.report({"x": 1})

    info = TrialInfo(trial_id="t1", trial_name="fn_t1", experiment_name="exp", resources={"cpu": 2})
    t = make_trainable(wrap_function(fn), {TRIAL_INFO: info})
    t.train()
    assert seen == {
        "trial_id": "t1", "trial_name": "fn_t1", "trial_dir": t.logdir.rstrip(os.sep),
        "experiment": "exp", "resources": {"cpu": 2},
    }  # fmt: skip


def test_context_outside_a_trial_is_empty():
    ctx = tune.get_context()
    assert ctx.get_trial_id() is None and ctx.get_trial_dir() is None


def test_stop_mid_run_unwinds_the_function_without_threads(make_trainable):
    events = []

    def fn(config):
        try:
            for i in range(1000):
                tune.report({"i": i})
        finally:
            events.append("finally ran")

    threads_before = threading.active_count()
    t = make_trainable(wrap_function(fn))
    t.train()
    t.train()
    assert threading.active_count() == threads_before
    t.stop()
    assert events == ["finally ran"]
    assert threading.active_count() == threads_before


def test_function_catching_base_exception_is_abandoned(make_trainable):
    def stubborn(config):
        while True:
            try:
                tune.report({"x": 1})
            except BaseException:
                pass

    t = make_trainable(wrap_function(stubborn))
    t.train()
    t.stop()  # must return, not hang


def test_reset_config_restarts_with_new_config(make_trainable):
    t = make_trainable(wrap_function(reporting), {"n": 5, "scale": 1})
    t.train()
    t.train()
    assert t.reset({"n": 5, "scale": 10}) is True
    result = t.train()
    assert result["score"] == 0 and result[R.TRAINING_ITERATION] == 1
    assert t.train()["score"] == 10


def test_wrap_function_names_and_validation():
    cls = wrap_function(reporting)
    assert cls.__name__ == "reporting" and issubclass(cls, tune.Trainable)
    assert wrap_function(reporting, name="custom").__name__ == "custom"
    assert wrap_function(cls) is cls
    with pytest.raises(TypeError, match="expects a callable"):
        wrap_function(42)


def test_function_api_examples_from_the_docs(make_trainable):
    """The 'Training in Tune' function-API examples, with only the import swapped."""

    def objective(x, a, b):
        return a * (x**0.5) + b

    def trainable(config):  # report intermediate metrics
        for x in range(20):
            score = objective(x, config["a"], config["b"])
            tune.report({"score": score})

    def trainable_final(config):  # report once at the end
        final_score = 0
        for x in range(20):
            final_score = objective(x, config["a"], config["b"])
        tune.report({"score": final_score})

    def trainable_return(config):  # return the final metrics
        final_score = 0
        for x in range(20):
            final_score = objective(x, config["a"], config["b"])
        return {"score": final_score}

    config = {"a": 2, "b": 4}
    t = make_trainable(wrap_function(trainable), config)
    scores = [t.train()["score"] for _ in range(20)]
    assert scores[-1] == pytest.approx(objective(19, 2, 4))
    assert t.train()[R.DONE]
    for fn in (trainable_final, trainable_return):
        t = make_trainable(wrap_function(fn), config)
        assert t.train()["score"] == pytest.approx(objective(19, 2, 4))
        assert t.train()[R.DONE]
