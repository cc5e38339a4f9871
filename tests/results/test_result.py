"""``Result``: rebuilt from a trial directory's files alone, and its queries."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys

import cloudpickle
import pytest

from fasttune import Checkpoint
from fasttune._support.imports import MissingDependencyError
from fasttune.error import TrialError, TuneError
from fasttune.logger.csv import CSVResultWriter
from fasttune.logger.json import write_params
from fasttune.results import Result
from fasttune.storage.fsspec_filesystem import FsspecFileSystem


def test_from_path_reads_metrics_config_and_checkpoints(make_trial):
    trial = make_trial(0, [1.0, 3.0, 2.0], checkpoint_every=1)
    result = Result.from_path(trial.local_path)

    assert result.path == trial.local_path
    assert result.metrics["score"] == 2.0
    assert result.metrics["nested"] == {"loss": -2.0, "info": {"step": 3}}
    assert result.metrics["trial_id"] == trial.trial_id
    assert result.config == {"scores": [1.0, 3.0, 2.0], "index": 0}
    assert result.error is None
    assert result.filesystem.type_name == "local"

    names = [os.path.basename(c.path) for c, _ in result.best_checkpoints]
    assert names == ["checkpoint_000001", "checkpoint_000002", "checkpoint_000003"]
    assert [m["training_iteration"] for _, m in result.best_checkpoints] == [1, 2, 3]
    assert [m["score"] for _, m in result.best_checkpoints] == [1.0, 3.0, 2.0]
    assert result.checkpoint == Checkpoint(os.path.join(trial.local_path, "checkpoint_000003"))
    with open(os.path.join(result.checkpoint.path, "state.json")) as f:
        assert json.load(f) == {"iteration": 3}


def test_from_path_without_checkpoints(make_trial):
    result = Result.from_path(make_trial(0, [1.0]).local_path)
    assert result.checkpoint is None
    assert result.best_checkpoints is None


def test_from_path_ignores_staging_and_hidden_dirs(make_trial):
    trial = make_trial(0, [1.0, 2.0], checkpoint_every=2)
    for name in (".checkpoint_tmp_abc", "checkpoint_tmp", "checkpoint_000009.tmp", "notes"):
        os.makedirs(os.path.join(trial.local_path, name))
    with open(os.path.join(trial.local_path, "checkpoint_000005"), "w") as f:
        f.write("a file, not a checkpoint directory")
    result = Result.from_path(trial.local_path)
    assert [os.path.basename(c.path) for c, _ in result.best_checkpoints] == ["checkpoint_000002"]


def test_checkpoint_metrics_fall_back_to_the_matching_iteration(make_trial):
    trial = make_trial(0, [4.0, 5.0, 6.0])
    # A checkpoint directory without trainable state: matched by training_iteration.
    os.makedirs(os.path.join(trial.local_path, "checkpoint_000002"))
    result = Result.from_path(trial.local_path)
    [(_, metrics)] = result.best_checkpoints
    assert metrics["training_iteration"] == 2
    assert metrics["score"] == 5.0


def test_checkpoint_metrics_prefer_the_result_naming_the_checkpoint(tmp_path):
    trial_dir = tmp_path / "trial"
    os.makedirs(trial_dir / "checkpoint_000000")
    lines = [
        {"score": 0.1, "training_iteration": 1},
        {"score": 0.7, "training_iteration": 2, "checkpoint_dir_name": "checkpoint_000000"},
        {"score": 0.9, "training_iteration": 3},
    ]
    (trial_dir / "result.json").write_text("".join(json.dumps(r) + "\n" for r in lines))
    [(_, metrics)] = Result.from_path(str(trial_dir)).best_checkpoints
    assert metrics["score"] == 0.7


def test_from_path_reads_progress_csv_when_there_is_no_result_json(tmp_path):
    trial_dir = str(tmp_path / "trial")
    write_params(trial_dir, {"lr": 0.01, "layers": [2, 3]})
    writer = CSVResultWriter(trial_dir)
    writer.write_result({"trial_id": "00001", "acc": 0.5, "nested": {"n": 1}, "ok": True})
    writer.write_result({"trial_id": "00001", "acc": 0.75, "nested": {"n": 2}, "ok": False})
    writer.close()

    result = Result.from_path(trial_dir)
    assert result.metrics == {"trial_id": "00001", "acc": 0.75, "nested/n": 2, "ok": False}
    assert isinstance(result.metrics["nested/n"], int)
    assert result.config == {"lr": 0.01, "layers": [2, 3]}  # from params.pkl
    frame = result.metrics_dataframe
    assert list(frame["acc"]) == [0.5, 0.75]
    assert list(frame["nested/n"]) == [1, 2]


def test_config_falls_back_to_params_json_when_the_pickle_is_unreadable(tmp_path, caplog):
    trial_dir = tmp_path / "trial"
    trial_dir.mkdir()
    (trial_dir / "result.json").write_text(json.dumps({"score": 1}) + "\n")
    (trial_dir / "params.json").write_text(json.dumps({"lr": 0.5}))
    (trial_dir / "params.pkl").write_bytes(b"not a pickle")
    with caplog.at_level(logging.WARNING):
        assert Result.from_path(str(trial_dir)).config == {"lr": 0.5}
    assert "params.pkl" in caplog.text


def test_corrupt_params_json_names_the_file(tmp_path):
    trial_dir = tmp_path / "trial"
    trial_dir.mkdir()
    (trial_dir / "result.json").write_text(json.dumps({"score": 1}) + "\n")
    (trial_dir / "params.json").write_text("{oops")
    result = Result.from_path(str(trial_dir))
    with pytest.raises(ValueError, match=r"params\.json"):
        result.config


def test_missing_directory_names_the_path(tmp_path):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(RuntimeError, match="nowhere"):
        Result.from_path(missing)


def test_directory_without_results_names_the_files(tmp_path):
    with pytest.raises(RuntimeError, match=r"result\.json.*progress\.csv"):
        Result.from_path(str(tmp_path))


def test_corrupt_result_line_names_file_and_line(tmp_path):
    (tmp_path / "result.json").write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(ValueError, match=r"result\.json, line 2"):
        Result.from_path(str(tmp_path))


def test_non_object_result_line_is_rejected(tmp_path):
    (tmp_path / "result.json").write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"line 2: expected a JSON object"):
        Result.from_path(str(tmp_path))


def test_torn_last_line_is_ignored(tmp_path, caplog):
    (tmp_path / "result.json").write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    with caplog.at_level(logging.WARNING):
        result = Result.from_path(str(tmp_path))
    assert result.metrics == {"a": 2}
    assert "incomplete last line" in caplog.text


def test_error_txt_becomes_a_trial_error(make_trial):
    trial = make_trial(0, [1.0, 2.0, 3.0], fail_at=2)
    error = Result.from_path(trial.local_path).error
    assert isinstance(error, TrialError) and isinstance(error, TuneError)
    assert "scripted failure at iteration 2" in str(error)
    assert "Traceback (most recent call last)" in error.traceback_text
    assert error.exception_type == "ValueError"
    assert error.path == os.path.join(trial.local_path, "error.txt")


def test_error_pkl_is_preferred(make_trial):
    trial = make_trial(0, [1.0, 2.0], fail_at=2)
    with open(os.path.join(trial.local_path, "error.pkl"), "wb") as f:
        f.write(cloudpickle.dumps(KeyError("the original")))
    error = Result.from_path(trial.local_path).error
    assert type(error) is KeyError and error.args == ("the original",)


def test_metrics_dataframe_flattens_nested_metrics(make_trial):
    result = Result.from_path(make_trial(0, [1.0, 3.0, 2.0]).local_path)
    frame = result.metrics_dataframe
    assert len(frame) == 3
    assert {"score", "nested/loss", "nested/info/step", "config/index"} <= set(frame.columns)
    assert list(frame["nested/loss"]) == [-1.0, -3.0, -2.0]
    assert result.metrics_dataframe is frame  # loaded once


def test_metrics_dataframe_without_pandas_says_what_to_install(make_trial, monkeypatch):
    result = Result.from_path(make_trial(0, [1.0]).local_path)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[pandas\]"'):
        result.metrics_dataframe


@pytest.fixture
def checkpointed(make_trial):
    return Result.from_path(make_trial(0, [1.0, 3.0, 2.0], checkpoint_every=1).local_path)


@pytest.mark.parametrize(
    ("metric", "mode", "expected"),
    [
        ("score", "max", "checkpoint_000002"),
        ("score", "min", "checkpoint_000001"),
        ("nested/loss", "max", "checkpoint_000001"),
        ("nested/loss", "min", "checkpoint_000002"),
        ("training_iteration", "max", "checkpoint_000003"),
    ],
)
def test_get_best_checkpoint(checkpointed, metric, mode, expected):
    best = checkpointed.get_best_checkpoint(metric, mode)
    assert os.path.basename(best.path) == expected


def test_get_best_checkpoint_rejects_a_bad_mode(checkpointed):
    with pytest.raises(ValueError, match="'maximum'"):
        checkpointed.get_best_checkpoint("score", "maximum")


def test_get_best_checkpoint_with_an_unknown_metric_lists_the_metrics(checkpointed):
    with pytest.raises(RuntimeError, match=r"'accuracy'.*'score'"):
        checkpointed.get_best_checkpoint("accuracy", "max")


def test_get_best_checkpoint_without_checkpoints(make_trial):
    result = Result.from_path(make_trial(0, [1.0]).local_path)
    with pytest.raises(RuntimeError, match="No checkpoint"):
        result.get_best_checkpoint("score", "max")


def test_get_best_checkpoint_skips_nan(tmp_path):
    a, b = Checkpoint(str(tmp_path / "a")), Checkpoint(str(tmp_path / "b"))
    result = Result({}, b, None, str(tmp_path), best_checkpoints=[(a, {"x": math.nan}), (b, {})])
    assert result.get_best_checkpoint("x", "max") is None
    result.best_checkpoints.append((b, {"x": 1.0}))
    assert result.get_best_checkpoint("x", "min") is b


def test_repr_hides_bookkeeping_and_config(make_trial):
    trial = make_trial(0, [1.0, 2.0], fail_at=2)
    text = repr(Result.from_path(trial.local_path))
    assert text.startswith("Result(\n  error='TrialError',\n  metrics={'score': 1.0, ")
    assert "'nested': {'loss': -1.0, 'info': {'step': 1}}" in text
    for hidden in ("config", "trial_id", "pid", "hostname", "training_iteration", "date"):
        assert f"'{hidden}'" not in text
    assert f"  path={trial.local_path!r},\n  filesystem='local',\n  checkpoint=None\n)" in text


def test_repr_hides_the_checkpoint_folders_name_as_ray_does():
    result = Result({"score": 8, "checkpoint_dir_name": "checkpoint_000003"}, None, None, "p")
    assert "metrics={'score': 8}," in repr(result)


def test_repr_without_error_or_metrics(tmp_path):
    text = repr(Result(None, None, None, "p"))
    assert (
        text == "Result(\n  metrics=None,\n  path='p',\n  filesystem='local',\n  checkpoint=None\n)"
    )


def test_from_path_on_a_remote_filesystem(make_trial):
    fsspec = pytest.importorskip("fsspec")
    trial = make_trial(0, [1.0, 2.0], checkpoint_every=1)
    fs = FsspecFileSystem(fsspec.filesystem("memory"))
    fs.upload_dir(trial.local_path, "/results_test/trial")
    try:
        result = Result.from_path("memory://results_test/trial")
        assert result.metrics["score"] == 2.0
        assert "memory" in result.filesystem.type_name  # pyarrow's view, as in Ray
        assert "memory" in result.checkpoint.filesystem.type_name
        with result.filesystem.open_input_stream(f"{result.path}/result.json") as f:
            assert b'"score": 2.0' in f.read()
        assert result.checkpoint.path.endswith("/results_test/trial/checkpoint_000002")
        local = result.checkpoint.to_directory()
        try:
            with open(os.path.join(local, "state.json")) as f:
                assert json.load(f) == {"iteration": 2}
        finally:
            shutil.rmtree(local)
        assert "filesystem='memory'" in repr(result)
    finally:
        fs.delete("/results_test")
