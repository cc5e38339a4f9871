"""TBXLogger: scalars, histograms and hparams in real TensorBoard event files."""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fasttune._support.imports import MissingDependencyError
from fasttune.logger import TBXLogger
from fasttune.logger.tensorboardx import TBXResultWriter

pytest.importorskip("tensorboardX")

ReadEvents = Callable[[str], list[Any]]


def scalars(events: list[Any]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for event in events:
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value":
                out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


def summary_tags(events: list[Any], kind: str) -> set[str]:
    return {
        value.tag
        for event in events
        for value in event.summary.value
        if value.WhichOneof("value") == kind
    }


def hparams_data(events: list[Any]) -> dict[str, Any]:
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData

    out = {}
    for event in events:
        for value in event.summary.value:
            if value.tag.startswith("_hparams_/"):
                content = value.metadata.plugin_data.content
                out[value.tag] = HParamsPluginData.FromString(content)
    return out


def test_numeric_metrics_become_scalars(tmp_path: Any, read_events: ReadEvents) -> None:
    log = TBXLogger({}, str(tmp_path))
    for i in (1, 2):
        log.on_result(
            {
                "training_iteration": i,
                "loss": 1.0 / i,
                "acc": np.float32(0.25 * i),
                "count": np.int64(i),
                "nested": {"deep": {"x": i * 10}},
                "done": i == 2,
                "name": "text",
                "bad": float("nan"),
                "time_total_s": 1.0,
                "pid": 123,
                "timestamp": 99,
                "config": {"lr": 0.1},
            }
        )
    log.close()
    found = scalars(read_events(str(tmp_path)))
    assert found == {
        "ray/tune/loss": [(1, 1.0), (2, 0.5)],
        "ray/tune/acc": [(1, 0.25), (2, 0.5)],
        "ray/tune/count": [(1, 1.0), (2, 2.0)],
        "ray/tune/nested/deep/x": [(1, 10.0), (2, 20.0)],
        "ray/tune/done": [(1, 0.0), (2, 1.0)],  # a bool as 0 or 1, as Ray logs it
    }


def test_step_is_timesteps_total_when_set(tmp_path: Any, read_events: ReadEvents) -> None:
    log = TBXLogger({}, str(tmp_path))
    log.on_result({"training_iteration": 1, "timesteps_total": 500, "m": 1.0})
    log.on_result({"training_iteration": 2, "timesteps_total": None, "m": 2.0})
    log.on_result({"m": 3.0})  # neither: counts results
    log.close()
    assert scalars(read_events(str(tmp_path)))["ray/tune/m"] == [(500, 1.0), (2, 2.0), (3, 3.0)]


def test_lists_and_arrays_become_histograms_and_images(
    tmp_path: Any, read_events: ReadEvents, caplog: pytest.LogCaptureFixture
) -> None:
    log = TBXLogger({}, str(tmp_path))
    log.on_result(
        {
            "training_iteration": 1,
            "weights": [0.1, 0.2, 0.3],
            "arr": np.arange(6.0).reshape(2, 3),
            "image": np.zeros((3, 4, 4), dtype=np.float32),
            "empty": [],
            "words": ["a", "b"],
        }
    )
    log.close()
    events = read_events(str(tmp_path))
    assert summary_tags(events, "histo") == {"ray/tune/weights", "ray/tune/arr"}
    if importlib.util.find_spec("PIL") is not None:
        assert summary_tags(events, "image") == {"ray/tune/image"}
    else:  # tensorboardX needs Pillow for images: the value is skipped with a warning
        assert [r.levelname for r in caplog.records if "ray/tune/image" in r.message] == ["WARNING"]


def test_hparams_from_config_with_last_metrics(tmp_path: Any, read_events: ReadEvents) -> None:
    config = {
        "lr": np.float64(0.01),
        "opt": {"name": "adam", "nesterov": True},
        "layers": 3,
        "sizes": [1, 2],  # not a valid hparam value: left out
        "fn": len,  # left out
    }
    log = TBXLogger(config, str(tmp_path))
    log.on_result({"training_iteration": 1, "loss": 2.0})
    log.on_result({"training_iteration": 2, "loss": 1.0, "acc": 0.5})
    log.close()
    data = hparams_data(read_events(str(tmp_path)))
    assert set(data) == {
        "_hparams_/experiment",
        "_hparams_/session_start_info",
        "_hparams_/session_end_info",
    }
    start = data["_hparams_/session_start_info"].session_start_info
    values = {k: v.WhichOneof("kind") for k, v in start.hparams.items()}
    assert values == {
        "lr": "number_value",
        "opt/name": "string_value",
        "opt/nesterov": "bool_value",
        "layers": "number_value",
    }
    assert start.hparams["lr"].number_value == 0.01
    assert start.hparams["opt/name"].string_value == "adam"
    experiment = data["_hparams_/experiment"].experiment
    assert {m.name.tag for m in experiment.metric_infos} == {"ray/tune/loss", "ray/tune/acc"}


def test_hparams_prefer_trial_evaluated_params(tmp_path: Any, read_events: ReadEvents) -> None:
    trial = SimpleNamespace(evaluated_params={"lr": 0.5})
    log = TBXLogger({"lr": 0.5, "fixed": "x"}, str(tmp_path), trial=trial)
    log.on_result({"training_iteration": 1, "loss": 1.0})
    log.close()
    log.close()  # closing twice is harmless
    start = hparams_data(read_events(str(tmp_path)))["_hparams_/session_start_info"]
    assert set(start.session_start_info.hparams) == {"lr"}


def test_no_hparams_without_results(tmp_path: Any, read_events: ReadEvents) -> None:
    TBXLogger({"lr": 0.1}, str(tmp_path)).close()
    assert hparams_data(read_events(str(tmp_path))) == {}


def test_writer_keeps_last_metrics_and_logs_hparams(tmp_path: Any, read_events: ReadEvents) -> None:
    writer = TBXResultWriter(str(tmp_path))
    writer.write_result({"training_iteration": 1, "a": 1, "b": {"c": 2.5}})
    writer.flush()
    assert writer.last_metrics == {"ray/tune/a": 1.0, "ray/tune/b/c": 2.5}
    assert writer.write_hparams({"x": 1}, metrics={"ray/tune/a": 1.0})
    assert not writer.write_hparams({"x": [1]})  # nothing left to log
    writer.close()
    writer.flush()  # harmless after close
    events = read_events(str(tmp_path))
    assert "ray/tune/a" in scalars(events)
    experiment = hparams_data(events)["_hparams_/experiment"].experiment
    assert [m.name.tag for m in experiment.metric_infos] == ["ray/tune/a"]


def test_missing_tensorboardx_gives_install_hint(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[tensorboard\]"'):
        TBXLogger({}, str(tmp_path))

    from fasttune.logger import UnifiedLogger

    with caplog.at_level(logging.DEBUG, logger="fasttune.logger"):
        log = UnifiedLogger({}, str(tmp_path))
    assert [type(x).__name__ for x in log.loggers] == ["JsonLogger", "CSVLogger"]
    assert all(r.levelno == logging.DEBUG for r in caplog.records if "TBXLogger" in r.message)
    assert any("TBXLogger" in r.message for r in caplog.records)
    log.close()
