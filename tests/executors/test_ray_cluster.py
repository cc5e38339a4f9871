"""The Ray executor on a real multi-node Ray cluster of this machine (three nodes with
their own custom resources, see conftest.py): placement by resources, placement groups
across nodes, requests that never fit, waiting for new nodes, and losing a node."""

from __future__ import annotations

import glob
import json
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'fasttune[ray]'")

import fasttune as tune  # noqa: E402
from fasttune.executors._ray_resources import RayResourceManager  # noqa: E402
from tests.executors._ray_support import OBJECT_STORE_BYTES, node_of  # noqa: E402
from tests.executors._ray_trainables import Steps, bundles_fn, where_fn  # noqa: E402

pytestmark = pytest.mark.ray_cluster
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_config(tmp_path, **kwargs) -> tune.RunConfig:
    kwargs.setdefault("name", "exp")
    return tune.RunConfig(storage_path=str(tmp_path / "results"), verbose=0, **kwargs)


def _lines(path: str) -> list[dict]:
    with open(os.path.join(path, "result.json")) as f:
        return [json.loads(line) for line in f]


def test_trials_run_on_the_nodes_their_resources_name(ray_connected, tmp_path):
    trainable = tune.with_resources(where_fn, lambda config: {"cpu": 1, config["rack"]: 1})
    grid = tune.Tuner(
        trainable,
        param_space={"rack": tune.grid_search(["rack_a", "rack_b", "head"]), "n": 2},
        run_config=_run_config(tmp_path),
    ).fit()
    assert grid.num_terminated == 3
    for result in grid:
        assert result.metrics["node_id"] == node_of(result.config["rack"])


def test_a_placement_group_gets_each_bundle_on_its_node(ray_connected, tmp_path):
    groups = tune.PlacementGroupFactory(
        [{"CPU": 1, "rack_a": 1}, {"CPU": 1, "rack_b": 1}], strategy="SPREAD"
    )
    grid = tune.Tuner(
        tune.with_resources(bundles_fn, groups), run_config=_run_config(tmp_path)
    ).fit()
    metrics = grid[0].metrics
    # The trainable runs in the first bundle, the task it started in the second.
    assert metrics["node_id"] == node_of("rack_a")
    assert metrics["bundle_nodes"] == [node_of("rack_b")]


def test_requests_that_can_never_fit_are_refused_clearly(ray_connected, tmp_path):
    with pytest.raises(ValueError, match=r"asks for 1 GPU, but the Ray cluster \(3 live nodes\)"):
        tune.Tuner(
            tune.with_resources(where_fn, {"cpu": 1, "gpu": 1}), run_config=_run_config(tmp_path)
        ).fit()
    manager = RayResourceManager(ray, autoscaling=False)
    with pytest.raises(ValueError, match=r"'big' asks for 5 CPUs in bundle 0 .* largest has 4"):
        manager.check_fits({"CPU": 5}, "big")  # 8 CPUs in all, but a bundle is on one node
    with pytest.raises(ValueError, match="no node of the Ray cluster .* has all of it at once"):
        manager.check_fits({"CPU": 3, "rack_a": 1})
    spread = tune.PlacementGroupFactory([{"CPU": 1}] * 4, strategy="STRICT_SPREAD")
    with pytest.raises(ValueError, match="4 bundles on distinct nodes"):
        manager.check_fits(spread)
    manager.check_fits(tune.PlacementGroupFactory([{"CPU": 1}] * 3, strategy="STRICT_SPREAD"))


def test_told_that_nodes_will_join_a_trial_waits_for_one_that_joins_later(
    ray_connected, tmp_path, monkeypatch
):
    """Nodes started by hand after fit() (no cluster launcher): refused at once by
    default, with the way to wait said; with FASTTUNE_CLUSTER_AUTOSCALES=1 the trial
    waits and runs on the node that joins (as Ray Tune waits)."""
    trainable = tune.with_resources(where_fn, {"cpu": 1, "late_rack": 1})
    with pytest.raises(ValueError, match="set FASTTUNE_CLUSTER_AUTOSCALES=1"):
        tune.Tuner(trainable, run_config=_run_config(tmp_path, name="refused")).fit()
    monkeypatch.setenv("FASTTUNE_CLUSTER_AUTOSCALES", "1")
    outcome: dict = {}

    def fit() -> None:  # in a thread: Ray adds nodes from the main thread only
        try:
            outcome["grid"] = tune.Tuner(
                trainable, param_space={"n": 1}, run_config=_run_config(tmp_path, name="waited")
            ).fit()
        except BaseException as e:
            outcome["error"] = e

    thread = threading.Thread(target=fit)
    thread.start()
    time.sleep(3)
    assert thread.is_alive(), outcome  # waiting, not refused
    node = ray_connected.add_node(
        num_cpus=1, resources={"late_rack": 1}, object_store_memory=OBJECT_STORE_BYTES
    )
    try:
        thread.join(timeout=120)
        assert not thread.is_alive() and "error" not in outcome, outcome
        grid = outcome["grid"]
        assert grid.num_terminated == 1
        assert grid[0].metrics["node_id"] == node.node_id
    finally:
        thread.join()
        ray_connected.remove_node(node)


def test_fractional_gpus_share_a_device_and_trials_see_only_theirs(ray_connected, tmp_path):
    # Ray counts the GPUs a node declares; this machine needs none for that.
    node = ray_connected.add_node(
        num_cpus=2, num_gpus=2, resources={"gpu_rack": 3}, object_store_memory=OBJECT_STORE_BYTES
    )
    try:
        half = tune.with_resources(where_fn, {"cpu": 0.5, "gpu": 0.5, "gpu_rack": 1})
        grid = tune.Tuner(
            half,
            param_space={"x": tune.grid_search([0, 1, 2]), "n": 2, "sleep": 0.5},
            run_config=_run_config(tmp_path),
        ).fit()
        assert grid.num_terminated == 3
        seen = sorted(r.metrics["cuda"] for r in grid)
        # Three halves on two devices: two trials share one, each sees one id.
        assert all(len(cuda.split(",")) == 1 for cuda in seen) and len(set(seen)) == 2
        assert all(r.metrics["node_id"] == node.node_id for r in grid)
        cpu_only = tune.Tuner(
            tune.with_resources(where_fn, {"cpu": 1, "gpu_rack": 1}),
            run_config=_run_config(tmp_path, name="cpu_only"),
        ).fit()
        # A trial without GPUs sees them as the node has them: Ray 2.60 leaves
        # CUDA_VISIBLE_DEVICES alone for an actor without GPUs (unless its
        # RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO is set), and so do Ray Tune's trials.
        assert cpu_only[0].metrics["cuda"] == os.environ.get("CUDA_VISIBLE_DEVICES")
    finally:
        ray_connected.remove_node(node)


def test_with_an_autoscaler_a_request_waits_for_a_new_node(ray_connected, caplog):
    now = [0.0]
    manager = RayResourceManager(ray, autoscaling=True, warn_after_s=15, clock=lambda: now[0])
    request = {"CPU": 1, "late": 1}
    with caplog.at_level(logging.WARNING, logger="fasttune.executors._ray_resources"):
        manager.check_fits(request)  # no node has "late" yet: it may come
        assert manager.try_allocate("t1", request) is None
        now[0] = 10.0
        assert manager.try_allocate("t1", request) is None  # no warning yet
        now[0] = 20.0
        assert manager.try_allocate("t1", request) is None  # a warning, once
        assert manager.try_allocate("t1", request) is None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "waiting for the autoscaler" in warnings[0]
    node = ray_connected.add_node(
        num_cpus=1, resources={"late": 1}, object_store_memory=OBJECT_STORE_BYTES
    )
    try:
        deadline = time.monotonic() + 60
        while (allocation := manager.try_allocate("t1", request)) is None:
            assert time.monotonic() < deadline, "the group was never placed on the new node"
            ray.wait(manager.staging_refs(), timeout=1)
        assert allocation.cpu == 1 and allocation.custom == {"late": 1}
        assert "1.0/" in manager.usage_string()
        manager.release("t1")
    finally:
        manager.shutdown()
        ray_connected.remove_node(node)


def test_a_driver_reaching_the_cluster_through_ray_client_runs_the_experiment(
    ray_connected, tmp_path
):
    """``fasttune.init(address="ray://...")`` in a process that is not a node of the
    cluster: trials run on the nodes their resources name, the experiment's files are
    complete, and the connection fasttune opened is closed at the end."""
    storage = str(tmp_path / "results")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FASTTUNE_ADDRESS")}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run(
        [sys.executable, "-m", "tests.executors._ray_client_driver",
         ray_connected.client_address, storage],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:] + client_server_logs(ray_connected)
    outcome = json.loads(lines[0][len("RESULT ") :])
    assert outcome["errors"] == [] and not outcome["still_connected"]
    trials = outcome["trials"]
    assert {rack: t["node"] for rack, t in trials.items()} == {
        "rack_a": node_of("rack_a"),
        "rack_b": node_of("rack_b"),
    }
    for trial in trials.values():
        assert trial["iterations"] == 3 and trial["pid"] != outcome["driver_pid"]
        assert [line["step"] for line in _lines(trial["path"])] == [0, 1, 2]
    assert tune.Tuner.can_restore(os.path.join(storage, "client"))


def test_losing_a_node_resumes_its_trials_on_another_from_their_checkpoints(
    ray_connected, tmp_path
):
    """A spot node runs two trials and is lost mid-run; a replacement node comes, and the
    trials go on there from their last checkpoints: every iteration counted once."""
    cluster = ray_connected
    spot = {"num_cpus": 2, "resources": {"spot": 2}, "object_store_memory": OBJECT_STORE_BYTES}
    first = cluster.add_node(**spot)
    cluster.wait_for_nodes()
    markers = tmp_path / "markers"
    markers.mkdir()
    tuner = tune.Tuner(
        tune.with_resources(Steps, {"cpu": 1, "spot": 1}),
        param_space={"x": tune.grid_search([0, 1]), "sleep": 0.3, "marker_dir": str(markers)},
        run_config=_run_config(
            tmp_path,
            stop={"training_iteration": 10},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
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
    cluster.remove_node(first, allow_graceful=False)  # what the cloud and the autoscaler do
    second = cluster.add_node(**spot)
    driver.join(timeout=180)
    assert not driver.is_alive(), "the experiment did not finish"
    grid = outcome["grid"]
    assert grid.num_errors == 0 and grid.num_terminated == 2
    for result in grid:
        lines = _lines(result.path)
        assert [line["training_iteration"] for line in lines] == list(range(1, 11))
        assert [line["n"] for line in lines] == list(range(1, 11))  # counted on, not restarted
        nodes = [line["node_id"] for line in lines]
        assert nodes[0] == first.node_id and nodes[-1] == second.node_id
        resumed = lines[nodes.index(second.node_id)]
        assert resumed["restored_at"] >= 2  # from a checkpoint taken on the lost node
        with open(os.path.join(result.path, "error.txt")) as f:
            assert "the Ray actor of trial" in f.read()


def client_server_logs(cluster) -> str:
    """The ends of the head's Ray Client server logs (why a driver's session failed)."""
    logs = cluster.head_node.get_logs_dir_path()
    parts = []
    for path in sorted(glob.glob(os.path.join(logs, "ray_client_server*"))):
        with open(path, errors="replace") as f:
            parts.append(f"\n--- {os.path.basename(path)}\n{f.read()[-2000:]}")
    return "".join(parts)
