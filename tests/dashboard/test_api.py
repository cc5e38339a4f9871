"""The dashboard's JSON API and pages on real experiment folders, and its safety rules."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from fasttune.dashboard import create_app
from fasttune.dashboard._data import REFRESH_S
from fasttune.dashboard._security import resolve_token
from tests.experiments import iterations_of


def histories(experiment: str) -> dict[str, list[dict]]:
    out = {}
    for name in os.listdir(experiment):
        path = os.path.join(experiment, name, "result.json")
        if os.path.exists(path):
            with open(path) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            out[lines[-1]["trial_id"]] = lines
    return out


@pytest.fixture(scope="module")
def client(project):
    return TestClient(create_app(project))


def test_experiments_list_matches_the_files(client, project):
    body = client.get("/api/experiments").json()
    found = {x["id"]: x for x in body["experiments"]}
    assert set(found) == {"asha", "errors", "pbt"}
    errors = found["errors"]
    assert errors["total"] == 5
    assert errors["counts"]["ERROR"] == 2 and errors["counts"]["TERMINATED"] == 3
    files = histories(os.path.join(project, "errors"))
    best = min(files.values(), key=lambda h: h[-1]["loss"])[-1]
    assert (errors["metric"], errors["mode"]) == ("loss", "min")
    assert errors["best"] == pytest.approx(best["loss"])
    assert errors["best_trial"] == best["trial_id"]
    assert errors["start_time"] <= errors["last_update"] + 1  # result timestamps are whole s


def test_trials_are_paged_sorted_and_filtered_on_the_server(client, project):
    files = histories(os.path.join(project, "asha"))
    ranked = sorted(files.values(), key=lambda h: -h[-1]["score"])
    page = client.get(
        "/api/trials", params={"exp": "asha", "limit": 5, "offset": 5, "sort": "metric", "desc": 1}
    ).json()
    assert page["total"] == 12 and page["metric"] == "score"
    assert [r["trial_id"] for r in page["rows"]] == [h[-1]["trial_id"] for h in ranked[5:10]]
    for row in page["rows"]:
        last = files[row["trial_id"]][-1]
        assert row["iterations"] == last["training_iteration"]
        assert row["config/lr"] == pytest.approx(last["config"]["lr"])
    adam = client.get("/api/trials", params={"exp": "asha", "q": "config/opt == adam"}).json()
    assert adam["total"] == sum(h[-1]["config"]["opt"] == "adam" for h in files.values())
    text = client.get("/api/trials", params={"exp": "asha", "q": ranked[0][-1]["trial_id"]}).json()
    assert [r["trial_id"] for r in text["rows"]] == [ranked[0][-1]["trial_id"]]
    errored = client.get("/api/trials", params={"exp": "errors", "status": "ERROR"}).json()
    assert errored["total"] == 2


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"exp": "asha", "limit": "x"}, "limit must be a whole number, got 'x'"),
        ({"exp": "asha", "limit": 100000}, "limit must be between 1 and 500"),
        ({"exp": "asha", "sort": "nope"}, "--sort: no column 'nope'"),
        ({"exp": "asha", "q": "nope > 1"}, "no column 'nope'"),
        ({}, "exp: pass the experiment id"),
    ],
)
def test_bad_queries_are_400_with_a_message(client, params, message):
    response = client.get("/api/trials", params=params)
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_curves_are_the_result_files(client, project):
    files = histories(os.path.join(project, "asha"))
    ids = sorted(files)[:3]
    body = client.get("/api/curves", params={"exp": "asha", "ids": ",".join(ids)}).json()
    assert [t["id"] for t in body["traces"]] == ids
    for trace in body["traces"]:
        assert trace["x"] == [r["training_iteration"] for r in files[trace["id"]]]
        assert trace["y"] == pytest.approx([r["score"] for r in files[trace["id"]]])


def test_figures(client):
    for kind in ("parallel", "importance", "history", "scatter"):
        response = client.get("/api/figure", params={"exp": "asha", "kind": kind})
        assert response.status_code == 200, response.text
        assert response.json()["data"]
    assert client.get("/api/figure", params={"exp": "asha", "kind": "pie"}).status_code == 400
    stops = client.get("/api/figure", params={"exp": "asha", "kind": "stops"}).json()
    assert stops["data"][0]["type"] == "bar"
    pbt = client.get("/api/figure", params={"exp": "pbt", "kind": "pbt"}).json()
    assert pbt["layout"]["annotations"]
    none = client.get("/api/figure", params={"exp": "asha", "kind": "pbt"})
    assert none.status_code == 400 and "pbt_global.txt" in none.json()["error"]
    # the experiment page draws PBT's chart where PBT's log is
    assert client.get("/api/experiment", params={"exp": "pbt"}).json()["pbt"] is True
    assert client.get("/api/experiment", params={"exp": "asha"}).json()["pbt"] is False


def test_stops_view_of_a_hyperband_experiment(hyperband):
    """The scheduler view under HyperBand: each trial's last training_iteration, at
    the milestones (1, 3, 9), read from the result files (no pickle opened)."""
    client = TestClient(create_app(os.path.dirname(hyperband)))
    response = client.get("/api/figure", params={"exp": "hyperband", "kind": "stops"})
    assert response.status_code == 200, response.text
    [bars] = response.json()["data"]
    ends: dict[int, int] = {}
    for history in histories(hyperband).values():
        last = history[-1]["training_iteration"]
        ends[last] = ends.get(last, 0) + 1
    assert dict(zip(bars["x"], bars["y"])) == ends and set(ends) <= {1, 3, 9}


def test_compare_experiments(client):
    figure = client.get("/api/compare", params={"exps": "asha,pbt"}).json()
    assert [t["name"] for t in figure["data"]] == ["asha", "pbt"]
    mixed = client.get("/api/compare", params={"exps": "asha,errors"})
    assert mixed.status_code == 400 and "different or no metrics" in mixed.json()["error"]
    outside = client.get("/api/compare", params={"exps": "asha,../.."})
    assert outside.status_code == 404


def test_trial_pbt_history_is_the_policy_log(client, project):
    """Each PBT exploit a trial took part in, read from pbt_global.txt (whose tags start
    with the trial's index: ``"3_lr=0.18"``)."""
    trial_ids = sorted(histories(os.path.join(project, "pbt")))  # ..._00000 to ..._00003
    with open(os.path.join(project, "pbt", "pbt_global.txt")) as f:
        log = [json.loads(line) for line in f if line.strip()]
    assert log and len(trial_ids) == 4

    def trial_of(tag: str) -> str:
        return trial_ids[int(tag.split("_")[0])]

    for trial_id in trial_ids:
        got = client.get("/api/trial", params={"exp": "pbt", "id": trial_id}).json()["pbt"]
        expected = [
            (trial_of(target), trial_of(donor), step, new_config)
            for target, donor, step, _, _, new_config in log
            if trial_id in (trial_of(target), trial_of(donor))
        ]
        assert [(e["target"], e["donor"], e["target_iteration"], e["new_config"]) for e in got] == (
            expected
        )
    plain = client.get("/api/trials", params={"exp": "errors"}).json()["rows"][0]["trial_id"]
    assert client.get("/api/trial", params={"exp": "errors", "id": plain}).json()["pbt"] == []


def test_trial_page_data(client, project):
    errored = client.get("/api/trials", params={"exp": "errors", "status": "ERROR"}).json()
    trial_id = errored["rows"][0]["trial_id"]
    trial = client.get("/api/trial", params={"exp": "errors", "id": trial_id}).json()
    files = histories(os.path.join(project, "errors"))[trial_id]
    assert trial["status"] == "ERROR"
    assert trial["config"] == {"x": files[-1]["config"]["x"], "tag": "a"}
    assert [r["loss"] for r in trial["history"]] == pytest.approx([r["loss"] for r in files])
    assert "Traceback" in trial["error"] and "is too large" in trial["error"]
    assert f"training with x={trial['config']['x']}" in trial["logs"]["stdout"]
    pbt = client.get("/api/trials", params={"exp": "pbt"}).json()["rows"][0]["trial_id"]
    checkpoints = client.get("/api/trial", params={"exp": "pbt", "id": pbt}).json()["checkpoints"]
    assert checkpoints and all(os.path.isdir(c) for c in checkpoints)
    missing = client.get("/api/trial", params={"exp": "pbt", "id": "nope"})
    assert missing.status_code == 404 and "No trial 'nope'" in missing.json()["error"]


def test_pages_and_offline_plotly(client):
    for path in ("/", "/experiment?exp=asha", "/trial?exp=asha&id=x"):
        response = client.get(path)
        assert response.status_code == 200 and "/static/dashboard.js" in response.text
        assert "https://" not in response.text  # nothing from a CDN
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000
    assert client.get("/static/dashboard.js").status_code == 200


@pytest.mark.parametrize(
    "exp",
    ["..", "../", "../..", "asha/../..", "/etc", "/tmp", "//etc", "asha/../../etc", "\x00"],
)
def test_paths_outside_the_served_folder_are_refused(client, exp):
    for route in ("/api/trials", "/api/experiment", "/api/trial", "/api/curves"):
        response = client.get(route, params={"exp": exp, "id": "x"})
        assert response.status_code == 404, (route, exp)
        assert "served folder" in response.json()["error"]


def test_symlink_out_of_the_served_folder_is_refused(project, tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    os.symlink(os.path.join(project, "asha"), root / "link")
    client = TestClient(create_app(str(root)))
    response = client.get("/api/trials", params={"exp": "link"})
    assert response.status_code == 404 and "served folder" in response.json()["error"]


def test_read_only(client):
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)("/api/trials").status_code == 405


def test_token_is_required_on_every_request(project):
    token = "s3cret-token-value"
    client = TestClient(create_app(project, token=token))
    for path in ("/", "/api/experiments", "/api/trials?exp=asha", "/static/plotly.min.js",
                 "/experiment?exp=asha", "/nothing-here"):  # fmt: skip
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    assert client.get("/api/experiments", params={"token": "wrong"}).status_code == 401
    ok = client.get("/", params={"token": token})
    assert ok.status_code == 200 and "fasttune_token" in ok.headers["set-cookie"]
    assert client.get("/api/experiments").status_code == 200  # the cookie now
    fresh = TestClient(create_app(project, token=token))
    headers = {"Authorization": f"Bearer {token}"}
    assert fresh.get("/api/experiments", headers=headers).status_code == 200


def test_token_rules():
    assert resolve_token("127.0.0.1", None) is None
    generated = resolve_token("0.0.0.0", None)
    assert generated and len(generated) >= 20
    assert resolve_token("0.0.0.0", "given-token") == "given-token"
    with pytest.raises(ValueError, match="--token must be 8 characters or more, got 3"):
        resolve_token("0.0.0.0", "abc")


def test_not_a_folder(tmp_path):
    with pytest.raises(ValueError, match="does not exist or is not a folder"):
        create_app(str(tmp_path / "missing"))


def test_a_running_experiment_updates(live):
    client = TestClient(create_app(os.path.dirname(live)))
    first = client.get("/api/trials", params={"exp": "live"}).json()
    assert [r["status"] for r in first["rows"]] == ["RUNNING", "RUNNING"]
    before = iterations_of(live)
    deadline = time.monotonic() + 30
    while iterations_of(live) < before + 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(REFRESH_S)
    later = client.get("/api/trials", params={"exp": "live"}).json()
    assert sum(r["iterations"] for r in later["rows"]) > sum(r["iterations"] for r in first["rows"])
    listing = client.get("/api/experiments").json()["experiments"]
    assert listing[0]["counts"]["RUNNING"] == 2


def _start(argv: list[str]) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "fasttune", "dashboard", *argv], stdout=subprocess.PIPE, text=True
    )
    return process, process.stdout.readline()


def _status(url: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        try:
            return urllib.request.urlopen(url, timeout=5).status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_dashboard_command_off_loopback_prints_a_token_and_requires_it(project):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process, line = _start([project, "--host", "0.0.0.0", "--port", str(port)])
    try:
        assert f"at http://0.0.0.0:{port}/?token=" in line
        token = line.rsplit("?token=", 1)[1].strip()
        base = f"http://127.0.0.1:{port}"
        assert _status(base + "/api/experiments") == 401
        assert _status(base + "/api/experiments?token=wrong") == 401
        assert _status(f"{base}/api/experiments?token={token}") == 200
    finally:
        process.terminate()
        process.wait()
        process.stdout.close()


def test_dashboard_command_defaults_to_loopback_without_token(project):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process, line = _start([project, "--port", str(port)])
    try:
        assert f"at http://127.0.0.1:{port}/" in line and "token" not in line
        assert _status(f"http://127.0.0.1:{port}/api/experiments") == 200
    finally:
        process.terminate()
        process.wait()
        process.stdout.close()
    bad = subprocess.run(
        [sys.executable, "-m", "fasttune", "dashboard", project, "--port", "70000"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--port must be between 1 and 65535, got 70000" in bad.stderr
