"""UnifiedLogger fan-out, DEFAULT_LOGGERS, NoopLogger and the Logger base."""

from __future__ import annotations

import csv
import glob
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from fasttune.logger import (
    DEFAULT_LOGGERS,
    CSVLogger,
    JsonLogger,
    Logger,
    NoopLogger,
    TBXLogger,
    UnifiedLogger,
)


class RecordingLogger(Logger):
    """Keeps every call it gets in a class-level list."""

    calls: list[tuple[str, Any]] = []

    def _init(self) -> None:
        self.calls.append(("init", (self.config, self.logdir, self.trial)))

    def on_result(self, result: dict[str, Any]) -> None:
        self.calls.append(("result", result))

    def update_config(self, config: dict[str, Any]) -> None:
        self.calls.append(("config", config))

    def flush(self) -> None:
        self.calls.append(("flush", None))

    def close(self) -> None:
        self.calls.append(("close", None))


class BrokenOnInit(Logger):
    def _init(self) -> None:
        raise RuntimeError("cannot start")


class BrokenOnClose(Logger):
    def on_result(self, result: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        raise OSError("disk gone")


@pytest.fixture(autouse=True)
def _reset_recorder() -> None:
    RecordingLogger.calls = []


def test_default_loggers_match_ray() -> None:
    assert tuple(DEFAULT_LOGGERS) == (JsonLogger, CSVLogger, TBXLogger)


def test_default_fan_out_writes_every_file(tmp_path: Any, make_result: Callable[..., dict]) -> None:
    pytest.importorskip("tensorboardX")
    log = UnifiedLogger({"lr": 0.01}, str(tmp_path))
    assert [type(x) for x in log.loggers] == list(DEFAULT_LOGGERS)
    log.on_result(make_result(1))
    log.on_result(make_result(2))
    log.update_config({"lr": 0.02})
    log.flush()
    log.close()

    assert json.loads((tmp_path / "params.json").read_text()) == {"lr": 0.02}
    assert len((tmp_path / "result.json").read_text().splitlines()) == 2
    with open(tmp_path / "progress.csv", newline="") as f:
        assert [r["training_iteration"] for r in csv.DictReader(f)] == ["1", "2"]
    assert len(glob.glob(str(tmp_path / "events.out.tfevents.*"))) == 1
    assert all(x._writer.closed for x in log.loggers)


def test_calls_reach_every_logger(tmp_path: Any) -> None:
    trial = object()
    log = UnifiedLogger({"a": 1}, str(tmp_path), trial, loggers=[RecordingLogger, NoopLogger])
    log.on_result({"x": 1})
    log.update_config({"a": 2})
    log.flush()
    log.close()
    assert RecordingLogger.calls == [
        ("init", ({"a": 1}, str(tmp_path), trial)),
        ("result", {"x": 1}),
        ("config", {"a": 2}),
        ("flush", None),
        ("close", None),
    ]
    assert log.config == {"a": 2}


def test_logger_that_fails_to_start_is_skipped(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        log = UnifiedLogger({}, str(tmp_path), loggers=[BrokenOnInit, JsonLogger])
    assert [type(x) for x in log.loggers] == [JsonLogger]
    assert "BrokenOnInit" in caplog.text and "cannot start" in caplog.text
    log.close()


def test_close_closes_all_then_raises(tmp_path: Any) -> None:
    log = UnifiedLogger({}, str(tmp_path), loggers=[BrokenOnClose, RecordingLogger])
    with pytest.raises(OSError, match="disk gone"):
        log.close()
    assert RecordingLogger.calls[-1] == ("close", None)


def test_warns_once_without_json_logger(
    tmp_path: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fasttune._support import log_once

    monkeypatch.setattr(log_once, "_seen", set())
    with caplog.at_level(logging.WARNING):
        UnifiedLogger({}, str(tmp_path), loggers=[NoopLogger]).close()
        UnifiedLogger({}, str(tmp_path), loggers=[NoopLogger]).close()
    assert caplog.text.count("result.json will not be written") == 1


def test_noop_logger_writes_nothing(tmp_path: Any) -> None:
    with NoopLogger({"a": 1}, str(tmp_path)) as log:
        log.on_result({"x": 1})
        log.update_config({"a": 2})
        log.flush()
    assert list(tmp_path.iterdir()) == []


def test_base_logger_needs_on_result(tmp_path: Any) -> None:
    with pytest.raises(NotImplementedError):
        Logger({}, str(tmp_path)).on_result({})
