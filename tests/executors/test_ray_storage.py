"""The Ray executor with the experiment in S3 (a real moto server) on a real
multi-node Ray cluster of this machine: the trials' captured output reaches the
bucket from the nodes that wrote it, and losing a node mid-run loses nothing there.

The actors reach the S3 server through the job's environment (``runtime_env``), as
on a real cluster where nodes hold the credentials.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'fasttune[ray]'")
s3fs = pytest.importorskip("s3fs", reason='needs the test extra: pip install -e ".[test]"')

import fasttune as tune  # noqa: E402
from tests.executors._ray_driver_script import STEPS  # noqa: E402
from tests.executors._ray_support import OBJECT_STORE_BYTES, node_of  # noqa: E402
from tests.executors._ray_trainables import Steps, chatty_fn  # noqa: E402

pytestmark = pytest.mark.ray_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def ray_with_s3(ray_cluster, s3_server):
    """This process connected to the cluster, its actors pointed at the S3 server."""
    ray.init(
        address=ray_cluster.address,
        logging_level="ERROR",
        log_to_driver=False,
        runtime_env={"env_vars": s3_server.env()},
    )
    yield ray_cluster
    ray.shutdown()


@pytest.fixture
def bucket(ray_with_s3, s3_server, s3_bucket, tmp_path, monkeypatch):
    """(the cluster, an s3fs client, a fresh bucket's name); staging under tmp_path."""
    monkeypatch.setenv("FASTTUNE_STAGING_DIR", str(tmp_path / "staging"))
    fs = s3fs.S3FileSystem(endpoint_url=s3_server.endpoint_url, skip_instance_cache=True)
    return ray_with_s3, fs, s3_bucket


def _text(fs, path: str) -> str:
    fs.invalidate_cache()
    return fs.cat_file(path).decode()


def _lines(fs, path: str) -> list[dict]:
    return [json.loads(line) for line in _text(fs, f"{path}/result.json").splitlines()]


def _generation(fs, experiment: str) -> int:
    """The generation of the experiment's last state commit (0: none yet)."""
    fs.invalidate_cache()
    try:
        manifest = json.loads(fs.cat_file(f"{experiment}/experiment_state.manifest.json"))
    except FileNotFoundError:
        return 0
    return int(manifest["generation"])


def test_captured_output_of_trials_on_other_nodes_ends_in_storage(bucket):
    _, fs, name = bucket
    trainable = tune.with_resources(chatty_fn, lambda config: {"cpu": 1, config["rack"]: 1})
    grid = tune.Tuner(
        trainable,
        param_space={"rack": tune.grid_search(["rack_a", "rack_b"]), "x": 7, "n": 3},
        run_config=tune.RunConfig(
            storage_path=f"s3://{name}/exps", name="out", log_to_file=True, verbose=0
        ),
    ).fit()
    assert grid.num_terminated == 2
    for result in grid:
        assert result.metrics["node_id"] == node_of(result.config["rack"])
        assert result.path.startswith(f"{name}/exps/out/")
        # Uploaded by the actor (the driver's sync leaves these files to it), the last
        # line printed after the trial's last report included.
        out = _text(fs, f"{result.path}/stdout")
        assert out == "out 7 0\nout 7 1\nout 7 2\nout 7 done"
        assert _text(fs, f"{result.path}/stderr") == "err 7 0\nerr 7 1\nerr 7 2\n"


def test_losing_a_node_loses_nothing_in_storage(bucket, tmp_path):
    """As test_ray_cluster's node loss, with the experiment in S3: the trials resume on
    a replacement node from their checkpoints in the bucket, and the bucket ends with
    every iteration once and the output of both nodes."""
    cluster, fs, name = bucket
    # A resource of its own: test_ray_cluster.py leaves a "spot" node behind.
    spot = {"num_cpus": 2, "resources": {"spot_s3": 2}, "object_store_memory": OBJECT_STORE_BYTES}
    first = cluster.add_node(**spot)
    cluster.wait_for_nodes()
    markers = tmp_path / "markers"
    markers.mkdir()
    tuner = tune.Tuner(
        tune.with_resources(Steps, {"cpu": 1, "spot_s3": 1}),
        param_space={
            "x": tune.grid_search([0, 1]),
            "sleep": 0.3,
            "marker_dir": str(markers),
            "say": True,
        },
        run_config=tune.RunConfig(
            storage_path=f"s3://{name}/exps",
            name="lost",
            verbose=0,
            log_to_file=True,
            stop={"training_iteration": 10},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1, num_to_keep=2),
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    )
    outcome: dict = {}
    # The experiment runs in a thread: Ray starts nodes from the main thread only.
    driver = threading.Thread(target=lambda: outcome.update(grid=tuner.fit()), daemon=True)
    driver.start()
    deadline = time.monotonic() + 120
    while len(glob.glob(str(markers / "*_3"))) < 2:  # both trials past iteration 3
        assert time.monotonic() < deadline and driver.is_alive(), "the trials never got going"
        time.sleep(0.05)
    cluster.remove_node(first, allow_graceful=False)
    second = cluster.add_node(**spot)
    try:
        driver.join(timeout=180)
        assert not driver.is_alive(), "the experiment did not finish"
    finally:
        cluster.remove_node(second)
    grid = outcome["grid"]
    assert grid.num_errors == 0 and grid.num_terminated == 2
    for result in grid:
        assert result.path.startswith(f"{name}/exps/lost/")
        lines = _lines(fs, result.path)
        assert [line["training_iteration"] for line in lines] == list(range(1, 11))
        assert [line["n"] for line in lines] == list(range(1, 11))  # counted on
        nodes = [line["node_id"] for line in lines]
        assert nodes[0] == first.node_id and nodes[-1] == second.node_id
        said = _text(fs, f"{result.path}/stdout").splitlines()
        assert said[0] == f"step 1 on {first.node_id}"
        assert said[-1] == f"step 10 on {second.node_id}"
        assert {int(line.split()[1]) for line in said} == set(range(1, 11))
        # The kept checkpoints are in the bucket, and the best one reads back.
        stored = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(result.path, detail=False))
        kept = [n for n in stored if n.startswith("checkpoint_")]
        assert len(kept) == 2, stored
        assert "s3" in result.checkpoint.filesystem.type_name
        assert result.checkpoint.path == f"{result.path}/{kept[-1]}"
        with result.checkpoint.as_directory() as d, open(f"{d}/n.json") as f:
            assert json.load(f) == 10


def test_a_killed_driver_is_restored_from_the_bucket_by_another_process(bucket, tmp_path):
    """The driver (its own process, on the cluster) is SIGKILLed mid-run; Ray ends its
    actors with it. This process restores the experiment from the bucket and finishes
    it on the cluster: every iteration once, counted on from the checkpoints."""
    cluster, fs, name = bucket
    url = f"s3://{name}/exps"
    markers = tmp_path / "markers"
    markers.mkdir()
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.executors._ray_driver_script", cluster.address, url,
         str(markers)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT, FASTTUNE_STAGING_DIR=str(tmp_path / "machine1"),
                 TUNE_GLOBAL_CHECKPOINT_S="0.2"),  # commits mid-run
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert driver.stdout is not None and driver.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 120
        while len(glob.glob(str(markers / "*_4"))) < 2:  # both trials past step 4
            assert time.monotonic() < deadline and driver.poll() is None, driver.stderr.read()
            time.sleep(0.05)
        # Two commits later, the state in the bucket holds checkpoints of both trials.
        generation = _generation(fs, f"{name}/exps/driver_lost")
        while _generation(fs, f"{name}/exps/driver_lost") < generation + 2:
            assert time.monotonic() < deadline and driver.poll() is None, driver.stderr.read()
            time.sleep(0.05)
        assert len(glob.glob(str(markers / f"*_{STEPS}"))) < 2, "it ended before the kill"
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    experiment = f"{url}/driver_lost"
    assert tune.Tuner.can_restore(experiment)
    grid = tune.Tuner.restore(experiment, trainable=Steps).fit()
    assert grid.num_errors == 0 and grid.num_terminated == 2
    for result in grid:
        assert result.path.startswith(f"{name}/exps/driver_lost/")
        lines = _lines(fs, result.path)
        assert [line["training_iteration"] for line in lines] == list(range(1, STEPS + 1))
        assert [line["n"] for line in lines] == list(range(1, STEPS + 1))  # counted on
        assert lines[-1]["restored_at"] >= 4, lines  # from a checkpoint in the bucket
        assert lines[-1]["node_id"] == node_of(result.config["rack"])
