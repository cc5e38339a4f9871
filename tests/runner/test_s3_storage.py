"""Experiments in S3: a real S3 API server (moto) on loopback, real worker processes.

The experiment must live in the bucket: every file the driver writes and every
checkpoint the workers make is there, nothing lands on the local disk outside the
staging directory, and another process (on "another machine": its own staging
directory) restores the experiment after the driver is SIGKILLed and reads its
results and best checkpoint from the bucket alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import fasttune as tune

s3fs = pytest.importorskip("s3fs", reason='needs the test extra: pip install -e ".[test]"')

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = "tests.runner._s3_scripts"


def _s3(server) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(endpoint_url=server.endpoint_url, skip_instance_cache=True)


def _files(directory) -> set[str]:
    """Relative paths of the files under ``directory`` that are not hidden."""
    found = set()
    for root, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if not name.startswith("."):
                rel = os.path.relpath(os.path.join(root, name), directory)
                found.add(rel.replace(os.sep, "/"))
    return found


def _counter(config):
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as local:
            start = json.load(open(os.path.join(local, "state.json")))["i"] + 1
    for i in range(start, config["n"]):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "state.json"), "w") as f:
            json.dump({"i": i, "x": config["x"]}, f)
        with open(os.path.join(d, "weights.bin"), "wb") as f:
            f.write(os.urandom(1000))
        checkpoint = tune.Checkpoint.from_directory(d)
        tune.report({"score": config["x"] * i, "i": i}, checkpoint=checkpoint)


@pytest.fixture
def isolated_disk(tmp_path, monkeypatch):
    """HOME, the working directory and the staging directory under ``tmp_path``."""
    for name in ("home", "cwd", "staging"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FASTTUNE_STAGING_DIR", str(tmp_path / "staging"))
    monkeypatch.delenv("FASTTUNE_STORAGE_PATH", raising=False)
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


def test_an_experiment_with_checkpoints_lives_in_s3(s3_server, s3_bucket, isolated_disk):
    url = f"s3://{s3_bucket}/exps"
    grid = tune.Tuner(
        _counter,
        param_space={"x": tune.grid_search([1, 2, 3]), "n": 4},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(
            storage_path=url,
            name="exp",
            verbose=0,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        ),
    ).fit()
    assert grid.num_terminated == 3 and grid.num_errors == 0

    # Nothing on the local disk outside the staging directory.
    assert _files(isolated_disk / "home") == set()
    assert _files(isolated_disk / "cwd") == set()
    (staging,) = (isolated_disk / "staging").iterdir()
    assert staging.name.startswith("exp-")

    # The bucket has every file of the experiment: all the staging directory holds,
    # the kept checkpoints (num_to_keep=2: the first two are deleted) and the state.
    s3 = _s3(s3_server)
    prefix = f"{s3_bucket}/exps/exp/"
    stored = {path[len(prefix) :] for path in s3.find(prefix)}
    local = _files(staging)
    # State files are committed together under the keys the manifest names.
    manifest = json.loads(s3.cat_file(f"{prefix}experiment_state.manifest.json"))
    state_files = {name for name in local if "/" not in name}
    assert state_files == set(manifest["files"])
    for name, entry in manifest["files"].items():
        assert s3.cat_file(prefix + entry["key"]) == (staging / name).read_bytes(), name
    assert local - state_files <= stored, local - state_files - stored
    # The checkpoints are in the bucket only, as Ray Tune leaves them.
    assert not [rel for rel in local if "/checkpoint_" in rel]
    trial_dirs = {rel.split("/")[0] for rel in local if "/" in rel}
    assert len(trial_dirs) == 3
    for trial_dir in trial_dirs:
        names = {rel.split("/")[1] for rel in stored if rel.startswith(trial_dir + "/")}
        assert {"result.json", "progress.csv", "params.json", "params.pkl"} <= names
        assert {"checkpoint_000002", "checkpoint_000003"} <= names
        assert not {"checkpoint_000000", "checkpoint_000001"} & names
        lines = s3.cat_file(f"{prefix}{trial_dir}/result.json").decode().splitlines()
        assert [json.loads(line)["i"] for line in lines] == [0, 1, 2, 3]
    assert "experiment_state.manifest.json" in stored

    # Results and the best checkpoint are read from the bucket.
    best = grid.get_best_result()
    assert best.config["x"] == 3 and best.metrics["score"] == 9
    assert best.path.startswith(prefix)
    assert "s3" in best.checkpoint.filesystem.type_name
    # pyarrow on Result.filesystem, as Ray users read a bucket (it was fasttune's own).
    assert best.filesystem.get_file_info(f"{best.path}/result.json").size > 0
    assert best.checkpoint.path == f"{best.path}/checkpoint_000003"
    with best.checkpoint.as_directory() as d:
        assert json.load(open(os.path.join(d, "state.json"))) == {"i": 3, "x": 3}
    assert list(best.metrics_dataframe["i"]) == [0, 1, 2, 3]
    frame = grid.get_dataframe()  # each row from the end of a result.json in the bucket
    assert sorted(zip(frame["config/x"], frame["i"], frame["score"])) == [
        (1, 3, 3),
        (2, 3, 6),
        (3, 3, 9),
    ]
    assert all(logdir.startswith(prefix) for logdir in frame["logdir"])
    assert tune.Tuner.can_restore(f"{url}/exp")
    assert not tune.Tuner.can_restore(f"s3://{s3_bucket}")  # a bucket is no experiment
    with pytest.raises(ValueError, match="expected an experiment directory"):
        tune.Tuner.restore(f"s3://{s3_bucket}", trainable=_counter)


def test_a_url_with_pyarrow_options_names_its_endpoint(
    s3_server, s3_bucket, isolated_disk, monkeypatch
):
    # The form Ray's docs show for S3-compatible servers: the options after '?' are
    # pyarrow's. Before, they were left in the key and the endpoint was AWS's.
    pytest.importorskip("pyarrow.fs")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    scheme, _, address = s3_server.endpoint_url.partition("://")
    options = f"?endpoint_override={address}&scheme={scheme}"
    grid = tune.Tuner(
        _counter,
        param_space={"x": 2, "n": 2},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(
            storage_path=f"s3://{s3_bucket}/exps{options}", name="exp", verbose=0
        ),
    ).fit()
    assert grid.num_terminated == 1
    best = grid.get_best_result()
    assert best.path.startswith(f"{s3_bucket}/exps/exp/")
    assert best.checkpoint.path == f"{best.path}/checkpoint_000001"
    with best.checkpoint.as_directory() as d:
        assert json.load(open(os.path.join(d, "state.json"))) == {"i": 1, "x": 2}
    stored = _s3(s3_server).find(f"{s3_bucket}/exps/exp/")
    assert any(key.endswith("/checkpoint_000001/state.json") for key in stored)
    experiment = f"s3://{s3_bucket}/exps/exp{options}"
    assert tune.Tuner.can_restore(experiment)
    analysis = tune.ExperimentAnalysis(experiment, default_metric="score", default_mode="max")
    assert analysis.best_config == {"x": 2, "n": 2}


def _writes_artifacts(config):
    os.makedirs("plots", exist_ok=True)  # in the trial's directory, its working directory
    with open("plots/curve.txt", "w") as f:
        f.write("0.5")
    tune.report({"score": 1})


def test_sync_artifacts_puts_a_trials_own_files_in_the_bucket(s3_server, s3_bucket, isolated_disk):
    grid = tune.Tuner(
        _writes_artifacts,
        run_config=tune.RunConfig(
            storage_path=f"s3://{s3_bucket}/exps",
            name="exp",
            verbose=0,
            sync_config=tune.SyncConfig(sync_artifacts=True),
        ),
    ).fit()
    stored = _s3(s3_server).find(f"{grid[0].path}/")
    assert f"{grid[0].path}/plots/curve.txt" in stored


def _run(command: str, url: str, staging: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", SCRIPT, command, url],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT, FASTTUNE_STAGING_DIR=staging, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _last_json(proc: subprocess.Popen, timeout: float = 90) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _read(url: str) -> dict:
    """What tests/runner/_s3_scripts.py's reader prints, read in this process."""
    import contextlib
    import io

    from tests.runner._s3_scripts import read

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        read(url)
    return json.loads(out.getvalue())


def _wait_for_commits(s3, manifest: str, generation: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        s3.invalidate_cache()
        if s3.exists(manifest) and json.loads(s3.cat_file(manifest))["generation"] >= generation:
            return
        time.sleep(0.05)
    raise AssertionError(f"the driver made no commit {generation} to S3")


@pytest.mark.slow
def test_driver_sigkill_then_restore_from_s3_on_another_machine(s3_server, s3_bucket, tmp_path):
    url = f"s3://{s3_bucket}/exps"
    experiment = f"{url}/killed"
    s3 = _s3(s3_server)
    # Snapshots every 0.2 s, so that commits to S3 (as often as a tenth of the driver's
    # time allows) happen mid-run: commit 1 is the initial state, the next ones hold
    # progress (the commit itself is killed at every write in test_state_commit.py).
    driver = _run("fit", url, str(tmp_path / "machine1"), TUNE_GLOBAL_CHECKPOINT_S="0.2")
    assert driver.stdout.readline().strip() == "started"
    manifest = f"{s3_bucket}/exps/killed/experiment_state.manifest.json"
    _wait_for_commits(s3, manifest, 3)
    assert driver.poll() is None, "the driver finished before it could be killed"
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=30)

    # Another machine: an empty staging directory; everything comes from the bucket.
    restored = _last_json(_run("restore", experiment, str(tmp_path / "machine2")))
    assert restored == {"trials": 10, "terminated": 10}

    _check_each_trial_ran_once(s3, f"{s3_bucket}/exps/killed")

    # This process, which ran neither driver, reads the results and the best
    # checkpoint from the bucket.
    read = _read(experiment)
    assert read["statuses"] == ["TERMINATED"] * 10
    assert len(set(read["xs"])) == 10
    assert "s3" in read["filesystem"]
    assert read["best_checkpoint"].startswith(read["best_path"] + "/checkpoint_")
    assert read["checkpoint_state"] == {"i": 7} and read["rows"] == 8


def _check_each_trial_ran_once(s3, prefix: str, trials: int = 10) -> None:
    """Each trial's folder in the bucket holds its iterations 1-8 once: none ran
    twice, and no trial was started anew beside one that had run."""
    s3.invalidate_cache()
    trial_dirs = [
        d
        for d in s3.ls(prefix, detail=False)
        if not d.endswith(".json") and not d.rsplit("/", 1)[-1].startswith(".")
    ]
    assert len(trial_dirs) == trials, trial_dirs
    for trial_dir in trial_dirs:
        lines = [json.loads(x) for x in s3.cat_file(f"{trial_dir}/result.json").splitlines()]
        assert [line["training_iteration"] for line in lines] == list(range(1, 9)), trial_dir


@pytest.mark.slow
def test_a_driver_killed_between_snapshots_resumes_from_its_checkpoints(
    s3_server, s3_bucket, tmp_path
):
    # The state goes to storage with each new checkpoint (as Ray Tune syncs it), as
    # often as the sync's share of the driver's time allows, not only at snapshots
    # (none here before the end): a driver lost in between is restored from its
    # checkpoints. Before, storage held the run's first commit only, with no trial,
    # and the restored run started every trial anew beside the killed run's.
    url = f"s3://{s3_bucket}/exps"
    s3 = _s3(s3_server)
    # 10 trials of 8 x 0.3 s on 2 slots: ~12 s; the first checkpoint comes 0.3 s in.
    driver = _run(
        "fit",
        url,
        str(tmp_path / "machine1"),
        TUNE_GLOBAL_CHECKPOINT_S="600",
        COUNTER_SLEEP_S="0.3",
    )
    try:
        assert driver.stdout.readline().strip() == "started"
        manifest = f"{s3_bucket}/exps/killed/experiment_state.manifest.json"
        _wait_for_commits(s3, manifest, 2, timeout=6)  # commit 1: the initial state
        assert driver.poll() is None
    finally:
        driver.kill()
        driver.wait(timeout=30)

    restored = _last_json(_run("restore", f"{url}/killed", str(tmp_path / "machine2")))
    assert restored == {"trials": 10, "terminated": 10}
    _check_each_trial_ran_once(s3, f"{s3_bucket}/exps/killed")


def _filesystem(kind: str, server):
    if kind == "s3fs":
        return _s3(server)
    pafs = pytest.importorskip("pyarrow.fs")
    scheme, _, address = server.endpoint_url.partition("://")
    return pafs.S3FileSystem(
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        scheme=scheme,
        endpoint_override=address,
    )


@pytest.mark.parametrize("kind", ["s3fs", "pyarrow"])
def test_a_storage_filesystem_object_with_a_path_inside_it(s3_server, s3_bucket, tmp_path, kind):
    """As Ray takes it: RunConfig(storage_filesystem=..., storage_path="bucket/prefix")."""
    filesystem = _filesystem(kind, s3_server)
    os.environ["FASTTUNE_STAGING_DIR"] = str(tmp_path / "staging")
    try:
        grid = tune.Tuner(
            _counter,
            param_space={"x": 2, "n": 2},
            run_config=tune.RunConfig(
                storage_path=f"{s3_bucket}/exps",
                storage_filesystem=filesystem,
                name="exp",
                verbose=0,
            ),
        ).fit()
        result = grid[0]
        assert result.path.startswith(f"{s3_bucket}/exps/exp/")
        with result.checkpoint.as_directory() as d:
            assert json.load(open(os.path.join(d, "state.json"))) == {"i": 1, "x": 2}
        path = f"{s3_bucket}/exps/exp"
        assert tune.Tuner.can_restore(path, storage_filesystem=filesystem)
        restored = tune.Tuner.restore(path, trainable=_counter, storage_filesystem=filesystem)
        assert restored.get_results()[0].metrics["i"] == 1
        assert restored.fit().num_terminated == 1
        # Read back with the same filesystem, as Ray reads it (pyarrow was a TypeError)
        analysis = tune.ExperimentAnalysis(path, storage_filesystem=filesystem)
        assert [t.last_result["i"] for t in analysis.trials] == [1]
    finally:
        del os.environ["FASTTUNE_STAGING_DIR"]
    stored = {p.rsplit("/", 1)[-1] for p in _s3(s3_server).find(f"{s3_bucket}/exps/exp")}
    assert {"result.json", "state.json", "experiment_state.manifest.json"} <= stored


def test_a_bucket_that_does_not_exist_is_a_clear_error(s3_server, isolated_disk):
    with pytest.raises(ValueError) as info:
        tune.Tuner(
            _counter,
            param_space={"x": 1, "n": 1},
            run_config=tune.RunConfig(storage_path="s3://no-such-bucket/exps", verbose=0),
        ).fit()
    message = str(info.value)
    assert "RunConfig(storage_path='s3://no-such-bucket/exps') is not writable" in message
    assert "AWS_ENDPOINT_URL" in message
    assert isinstance(info.value, OSError)  # as Ray's pyarrow raises it


def test_an_endpoint_that_does_not_answer_is_a_clear_error(
    s3_server, s3_bucket, isolated_disk, monkeypatch
):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()  # fsspec keeps clients, whatever the variables
    try:
        with pytest.raises(OSError) as info:  # botocore's own error before
            tune.Tuner(
                _counter,
                param_space={"x": 1, "n": 1},
                run_config=tune.RunConfig(storage_path=f"s3://{s3_bucket}/exps", verbose=0),
            ).fit()
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
    assert "is not writable" in str(info.value) and "AWS_ENDPOINT_URL" in str(info.value)
