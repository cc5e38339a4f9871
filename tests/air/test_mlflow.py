"""MLflowLoggerCallback and setup_mlflow against a real local MLflow store (issue 11)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fasttune as tune
from fasttune import RunConfig, Tuner

mlflow = pytest.importorskip("mlflow")

from fasttune.air.integrations.mlflow import MLflowLoggerCallback, setup_mlflow  # noqa: E402


@pytest.fixture
def tracking_uri(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh sqlite store in tmp_path (its schema made once, before any worker uses it)."""
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    mlflow.tracking.MlflowClient(tracking_uri=uri).search_experiments()
    return uri


def _trainable(config: dict[str, Any]) -> None:
    for i in range(3):
        if config.get("fail") and i == 1:
            raise RuntimeError("boom")
        tune.report(
            {"loss": np.float32(config["lr"] / (i + 1)), "nested": {"acc": 0.1 * i}, "s": "x"}
        )


def _runs(uri: str, experiment: str) -> list[Any]:
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, experiment
    return list(client.search_runs([exp.experiment_id]))


def test_one_run_per_trial_with_params_metrics_and_tags(tracking_uri: str, tmp_path: Any) -> None:
    callback = MLflowLoggerCallback(
        tracking_uri=tracking_uri,
        experiment_name="tune-exp",
        tags={"team": "search"},
        save_artifact=True,
    )
    results = Tuner(
        _trainable,
        param_space={"lr": tune.grid_search([0.1, 0.2]), "opt": {"name": "sgd"}},
        run_config=RunConfig(storage_path=str(tmp_path), name="ml", callbacks=[callback]),
    ).fit()
    assert not results.errors
    runs = _runs(tracking_uri, "tune-exp")
    assert len(runs) == 2
    client = mlflow.tracking.MlflowClient(tracking_uri=tracking_uri)
    by_lr = {r.data.params["lr"]: r for r in runs}
    for result in results:
        run = by_lr[str(result.config["lr"])]
        assert run.data.tags["trial_name"] == run.info.run_name
        assert run.info.run_name.endswith(result.metrics["trial_id"])
        assert run.info.status == "FINISHED"
        assert run.data.tags["team"] == "search"
        assert run.data.params == {"lr": str(result.config["lr"]), "opt/name": "sgd"}
        history = client.get_metric_history(run.info.run_id, "loss")
        assert [m.step for m in history] == [1, 2, 3]
        assert [m.value for m in history] == pytest.approx(
            [result.config["lr"] / (i + 1) for i in range(3)], rel=1e-6
        )
        assert client.get_metric_history(run.info.run_id, "nested/acc")[-1].value == 0.2
        assert "s" not in run.data.metrics  # not a number
        assert run.data.metrics["config/lr"] == result.config["lr"]  # as Ray logs it
        assert "config/opt/name" not in run.data.metrics
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert "params.json" in artifacts


def test_failed_trial_run_is_marked_failed(tracking_uri: str, tmp_path: Any) -> None:
    callback = MLflowLoggerCallback(tracking_uri=tracking_uri, experiment_name="fails")
    results = Tuner(
        _trainable,
        param_space={"lr": 0.1, "fail": True},
        run_config=RunConfig(storage_path=str(tmp_path), name="f", callbacks=[callback]),
    ).fit()
    assert len(results.errors) == 1
    (run,) = _runs(tracking_uri, "fails")
    assert run.info.status == "FAILED"
    assert run.data.metrics["loss"] == pytest.approx(0.1)


def test_setup_mlflow_inside_the_trainable(tracking_uri: str, tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        ml = setup_mlflow(
            config,
            tracking_uri=config["uri"],
            experiment_name="inside",
            create_experiment_if_not_exists=True,
            tags={"kind": "manual"},
        )
        for i in range(2):
            ml.log_metric("score", config["lr"] * i, step=i)
            tune.report({"score": config["lr"] * i})
        ml.end_run()

    results = Tuner(
        train,
        param_space={"lr": 0.5, "uri": tracking_uri},
        run_config=RunConfig(storage_path=str(tmp_path), name="inside"),
    ).fit()
    assert not results.errors
    (run,) = _runs(tracking_uri, "inside")
    assert run.data.params["lr"] == "0.5" and run.data.tags["kind"] == "manual"
    assert run.data.tags["trial_id"] == results[0].metrics["trial_id"]
    assert run.info.run_name.startswith("train_")
    assert run.data.metrics["score"] == 0.5


def test_bad_input(tracking_uri: str) -> None:
    with pytest.raises(ValueError, match=r"experiment_name='missing'.*create_experiment"):
        setup_mlflow(tracking_uri=tracking_uri, experiment_name="missing")
    with pytest.raises(TypeError, match=r"tags='team'"):
        MLflowLoggerCallback(tags="team")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tracking_uri=5"):
        MLflowLoggerCallback(tracking_uri=5)  # type: ignore[arg-type]


@pytest.fixture
def mlflow_server(tmp_path: Any):
    """A real ``mlflow server`` on loopback (sqlite store, local artifact root)."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = tmp_path / "server"
    store.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{store}/mlflow.db",
         "--default-artifact-root", str(store / "artifacts"), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"mlflow server did not start: {err[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_runs_reach_an_mlflow_server_over_http(mlflow_server: str, tmp_path: Any) -> None:
    """The callback's tracking URI may be a tracking server, as Ray users' usually is."""
    callback = MLflowLoggerCallback(tracking_uri=mlflow_server, experiment_name="served")
    results = Tuner(
        _trainable,
        param_space={"lr": tune.grid_search([0.1, 0.3])},
        run_config=RunConfig(storage_path=str(tmp_path), name="srv", callbacks=[callback]),
    ).fit()
    assert not results.errors
    runs = _runs(mlflow_server, "served")
    assert sorted(r.data.params["lr"] for r in runs) == ["0.1", "0.3"]
    client = mlflow.tracking.MlflowClient(tracking_uri=mlflow_server)
    for run in runs:
        assert run.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [1, 2, 3]
