"""Reported values of any numeric type (numpy, torch, Decimal, bool) work everywhere.

A result goes to result.json, progress.csv, TensorBoard, the trial's statistics, the
scheduler, the searcher and the stoppers; each is checked here with real numpy and
torch values reported by a real trial (issue 11, item 1).
"""

from __future__ import annotations

import csv
import json
import os
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

import fasttune as tune
from fasttune import RunConfig, TuneConfig, Tuner
from fasttune._support.result_values import plain_result
from fasttune.schedulers import ASHAScheduler
from fasttune.search import ConcurrencyLimiter, Searcher
from fasttune.stopper import TrialPlateauStopper

torch = pytest.importorskip("torch")


def test_plain_result_converts_numeric_values_of_every_kind() -> None:
    out = plain_result(
        {
            "f32": np.float32(0.5),
            "f16": np.float16(1.5),
            "i64": np.int64(7),
            "u8": np.uint8(3),
            "arr0": np.array(2.5),
            "nb": np.bool_(True),
            "t": torch.tensor(0.25),
            "ti": torch.tensor(4),
            "tb": torch.tensor(False),
            "tgrad": torch.tensor(1.0, requires_grad=True) * 2,
            "dec": Decimal("1.25"),
            "nested": {"x": np.float64(3.0), "deeper": {"y": torch.tensor(5)}},
            "s": "text",
            "arr": np.arange(3),
            "tarr": torch.arange(2),
            "none": None,
            "b": True,
        }
    )
    expected = {
        "f32": 0.5,
        "f16": 1.5,
        "i64": 7,
        "u8": 3,
        "arr0": 2.5,
        "nb": True,
        "t": 0.25,
        "ti": 4,
        "tb": False,
        "tgrad": 2.0,
        "dec": 1.25,
        "nested": {"x": 3.0, "deeper": {"y": 5}},
        "s": "text",
        "none": None,
        "b": True,
    }
    for key, value in expected.items():
        assert out[key] == value, key
        assert type(out[key]) is type(value), key
    assert type(out["nested"]["deeper"]["y"]) is int
    # arrays of several elements are kept as they are (JSON writes them as lists)
    assert isinstance(out["arr"], np.ndarray) and isinstance(out["tarr"], torch.Tensor)


def test_plain_result_copies_and_keeps_plain_values() -> None:
    result = {"a": 1.0, "b": 2, "c": "x"}
    out = plain_result(result)
    assert out == result and out is not result
    original = {"a": np.float32(1.0)}
    plain_result(original)
    assert type(original["a"]) is np.float32  # the caller's dict is not changed


class _RecordingSearcher(Searcher):
    """A small real searcher that keeps what it is told, to check its inputs."""

    def __init__(self, metric: str, mode: str) -> None:
        super().__init__(metric=metric, mode=mode)
        self.count = 0
        self.results: list[dict[str, Any]] = []
        self.completed: list[dict[str, Any]] = []

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.count >= 2:
            return Searcher.FINISHED
        self.count += 1
        return {"x": float(self.count)}

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.results.append(result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if result is not None:
            self.completed.append(result)


def _numeric_trainable(config: dict[str, Any]) -> None:
    import numpy as np
    import torch

    for i in range(4):
        tune.report(
            {
                "f32": np.float32(0.5 * (i + 1) * config["x"]),
                "i64": np.int64(i),
                "arr0": np.array(1.5 + i),
                "t": torch.tensor(0.25 * (i + 1)),
                "ti": torch.tensor(i),
                "dec": Decimal("1.25"),
                "nb": np.bool_(i % 2 == 0),
                "s": "label",
                "vec": np.arange(3, dtype=np.float32),
            }
        )


@pytest.mark.parametrize("metric", ["f32", "t", "dec"])
def test_numeric_values_through_a_real_run(
    tmp_path: Any, read_events: Any, metric: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    searcher = _RecordingSearcher(metric=metric, mode="max")
    results = Tuner(
        _numeric_trainable,
        tune_config=TuneConfig(
            search_alg=ConcurrencyLimiter(searcher, max_concurrent=2),
            scheduler=ASHAScheduler(metric=metric, mode="max", max_t=10, grace_period=1),
            num_samples=2,
        ),
        run_config=RunConfig(
            storage_path=str(tmp_path),
            name="numeric",
            stop=TrialPlateauStopper(metric=metric, num_results=10),
        ),
    ).fit()
    assert not results.errors
    best = results.get_best_result(metric=metric, mode="max")
    metrics = best.metrics
    assert type(metrics["f32"]) is float and metrics["f32"] == pytest.approx(2.0 * best.config["x"])
    assert metrics["i64"] == 3 and type(metrics["i64"]) is int
    assert metrics["arr0"] == 4.5 and metrics["t"] == 1.0 and metrics["ti"] == 3
    assert metrics["dec"] == 1.25 and metrics["nb"] is False and metrics["s"] == "label"

    # result.json: every line parses, with numbers as numbers
    with open(os.path.join(best.path, "result.json")) as f:
        lines = [json.loads(line) for line in f]
    assert [line["f32"] for line in lines] == pytest.approx(
        [0.5 * (i + 1) * best.config["x"] for i in range(4)]
    )
    assert lines[-1]["t"] == 1.0 and lines[-1]["dec"] == 1.25 and lines[-1]["vec"] == [0, 1, 2]
    assert lines[0]["nb"] is True

    # progress.csv: the numbers as numbers
    with open(os.path.join(best.path, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    assert float(rows[-1]["t"]) == 1.0 and float(rows[-1]["dec"]) == 1.25
    assert float(rows[-1]["arr0"]) == 4.5

    # TensorBoard: scalars for the numeric values, none for the string
    tags = {
        value.tag
        for event in read_events(best.path)
        if event.HasField("summary")
        for value in event.summary.value
    }
    for key in ("f32", "i64", "arr0", "t", "ti", "dec"):
        assert f"ray/tune/{key}" in tags, key
    assert "ray/tune/s" not in tags

    # statistics kept per trial, and the dataframe of the results
    trial_df = best.metrics_dataframe
    assert list(trial_df[metric].astype(float))[-1] == metrics[metric]

    # the searcher saw plain numbers
    assert searcher.completed and all(type(r[metric]) is float for r in searcher.completed)
    assert all(type(r["ti"]) is int for r in searcher.results)


def test_stop_criteria_and_trial_statistics_on_numpy_values(tmp_path: Any) -> None:
    from fasttune.experiment.trial import Trial

    results = Tuner(
        _numeric_trainable,
        param_space={"x": 1.0},
        tune_config=TuneConfig(metric="f32", mode="max"),
        run_config=RunConfig(storage_path=str(tmp_path), name="stop", stop={"t": 0.5}),
    ).fit()
    assert not results.errors
    # stopped by the torch value reaching 0.5 at the second iteration
    assert results[0].metrics["training_iteration"] == 2

    trial = Trial("f", config={}, trial_id="t0")
    trial.update_last_result(plain_result({"f32": np.float32(0.5), "t": torch.tensor(2.0)}))
    trial.update_last_result(plain_result({"f32": np.float32(1.5), "t": torch.tensor(4.0)}))
    stats = trial.metric_analysis
    assert stats["f32"]["max"] == 1.5 and stats["t"]["avg"] == 3.0
