"""CometLoggerCallback with Comet's offline experiments: the archives it writes (issue 11)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fasttune as tune
from fasttune import RunConfig, Tuner

pytest.importorskip("comet_ml")

from fasttune.air.integrations.comet import CometLoggerCallback


def _trainable(config: dict[str, Any]) -> None:
    for i in range(3):
        if config.get("fail") and i == 1:
            raise RuntimeError("boom")
        tune.report({"loss": np.float32(config["lr"] / (i + 1)), "nested": {"acc": 0.1 * i}})


def _archives(directory: Path) -> dict[str, dict[str, Any]]:
    """Each offline archive by trial id: its experiment.json and its messages by type."""
    out = {}
    for archive in directory.glob("*.zip"):
        with zipfile.ZipFile(archive) as z:
            experiment = json.loads(z.read("experiment.json"))
            messages = [json.loads(line) for line in z.read("messages.json").splitlines()]
        others = {
            m["payload"]["key"]: m["payload"]["value"] for m in messages if m["type"] == "log_other"
        }
        metrics: dict[str, dict[int, Any]] = {}
        params: dict[str, Any] = {}
        system: dict[str, Any] = {}
        for m in messages:
            if m["type"] == "metric_msg":
                metric = m["payload"]["metric"]
                metrics.setdefault(metric["metricName"], {})[metric["step"]] = metric["metricValue"]
            elif m["type"] == "parameter_msg":
                param = m["payload"]["param"]
                params[param["paramName"]] = param["paramValue"]
            elif m["type"] == "system_info":
                system[m["payload"]["system_info"]["key"]] = m["payload"]["system_info"]["value"]
        out[others["trial_id"]] = {
            "experiment": experiment,
            "others": others,
            "metrics": metrics,
            "params": params,
            "system": system,
        }
    return out


def test_one_offline_archive_per_trial(tmp_path: Path) -> None:
    offline = tmp_path / "comet"
    callback = CometLoggerCallback(
        online=False,
        tags=["tune", "test"],
        project_name="fasttune-test",
        offline_directory=str(offline),
        display_summary_level=0,
    )
    results = Tuner(
        _trainable,
        param_space={
            "lr": tune.grid_search([0.1, 0.2]),
            "fail": tune.grid_search([False, True]),
            "opt": {"name": "sgd"},
        },
        run_config=RunConfig(storage_path=str(tmp_path), name="comet", callbacks=[callback]),
    ).fit()
    assert len(results.errors) == 2
    archives = _archives(offline)
    assert sorted(archives) == sorted(r.metrics["trial_id"] for r in results)
    for result in results:
        archive = archives[result.metrics["trial_id"]]
        assert archive["experiment"]["project_name"] == "fasttune-test"
        assert sorted(archive["experiment"]["tags"]) == ["test", "tune"]
        assert archive["others"]["Name"].endswith(result.metrics["trial_id"])  # the trial's name
        assert archive["others"]["Created from"] == "Ray"
        lr = result.config["lr"]
        steps = [1] if result.config["fail"] else [1, 2, 3]
        assert archive["metrics"]["loss"] == pytest.approx({s: lr / s for s in steps}, rel=1e-6)
        assert sorted(archive["metrics"]["nested/acc"]) == steps
        # ids go to "others", host facts to system info, never to the metrics
        assert archive["system"]["pid"] == result.metrics["pid"]
        for key in ("trial_id", "pid", "hostname", "done", "config/lr"):
            assert key not in archive["metrics"]
        assert archive["params"]["lr"] == lr and archive["params"]["opt/name"] == "sgd"


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"online=False, save_checkpoints=True"):
        CometLoggerCallback(online=False, save_checkpoints=True)
    with pytest.raises(TypeError, match=r"tags='a'"):
        CometLoggerCallback(online=False, tags="a")  # type: ignore[arg-type]


def test_online_without_an_api_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMET_API_KEY", raising=False)
    monkeypatch.setenv("COMET_CONFIG", "/nonexistent")  # no config file with a key either
    with pytest.raises(ValueError, match=r"online=True.*COMET_API_KEY.*online=False"):
        CometLoggerCallback()


def test_missing_comet_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "comet_ml", None)  # as if not installed
    with pytest.raises(ImportError, match=r'pip install "fasttune\[comet\]"'):
        CometLoggerCallback(online=False)
