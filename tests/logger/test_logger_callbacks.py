"""Tests for the driver-side logger callbacks: real trials, real hook sequences, real files."""

from __future__ import annotations

import csv
import json
import os
import pickle
import sys
from collections.abc import Callable
from typing import Any

import pytest

from fasttune._support.imports import MissingDependencyError
from fasttune.callback import Callback, CallbackList
from fasttune.experiment.trial import Trial
from fasttune.logger import (
    DEFAULT_CALLBACK_CLASSES,
    CSVLoggerCallback,
    JsonLoggerCallback,
    LoggerCallback,
    TBXLoggerCallback,
    default_logger_callbacks,
    needs_default_loggers,
)

MakeTrial = Callable[..., Trial]


@pytest.fixture
def make_trial(tmp_path) -> MakeTrial:
    """Build a trial in ``tmp_path`` with its directory chosen (not created)."""

    def make(index: int = 0, **kwargs: Any) -> Trial:
        kwargs.setdefault("config", {"lr": 0.1, "opt": {"momentum": 0.9}})
        kwargs.setdefault("evaluated_params", {"lr": 0.1})
        trial = Trial(
            "train", trial_id=f"abcde_{index:05d}", experiment_path=str(tmp_path), **kwargs
        )
        trial.init_local_path()
        return trial

    return make


def _run(cbs: CallbackList, trial: Trial, results: list[dict[str, Any]], start: int = 0) -> None:
    for i, result in enumerate(results):
        trial.update_last_result(result)
        cbs.on_trial_result(iteration=start + i, trials=[trial], trial=trial, result=result)


def _start(cbs: CallbackList, trial: Trial) -> None:
    trial.set_status(Trial.RUNNING)
    cbs.on_trial_start(iteration=0, trials=[trial], trial=trial)


def _lines(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def _rows(path: str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------- LoggerCallback wiring
class Recorder(LoggerCallback):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def log_trial_start(self, trial):
        self.calls.append(("start", trial.trial_id))

    def log_trial_restore(self, trial):
        self.calls.append(("restore", trial.trial_id))

    def log_trial_save(self, trial):
        self.calls.append(("save", trial.trial_id))

    def log_trial_result(self, iteration, trial, result):
        self.calls.append(("result", iteration, result["x"]))

    def log_trial_end(self, trial, failed=False):
        self.calls.append(("end", trial.trial_id, failed))


def test_logger_callback_hooks_call_log_methods(make_trial: MakeTrial) -> None:
    a, b = make_trial(0), make_trial(1)
    rec = Recorder()
    cbs = CallbackList([rec])
    kw = {"iteration": 4, "trials": [a, b]}
    cbs.on_trial_start(trial=a, **kw)
    cbs.on_trial_result(trial=a, result={"x": 1}, **kw)
    cbs.on_trial_save(trial=a, **kw)
    cbs.on_trial_complete(trial=a, **kw)
    cbs.on_trial_restore(trial=b, **kw)
    cbs.on_trial_error(trial=b, **kw)
    assert rec.calls == [
        ("start", a.trial_id),
        ("result", 4, 1),
        ("save", a.trial_id),
        ("end", a.trial_id, False),
        ("restore", b.trial_id),
        ("end", b.trial_id, True),
    ]


# ---------------------------------------------------------------------- JSON
def test_json_callback_writes_params_and_results(make_trial: MakeTrial, make_result) -> None:
    trial = make_trial()
    cb = JsonLoggerCallback()
    cbs = CallbackList([cb])
    _start(cbs, trial)
    params = os.path.join(trial.local_path, "params.json")
    assert json.load(open(params)) == {"lr": 0.1, "opt": {"momentum": 0.9}}
    with open(os.path.join(trial.local_path, "params.pkl"), "rb") as f:
        assert pickle.load(f) == trial.config
    _run(cbs, trial, [make_result(i) for i in (1, 2, 3)])
    cbs.on_trial_save(iteration=3, trials=[trial], trial=trial)
    trial.set_status(Trial.TERMINATED)
    cbs.on_trial_complete(iteration=4, trials=[trial], trial=trial)

    lines = _lines(os.path.join(trial.local_path, "result.json"))
    assert [r["training_iteration"] for r in lines] == [1, 2, 3]
    assert lines[0]["config"] == {"lr": 0.01} and lines[2]["loss"] == pytest.approx(1 / 3)
    assert cb.open_trials == []


def test_json_callback_opens_lazily_on_first_result(make_trial: MakeTrial, make_result) -> None:
    trial = make_trial()
    cb = JsonLoggerCallback()
    cb.on_trial_result(iteration=1, trials=[trial], trial=trial, result=make_result(1))
    assert cb.open_trials == [trial.trial_id]
    assert os.path.exists(os.path.join(trial.local_path, "params.json"))
    assert len(_lines(os.path.join(trial.local_path, "result.json"))) == 1


def test_json_update_config_rewrites_params(make_trial: MakeTrial) -> None:
    trial = make_trial()
    cb = JsonLoggerCallback()
    cb.log_trial_start(trial)
    cb.update_config(trial, {"lr": 0.5})
    assert json.load(open(os.path.join(trial.local_path, "params.json"))) == {"lr": 0.5}


def test_trial_without_directory_is_a_clear_error() -> None:
    trial = Trial("train", trial_id="abcde_00000")
    with pytest.raises(ValueError, match="no directory"):
        JsonLoggerCallback().log_trial_start(trial)


# ---------------------------------------------------------------------- CSV
def test_csv_callback_rows_flatten_and_skip_config(make_trial: MakeTrial, make_result) -> None:
    trial = make_trial()
    cbs = CallbackList([CSVLoggerCallback()])
    _start(cbs, trial)
    _run(cbs, trial, [make_result(i, info={"lr": 0.1 * i}) for i in (1, 2)])
    cbs.on_trial_complete(iteration=3, trials=[trial], trial=trial)
    rows = _rows(os.path.join(trial.local_path, "progress.csv"))
    assert [r["training_iteration"] for r in rows] == ["1", "2"]
    assert rows[1]["info/lr"] == "0.2"
    assert "config" not in rows[0] and "config/lr" not in rows[0]


# ---------------------------------------------------------------------- restore, retry, many trials
def test_restore_after_driver_crash_appends(make_trial: MakeTrial, make_result) -> None:
    trial = make_trial()
    before = CallbackList([JsonLoggerCallback(), CSVLoggerCallback()])
    _start(before, trial)
    _run(before, trial, [make_result(i) for i in (1, 2, 3)])
    # The driver dies here: no end hook. A new driver restores the trial.
    trial2 = make_trial()
    after = CallbackList([JsonLoggerCallback(), CSVLoggerCallback()])
    after.on_trial_restore(iteration=0, trials=[trial2], trial=trial2)
    _run(after, trial2, [make_result(i) for i in (4, 5)])
    after.on_trial_complete(iteration=2, trials=[trial2], trial=trial2)

    results = _lines(os.path.join(trial.local_path, "result.json"))
    assert [r["training_iteration"] for r in results] == [1, 2, 3, 4, 5]
    csv_path = os.path.join(trial.local_path, "progress.csv")
    assert [r["training_iteration"] for r in _rows(csv_path)] == ["1", "2", "3", "4", "5"]
    with open(csv_path) as f:
        assert sum(line.startswith("training_iteration") for line in f) == 1


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def test_restarted_trial_reopens_and_appends(make_trial: MakeTrial, make_result) -> None:
    trial = make_trial()
    cb = JsonLoggerCallback()
    cbs = CallbackList([cb])
    fds = _open_fds()
    _start(cbs, trial)
    _run(cbs, trial, [make_result(1)])
    cbs.on_trial_recover(iteration=1, trials=[trial], trial=trial)
    _start(cbs, trial)  # started again after the failure
    _run(cbs, trial, [make_result(2)])
    trial.set_status(Trial.ERROR)
    cbs.on_trial_error(iteration=2, trials=[trial], trial=trial)
    assert len(_lines(os.path.join(trial.local_path, "result.json"))) == 2
    assert cb.open_trials == []
    assert _open_fds() == fds  # the first file was closed when the trial restarted


def test_checkpoint_and_save_keep_files_open(make_trial: MakeTrial, make_result) -> None:
    trial = make_trial()
    cb = CSVLoggerCallback()
    cbs = CallbackList([cb])
    _start(cbs, trial)
    _run(cbs, trial, [make_result(1)])
    cbs.on_checkpoint(iteration=1, trials=[trial], trial=trial, checkpoint=None)
    cbs.on_trial_save(iteration=1, trials=[trial], trial=trial)
    assert cb.open_trials == [trial.trial_id]
    _run(cbs, trial, [make_result(2)])
    assert len(_rows(os.path.join(trial.local_path, "progress.csv"))) == 2


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to count fds")
def test_file_handles_released_at_trial_end(make_trial: MakeTrial, make_result) -> None:
    cbs = CallbackList([JsonLoggerCallback(), CSVLoggerCallback()])
    before = _open_fds()
    for i in range(60):
        trial = make_trial(i)
        _start(cbs, trial)
        _run(cbs, trial, [make_result(1)])
        cbs.on_trial_complete(iteration=1, trials=[trial], trial=trial)
    assert _open_fds() <= before


def test_experiment_end_closes_unfinished_trials(make_trial: MakeTrial, make_result) -> None:
    trials = [make_trial(i) for i in range(3)]
    json_cb, csv_cb = JsonLoggerCallback(), CSVLoggerCallback()
    cbs = CallbackList([json_cb, csv_cb])
    for t in trials:
        _start(cbs, t)
        _run(cbs, t, [make_result(1)])
    cbs.on_experiment_end(trials=trials[:2])  # one trial not in the list any more
    assert json_cb.open_trials == [] and csv_cb.open_trials == []


# ---------------------------------------------------------------------- TensorBoard
def test_tbx_callback_writes_scalars_and_hparams(make_trial: MakeTrial, make_result, read_events):
    trial = make_trial()
    cb = TBXLoggerCallback()
    cbs = CallbackList([cb])
    _start(cbs, trial)
    _run(cbs, trial, [make_result(i) for i in (1, 2)])
    cbs.on_trial_complete(iteration=2, trials=[trial], trial=trial)
    assert cb.open_trials == []
    events = read_events(trial.local_path)
    scalars = [
        (v.tag, e.step) for e in events for v in e.summary.value if v.HasField("simple_value")
    ]
    assert ("ray/tune/loss", 1) in scalars and ("ray/tune/loss", 2) in scalars
    tags = {v.tag for e in events for v in e.summary.value}
    assert "_hparams_/experiment" in tags


def test_tbx_callback_without_tensorboardx_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[tensorboard\]"'):
        TBXLoggerCallback()


# ---------------------------------------------------------------------- defaults
def _names(cbs: list[Callback]) -> list[str]:
    return [type(cb).__name__ for cb in cbs]


def test_default_callback_classes_match_ray_order() -> None:
    expected = (CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback)
    assert tuple(DEFAULT_CALLBACK_CLASSES) == expected


def test_defaults_include_tbx_when_installed(monkeypatch) -> None:
    pytest.importorskip("tensorboardX")
    monkeypatch.delenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", raising=False)
    assert _names(default_logger_callbacks()) == [
        "CSVLoggerCallback",
        "JsonLoggerCallback",
        "TBXLoggerCallback",
    ]


def test_defaults_skip_tbx_when_not_installed(monkeypatch) -> None:
    monkeypatch.delenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", raising=False)
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    assert _names(default_logger_callbacks()) == ["CSVLoggerCallback", "JsonLoggerCallback"]


def test_defaults_not_added_when_user_passed_an_instance(monkeypatch) -> None:
    monkeypatch.delenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", raising=False)

    class MyCSV(CSVLoggerCallback):
        pass

    user = [MyCSV(), JsonLoggerCallback(), Callback()]
    needed = needs_default_loggers(user)
    assert CSVLoggerCallback not in needed and JsonLoggerCallback not in needed
    assert "JsonLoggerCallback" not in _names(default_logger_callbacks(user))


def test_env_var_disables_defaults(monkeypatch) -> None:
    monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    assert needs_default_loggers(None) == []
    assert default_logger_callbacks([]) == []
    monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "0")
    assert JsonLoggerCallback in needs_default_loggers([])


def test_broken_tensorboardx_only_costs_images(
    tmp_path, monkeypatch, caplog, make_trial, read_events
) -> None:
    fake = tmp_path / "site" / "tensorboardX"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('protobuf mismatch')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "tensorboardX", raising=False)
    monkeypatch.delenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", raising=False)
    assert TBXLoggerCallback in needs_default_loggers([])  # found, not imported
    callbacks = default_logger_callbacks()
    assert _names(callbacks) == ["CSVLoggerCallback", "JsonLoggerCallback", "TBXLoggerCallback"]
    trial = make_trial()
    result = {"x": 1, "image": [[[0.0, 1.0]]]}  # a 3-d value: an image, made by tensorboardX
    with caplog.at_level("WARNING", logger="fasttune.logger"):
        for cb in callbacks:
            cb.on_trial_start(iteration=0, trials=[trial], trial=trial)
            cb.on_trial_result(iteration=1, trials=[trial], trial=trial, result=result)
            cb.on_trial_complete(iteration=2, trials=[trial], trial=trial)
    assert "protobuf mismatch" in caplog.text and "ray/tune/image" in caplog.text
    tags = {v.tag for e in read_events(trial.local_path) for v in e.summary.value}
    assert tags == {
        "ray/tune/x",
        "_hparams_/experiment",
        "_hparams_/session_start_info",
        "_hparams_/session_end_info",
    }
