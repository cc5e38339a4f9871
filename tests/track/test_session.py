"""TrackSession: one trial's files written outside a Tuner, read back (issue 11)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from fasttune.track import TrackSession


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_session_writes_a_trial_directory(tmp_path: Path) -> None:
    session = TrackSession(
        trial_name="baseline", experiment_dir=str(tmp_path / "exp"), trial_config={"lr": 0.1}
    )
    assert session.trial_id.startswith("baseline_") and session.trial_name == "baseline"
    logdir = Path(session.logdir)
    assert logdir.parent == tmp_path / "exp" and logdir.name.startswith("baseline_")
    for step in range(3):
        session.log(loss=np.float32(1.0 / (step + 1)), acc=np.float64(0.1 * step))
    session.log(loss=0.2, training_iteration=10)  # an iteration given is kept
    session.close()
    results = _lines(logdir / "result.json")
    assert [r["training_iteration"] for r in results] == [0, 1, 2, 10]  # from 0, as in Ray
    assert {r["trial_id"] for r in results} == {session.trial_id}
    assert [r["loss"] for r in results] == pytest.approx([1.0, 0.5, 1 / 3, 0.2])
    with open(logdir / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["acc"]) for r in rows[:3]] == pytest.approx([0.0, 0.1, 0.2])
    params = json.loads((logdir / "params.json").read_text())
    assert params["lr"] == 0.1 and params["trial_id"] == session.trial_id
    assert params["trial_completed"] is True and "end_time" in params


def test_defaults_and_context_manager() -> None:
    # conftest points FASTTUNE_STORAGE_PATH at this test's tmp dir
    with TrackSession() as session:
        session.log(x=1)
    assert os.path.dirname(session.logdir) == os.path.join(
        os.environ["FASTTUNE_STORAGE_PATH"], "default"
    )
    assert session.trial_name == session.trial_id and "_" not in session.trial_id
    assert json.loads(Path(session.logdir, "params.json").read_text())["trial_completed"]
    with pytest.raises(RuntimeError, match=r"log\(\) after close\(\).*new TrackSession"):
        session.log(x=2)
    session.close()  # a second close does nothing


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(NotImplementedError, match=r"upload_dir='s3://b'"):
        TrackSession(experiment_dir=str(tmp_path), upload_dir="s3://b")
    with pytest.raises(TypeError, match=r"trial_config=\[1\]"):
        TrackSession(experiment_dir=str(tmp_path), trial_config=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"trial_name=3"):
        TrackSession(trial_name=3)  # type: ignore[arg-type]
