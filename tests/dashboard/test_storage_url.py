"""The dashboard and the command line on experiments in storage: ``s3://`` (a real S3 API
server, moto, on loopback, and a real run with worker processes writing there) and
``memory://`` (a real run in this process). Everything is checked against the objects
in the store, read with s3fs/fsspec directly."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")
pytest.importorskip("s3fs", reason='needs the test extra: pip install -e ".[test]"')

import s3fs
from starlette.testclient import TestClient

from fasttune.cli import main
from fasttune.dashboard import create_app
from tests.dashboard.conftest import run_failing


def _histories(store, prefix: str) -> dict[str, list[dict]]:
    """trial_id -> every line of its result.json, read from the store directly."""
    out = {}
    for path in store.glob(f"{prefix}/*/result.json"):
        lines = [json.loads(line) for line in store.cat_file(path).decode().splitlines() if line]
        if lines:
            out[lines[-1]["trial_id"]] = lines
    return out


def _s3(server) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(endpoint_url=server.endpoint_url, skip_instance_cache=True)


def test_dashboard_api_on_an_s3_experiment(s3_root, s3_server):
    files = _histories(_s3(s3_server), s3_root[len("s3://") :] + "/errors")
    assert len(files) == 3
    client = TestClient(create_app(s3_root))

    (summary,) = client.get("/api/experiments").json()["experiments"]
    assert summary["id"] == "errors" and summary["total"] == 3
    assert summary["counts"]["ERROR"] == 1 and summary["counts"]["TERMINATED"] == 2
    best = min(files.values(), key=lambda h: h[-1]["loss"])[-1]
    assert summary["best"] == pytest.approx(best["loss"])
    assert summary["best_trial"] == best["trial_id"]

    page = client.get("/api/trials", params={"exp": "errors", "sort": "metric"}).json()
    assert [r["trial_id"] for r in page["rows"]] == [
        h[-1]["trial_id"] for h in sorted(files.values(), key=lambda h: h[-1]["loss"])
    ]
    for row in page["rows"]:
        assert row["iterations"] == files[row["trial_id"]][-1]["training_iteration"]

    failed = next(t for t, h in files.items() if h[-1]["config"]["x"] == 0.9)
    curves = client.get("/api/curves", params={"exp": "errors", "ids": failed}).json()
    assert curves["traces"][0]["y"] == pytest.approx([r["loss"] for r in files[failed]])

    trial = client.get("/api/trial", params={"exp": "errors", "id": failed}).json()
    assert trial["status"] == "ERROR"
    assert "ValueError: x=0.9 is too large" in trial["error"]
    assert "training with x=0.9" in trial["logs"]["stdout"]  # the worker's stdout, from S3
    assert len(trial["history"]) == len(files[failed])

    history = client.get("/api/figure", params={"exp": "errors", "kind": "history"})
    assert history.status_code == 200 and history.json()["data"]


@pytest.mark.parametrize("exp", ["../results", "..", "/errors", "a/../../x", "s3://other/x"])
def test_keys_outside_the_served_prefix_are_refused(s3_root, exp):
    client = TestClient(create_app(s3_root))
    response = client.get("/api/trials", params={"exp": exp})
    assert response.status_code == 404, response.text
    assert "not a path inside the served folder" in response.json()["error"]


def test_a_missing_prefix_is_a_clear_error(s3_root):
    with pytest.raises(ValueError, match="does not exist or is not a folder"):
        create_app(s3_root + "-missing")


def test_command_line_on_an_s3_experiment(s3_root, s3_server, capsys, tmp_path):
    files = _histories(_s3(s3_server), s3_root[len("s3://") :] + "/errors")
    assert main(["lsx", s3_root]) == 0
    out = capsys.readouterr().out
    assert "errors" in out and "| 3 " in out.replace("|  ", "| ")
    assert main(["ls", f"{s3_root}/errors", "--filter", "status == ERROR"]) == 0
    out = capsys.readouterr().out
    failed = next(t for t, h in files.items() if h[-1]["config"]["x"] == 0.9)
    assert failed in out and sum(t in out for t in files) == 1
    assert main(["show", f"{s3_root}/errors"]) == 0
    out = capsys.readouterr().out
    assert "Trials: 3 (TERMINATED 2, ERROR 1)" in out
    assert "ValueError: x=0.9 is too large" in out
    target = tmp_path / "curves.html"
    assert main(["plot", f"{s3_root}/errors", "-o", str(target)]) == 0
    assert target.stat().st_size > 1_000_000  # plotly.js is embedded
    assert main(["show", f"{s3_root}/nothing-here"]) == 2
    assert "does not exist or is not a folder" in capsys.readouterr().err


def test_dashboard_command_serves_an_s3_url(s3_root):
    """``fasttune dashboard s3://...`` in its own process, asked over HTTP."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "fasttune", "dashboard", s3_root, "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )  # inherits AWS_ENDPOINT_URL and the credentials from the s3_server fixture
    try:
        line = process.stdout.readline()
        assert f"fasttune dashboard of {s3_root} at http://127.0.0.1:{port}/" in line
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/experiments", timeout=10
                ) as response:
                    body = json.load(response)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert [(x["id"], x["total"]) for x in body["experiments"]] == [("errors", 3)]
        assert body["root"] == s3_root
    finally:
        process.terminate()
        process.wait()
        process.stdout.close()


def test_dashboard_api_on_a_memory_experiment(monkeypatch):
    """memory:// lives in one process: the run (inline executor) and the app share it."""
    import fsspec

    root = f"memory://dash-{uuid.uuid4().hex[:8]}/results"
    monkeypatch.setenv("FASTTUNE_EXECUTOR", "inline")
    run_failing(root)
    client = TestClient(create_app(root))
    (summary,) = client.get("/api/experiments").json()["experiments"]
    assert (summary["id"], summary["total"], summary["counts"]["ERROR"]) == ("errors", 3, 1)
    store = fsspec.filesystem("memory")
    files = _histories(store, root[len("memory://") :] + "/errors")
    page = client.get("/api/trials", params={"exp": "errors"}).json()
    assert {r["trial_id"]: r["iterations"] for r in page["rows"]} == {
        t: h[-1]["training_iteration"] for t, h in files.items()
    }
    best = min(files.values(), key=lambda h: h[-1]["loss"])[-1]
    trial = client.get("/api/trial", params={"exp": "errors", "id": best["trial_id"]}).json()
    assert trial["config"] == {"x": best["config"]["x"]}
    assert [r["loss"] for r in trial["history"]] == pytest.approx(
        [r["loss"] for r in files[best["trial_id"]]]
    )
    assert client.get("/api/trials", params={"exp": "../x"}).status_code == 404


def test_a_long_log_in_storage_is_read_from_its_tail():
    from fasttune.dashboard._data import LOG_TAIL, _tail
    from fasttune.storage.filesystem import get_fs_and_path

    fs, path = get_fs_and_path(f"memory://tail-{uuid.uuid4().hex[:8]}/stdout")
    text = "".join(f"line {i}\n" for i in range(20_000))
    fs.write_bytes_atomic(path, text.encode())
    assert len(text) > LOG_TAIL
    assert _tail(fs, path) == text[-LOG_TAIL:]
    fs.write_bytes_atomic(path, b"")
    assert _tail(fs, path) == ""
    assert _tail(fs, path + "-missing") is None


def test_a_remote_view_is_read_again_only_when_its_state_was_committed(monkeypatch):
    """The manifest (one small object) says whether the state changed: a finished
    experiment in storage is not re-read whole at every refresh."""
    from fasttune.results.experiment_view import LOAD_SPACING, MANIFEST_FILE, ExperimentView
    from fasttune.storage.filesystem import get_fs_and_path

    root = f"memory://stamp-{uuid.uuid4().hex[:8]}/results"
    monkeypatch.setenv("FASTTUNE_EXECUTOR", "inline")
    run_failing(root)
    view = ExperimentView(f"{root}/errors")
    read = view.trials
    time.sleep(LOAD_SPACING * view._load_seconds + 0.05)  # a full read would be due now
    view.refresh()
    assert view.trials is read  # nothing committed since: not read again
    fs, path = get_fs_and_path(f"{root}/errors/{MANIFEST_FILE}")
    fs.write_bytes_atomic(path, fs.read_bytes(path) + b"\n")  # a new commit of the state
    view.refresh()
    assert view.trials is not read
    assert [(t.trial_id, t.status) for t in view.trials] == [(t.trial_id, t.status) for t in read]
