"""JsonLogger: params.json, params.pkl and result.json."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

import cloudpickle
import numpy as np
import pytest

from fasttune.logger import JsonLogger
from fasttune.logger.json import JsonResultWriter, write_params
from fasttune.result import EXPR_PARAM_FILE, EXPR_PARAM_PICKLE_FILE, EXPR_RESULT_FILE


def read_lines(logdir: str) -> list[dict[str, Any]]:
    with open(os.path.join(logdir, EXPR_RESULT_FILE)) as f:
        return [json.loads(line) for line in f]


def read_params(logdir: str) -> tuple[str, Any]:
    with open(os.path.join(logdir, EXPR_PARAM_FILE)) as f:
        text = f.read()
    with open(os.path.join(logdir, EXPR_PARAM_PICKLE_FILE), "rb") as f:
        return text, cloudpickle.load(f)


def test_params_files_hold_the_config(tmp_path: Any) -> None:
    config = {"lr": np.float32(0.5), "layers": np.array([2, 3]), "b": {"z": 1, "a": None}}
    log = JsonLogger(config, str(tmp_path))
    log.close()

    text, pickled = read_params(str(tmp_path))
    assert json.loads(text) == {"b": {"a": None, "z": 1}, "layers": [2, 3], "lr": 0.5}
    assert text.index('"b"') < text.index('"layers"') < text.index('"lr"')  # sorted
    assert '\n  "b": {' in text  # indented
    assert pickled["lr"] == np.float32(0.5) and type(pickled["lr"]) is np.float32
    assert pickled["layers"].tolist() == [2, 3]


def test_params_pickle_keeps_objects_json_cannot(tmp_path: Any) -> None:
    JsonLogger({"fn": lambda x: x * 2, "cls": complex}, str(tmp_path)).close()
    text, pickled = read_params(str(tmp_path))
    assert pickled["fn"](4) == 8 and pickled["cls"] is complex
    assert json.loads(text)["cls"] == "<class 'complex'>"


def test_update_config_rewrites_params_atomically(tmp_path: Any) -> None:
    log = JsonLogger({"a": 1}, str(tmp_path))
    log.update_config({"a": 2, "b": 3})
    log.close()
    text, pickled = read_params(str(tmp_path))
    assert json.loads(text) == pickled == log.config == {"a": 2, "b": 3}
    assert sorted(os.listdir(tmp_path)) == sorted(
        [EXPR_PARAM_FILE, EXPR_PARAM_PICKLE_FILE, EXPR_RESULT_FILE]
    )  # no temp files left behind


def test_config_object_with_to_dict(tmp_path: Any) -> None:
    class Config:
        def to_dict(self) -> dict[str, int]:
            return {"x": 1}

    assert write_params(str(tmp_path), Config()) == {"x": 1}
    assert read_params(str(tmp_path))[1] == {"x": 1}


def test_results_are_json_lines(tmp_path: Any, make_result: Callable[..., dict]) -> None:
    log = JsonLogger({}, str(tmp_path / "trial"))  # the directory is created
    results = [make_result(i) for i in range(1, 4)]
    for result in results:
        log.on_result(result)
    log.flush()
    assert read_lines(str(tmp_path / "trial")) == results  # readable before close
    log.close()
    log.close()  # closing twice is harmless


def test_results_with_numpy_nan_and_nesting(tmp_path: Any) -> None:
    log = JsonLogger({}, str(tmp_path))
    log.on_result(
        {
            "mean": np.float64(0.25),
            "count": np.int64(7),
            "ok": np.bool_(False),
            "hist": np.array([1.0, np.nan]),
            "loss": float("nan"),
            "info": {"inner": {"step": np.int32(3)}, "tags": ("a", "b")},
            "obj": object,
        }
    )
    log.close()
    (line,) = read_lines(str(tmp_path))
    assert line["mean"] == 0.25 and line["count"] == 7 and line["ok"] is False
    assert line["hist"][0] == 1.0 and math.isnan(line["hist"][1])
    assert math.isnan(line["loss"])
    assert line["info"] == {"inner": {"step": 3}, "tags": ["a", "b"]}
    assert line["obj"] == "<class 'object'>"


def test_appends_to_existing_file_and_drops_a_torn_line(tmp_path: Any) -> None:
    path = tmp_path / EXPR_RESULT_FILE
    path.write_text('{"training_iteration": 1}\n{"training_iter')
    writer = JsonResultWriter(str(tmp_path))
    writer.write_result({"training_iteration": 2})
    writer.close()
    assert read_lines(str(tmp_path)) == [{"training_iteration": 1}, {"training_iteration": 2}]


def test_torn_only_line_is_dropped(tmp_path: Any) -> None:
    (tmp_path / EXPR_RESULT_FILE).write_text('{"a": ')
    JsonResultWriter(str(tmp_path)).close()
    assert (tmp_path / EXPR_RESULT_FILE).read_bytes() == b""


def test_writing_after_close_raises(tmp_path: Any) -> None:
    log = JsonLogger({}, str(tmp_path))
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.on_result({"a": 1})


def test_context_manager_closes(tmp_path: Any) -> None:
    with JsonLogger({}, str(tmp_path)) as log:
        log.on_result({"a": 1})
    assert log._writer.closed
