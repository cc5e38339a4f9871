"""``fasttune ls/lsx/show`` on real experiment folders, checked against their files."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time

import pytest

from fasttune.cli import main
from tests.experiments import iterations_of


def last_results(experiment: str) -> dict[str, dict]:
    """trial_id -> last line of result.json, read straight from the files."""
    out = {}
    for name in os.listdir(experiment):
        path = os.path.join(experiment, name, "result.json")
        if os.path.exists(path):
            with open(path) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            out[lines[-1]["trial_id"]] = lines[-1]
    return out


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_rows(out: str) -> list[dict[str, str]]:
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in lines[1:]
    ]


def test_ls_lists_every_trial_with_its_last_result(project, capsys):
    experiment = os.path.join(project, "errors")
    code, out, _ = run(capsys, "ls", experiment)
    assert code == 0
    rows = {r["trial_id"]: r for r in table_rows(out)}
    files = last_results(experiment)
    assert set(rows) == set(files)
    for trial_id, result in files.items():
        assert float(rows[trial_id]["loss"]) == pytest.approx(result["loss"], rel=1e-5)
        assert int(rows[trial_id]["training_iteration"]) == result["training_iteration"]
    errored = {t for t, r in rows.items() if r["status"] == "ERROR"}
    assert errored == {t for t, r in files.items() if r["config"]["x"] > 0.8}
    assert sum(r["status"] == "TERMINATED" for r in rows.values()) == 3


def test_ls_sort_filter_limit_columns_and_output(project, capsys, tmp_path):
    experiment = os.path.join(project, "asha")
    out_csv, out_json = tmp_path / "rows.csv", tmp_path / "rows.json"
    args = [
        "ls",
        experiment,
        "--sort",
        "score",
        "--desc",
        "--filter",
        "score > 2",
        "--limit",
        "3",
        "--columns",
        "trial_id,config/opt,score",
    ]
    code, out, _ = run(capsys, *args, "--output", str(out_csv))
    assert code == 0
    expected = sorted(
        (r for r in last_results(experiment).values() if r["score"] > 2),
        key=lambda r: -r["score"],
    )[:3]
    rows = table_rows(out)
    assert list(rows[0]) == ["trial_id", "config/opt", "score"]
    assert [r["trial_id"] for r in rows] == [r["trial_id"] for r in expected]
    with open(out_csv) as f:
        saved = list(csv.DictReader(f))
    assert [r["trial_id"] for r in saved] == [r["trial_id"] for r in expected]
    assert [float(r["score"]) for r in saved] == [r["score"] for r in expected]
    assert run(capsys, *args, "--output", str(out_json))[0] == 0
    with open(out_json) as f:
        assert json.load(f) == [
            {"trial_id": r["trial_id"], "config/opt": r["config"]["opt"], "score": r["score"]}
            for r in expected
        ]


def test_ls_filter_on_strings_and_status(project, capsys):
    code, out, _ = run(capsys, "ls", os.path.join(project, "errors"), "--filter", "status == ERROR")
    assert code == 0
    assert {r["status"] for r in table_rows(out)} == {"ERROR"}
    assert len(table_rows(out)) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--filter", "loss ~ 1"], "--filter 'loss ~ 1': expected 'COLUMN OP VALUE'"),
        (["--filter", "nope > 1"], "--filter: no column 'nope'. Available columns:"),
        (["--sort", "nope"], "--sort: no column 'nope'"),
        (["--columns", "trial_id,nope"], "--columns: no column 'nope'"),
        (["--output", "rows.xlsx"], "--output 'rows.xlsx': the file name must end in .csv"),
        (["--limit", "-1"], "--limit -1: pass a number of rows"),
    ],
)
def test_ls_bad_options_name_the_option(project, capsys, argv, message):
    code, _, err = run(capsys, "ls", os.path.join(project, "errors"), *argv)
    assert code == 2
    assert message in err


def test_lsx_lists_the_experiments_with_counts_and_best(project, capsys, tmp_path):
    code, out, _ = run(
        capsys,
        "lsx",
        project,
        "--columns",
        "name,total_trials,terminated,error,metric,best",
        "--sort",
        "name",
    )
    assert code == 0
    rows = {r["name"]: r for r in table_rows(out)}
    assert set(rows) == {"asha", "errors", "pbt"}
    assert (rows["errors"]["total_trials"], rows["errors"]["error"]) == ("5", "2")
    assert rows["asha"]["total_trials"] == rows["asha"]["terminated"] == "12"
    best_asha = max(r["score"] for r in last_results(os.path.join(project, "asha")).values())
    assert float(rows["asha"]["best"]) == pytest.approx(best_asha, rel=1e-5)
    best_loss = min(r["loss"] for r in last_results(os.path.join(project, "errors")).values())
    assert float(rows["errors"]["best"]) == pytest.approx(best_loss, rel=1e-5)
    code, out, _ = run(capsys, "lsx", project, "--filter", "error > 0")
    assert [r["name"] for r in table_rows(out)] == ["errors"]


def test_show_best_trial_config_and_errors(project, capsys):
    experiment = os.path.join(project, "errors")
    code, out, _ = run(capsys, "show", experiment)
    assert code == 0
    assert "Trials: 5 (TERMINATED 3, ERROR 2)" in out
    best = min(last_results(experiment).values(), key=lambda r: r["loss"])
    assert f"Best trial: {best['trial_id']} (TERMINATED), loss = " in out
    assert "(min) at iteration 5" in out
    assert "    x: 0.3" in out
    assert "checkpoint: none" in out
    assert "Errors (2 trials):" in out
    assert "ValueError: x=0.9 is too large" in out
    assert "ValueError: x=0.95 is too large" in out


def test_show_checkpoint_and_metric_flags(project, capsys):
    experiment = os.path.join(project, "pbt")
    code, out, _ = run(capsys, "show", experiment)
    assert code == 0
    files = last_results(experiment)
    best = max(files.values(), key=lambda r: r["score"])
    assert f"Best trial: {best['trial_id']}" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("checkpoint:"))
    assert os.path.isdir(line.split("checkpoint:")[1].split(" (")[0].strip())
    # flags override the experiment's metric and mode
    code, out, _ = run(capsys, "show", experiment, "--metric", "score", "--mode", "min")
    worst = min(files.values(), key=lambda r: r["score"])
    assert f"Best trial: {worst['trial_id']}" in out


def test_not_an_experiment_is_a_clear_error(tmp_path, capsys):
    code, _, err = run(capsys, "ls", str(tmp_path / "missing"))
    assert code == 2
    assert "does not exist or is not a folder" in err and "missing" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "show", str(tmp_path / "empty"))
    assert code == 2
    assert "is not a fasttune experiment" in err and "<storage_path>/<name>" in err
    code, out, _ = run(capsys, "lsx", str(tmp_path / "empty"))
    assert code == 0 and "No experiments under" in out


def test_commands_read_a_running_experiment(live, capsys):
    code, out, _ = run(capsys, "ls", live)
    assert code == 0
    rows = table_rows(out)
    assert [r["status"] for r in rows] == ["RUNNING", "RUNNING"]
    first = sum(int(r["training_iteration"]) for r in rows)
    before = iterations_of(live)
    deadline = time.monotonic() + 30
    while iterations_of(live) < before + 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    code, out, _ = run(capsys, "ls", live)
    assert sum(int(r["training_iteration"]) for r in table_rows(out)) > first
    code, out, _ = run(capsys, "show", live)
    assert code == 0 and "Trials: 2 (RUNNING 2)" in out and "Best trial: " in out


def wait_for_more_results(experiment: str, more: int = 4) -> None:
    before = iterations_of(experiment)
    deadline = time.monotonic() + 30
    while iterations_of(experiment) < before + more and time.monotonic() < deadline:
        time.sleep(0.1)
    assert iterations_of(experiment) >= before + more, "the running experiment stalled"


def test_lsx_reads_a_running_experiment(live, capsys, tmp_path):
    rows = []
    for name in ("first.json", "second.json"):
        out = tmp_path / name
        code, _, _ = run(capsys, "lsx", os.path.dirname(live), "--output", str(out))
        assert code == 0
        [row] = json.loads(out.read_text())
        rows.append(row)
        wait_for_more_results(live)
    for row in rows:
        assert (row["name"], row["total_trials"], row["running"]) == ("live", 2, 2)
        assert (row["terminated"], row["error"], row["metric"]) == (0, 0, "loss")
    # loss = 1/i + x falls as the run goes: the second look sees a better best
    assert rows[1]["best"] < rows[0]["best"]
    now = min(r["loss"] for r in last_results(live).values())
    assert now <= rows[1]["best"]


def test_plot_reads_a_running_experiment(live, capsys, tmp_path):
    pytest.importorskip("plotly")
    from fasttune import visualization as vis

    for kind in ("curves", "history", "parallel", "scatter", "stops"):
        out = tmp_path / f"{kind}.html"
        code, _, err = run(capsys, "plot", live, "--kind", kind, "-o", str(out))
        assert code == 0, err
        assert "Plotly.newPlot" in out.read_text()
    points = []
    for _ in range(2):
        before = iterations_of(live)
        figure = vis.plot_learning_curves(live)  # metric (loss) from the running experiment
        after = iterations_of(live)
        assert {t.name for t in figure.data} == set(last_results(live))
        points.append(sum(len(t.x) for t in figure.data))
        assert before <= points[-1] <= after  # every result written when it looked
        wait_for_more_results(live)
    assert points[1] > points[0]
    scatter = vis.plot_slice(live)
    for trial_id, y in zip(scatter.data[0].text, scatter.data[0].y):
        assert y >= last_results(live)[trial_id]["loss"]  # best (min) so far, and loss falls


def test_python_dash_m_and_import_cost(project):
    done = subprocess.run(
        [sys.executable, "-m", "fasttune", "lsx", project],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "asha" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "fasttune", "ls", "/nonexistent/exp"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "does not exist" in bad.stderr
    code = (
        "import sys, fasttune, fasttune.cli; "
        "print(','.join(m for m in sys.modules if m.split('.')[0] in "
        "('plotly', 'pandas', 'sklearn', 'starlette', 'uvicorn', 'numpy') "
        "or m.startswith('fasttune.results')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_commands_read_an_experiment_in_memory_storage(monkeypatch, capsys):
    pytest.importorskip("fsspec")
    import uuid

    import fasttune as tune
    from fasttune import visualization as vis
    from tests.experiments import failing

    root = f"memory://cli-{uuid.uuid4().hex[:8]}/results"
    monkeypatch.setenv("FASTTUNE_EXECUTOR", "inline")  # memory:// lives in this process
    tune.init(num_cpus=2, num_gpus=0)
    try:
        tune.Tuner(
            failing,
            param_space={"x": tune.grid_search([0.1, 0.9])},
            tune_config=tune.TuneConfig(metric="loss", mode="min"),
            run_config=tune.RunConfig(storage_path=root, name="mem", verbose=0),
        ).fit()
    finally:
        tune.shutdown()
    capsys.readouterr()
    code, out, _ = run(capsys, "lsx", root, "--columns", "name,total_trials,error,metric,best")
    assert code == 0
    assert table_rows(out) == [
        {"name": "mem", "total_trials": "2", "error": "1", "metric": "loss", "best": "0.24"}
    ]
    code, out, _ = run(capsys, "show", f"{root}/mem")
    assert "Trials: 2 (TERMINATED 1, ERROR 1)" in out
    assert "loss = 0.24 (min)" in out and "ValueError: x=0.9 is too large" in out
    code, out, _ = run(capsys, "ls", f"{root}/mem", "--filter", "status == ERROR")
    assert [r["config/x"] for r in table_rows(out)] == ["0.9"]
    figure = vis.plot_learning_curves(f"{root}/mem")
    assert sorted(len(t.y) for t in figure.data) == [2, 5]


def test_storage_urls_that_cannot_be_read_are_clear_errors(tmp_path):
    """A protocol whose package is missing names the extra; a store that refuses
    (no credentials) is one line, not a traceback."""
    missing = (
        "import sys; sys.modules['gcsfs'] = None\n"  # as if gcsfs were not installed
        "from fasttune.cli import main\n"
        "sys.exit(main(['ls', 'gs://bucket/exp']))"
    )
    done = subprocess.run([sys.executable, "-c", missing], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert 'pip install "fasttune[gcs]"' in done.stderr and "Traceback" not in done.stderr

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        HOME=str(tmp_path),
        AWS_EC2_METADATA_DISABLED="true",  # no instance metadata to ask for credentials
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
    )
    done = subprocess.run(
        [sys.executable, "-m", "fasttune", "show", "s3://fasttune-no-such-bucket/exp"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "fasttune show: error: cannot read 's3://fasttune-no-such-bucket/exp'" in done.stderr
    assert "NoCredentialsError" in done.stderr and "Traceback" not in done.stderr
