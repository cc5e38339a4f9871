"""Experiments on the Ray executor through the public API: choosing it, connections,
reuse, checkpoints, stop criteria, retries, pause/resume (PBT, HyperBand), changed
resources and ``with_parameters``, as on the local executor."""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'fasttune[ray]'")

import fasttune as tune  # noqa: E402
from fasttune.schedulers.pbt import PopulationBasedTraining  # noqa: E402
from fasttune.schedulers.resource_changing_scheduler import (  # noqa: E402
    DistributeResources,
    ResourceChangingScheduler,
)
from tests.executors._ray_trainables import (  # noqa: E402
    Steps,
    checkpointing_fn,
    child_task_fn,
    data_fn,
    endless_fn,
    where_fn,
)
from tests.schedulers._population_trainables import Climber, ResourceReporter  # noqa: E402
from tests.schedulers.test_hyperband_runs import (  # noqa: E402
    check_final_iterations,
    counting,
    hyperband_tuner,
)


@pytest.fixture
def run_config(tmp_path):
    def make(**kwargs: Any) -> tune.RunConfig:
        kwargs.setdefault("storage_path", str(tmp_path / "results"))
        kwargs.setdefault("name", "exp")
        kwargs.setdefault("verbose", 0)
        return tune.RunConfig(**kwargs)

    return make


@pytest.fixture
def no_address():
    """Whatever address a test declares is forgotten after it."""
    yield
    tune.shutdown()


def _lines(path: str) -> list[dict]:
    with open(os.path.join(path, "result.json")) as f:
        return [json.loads(line) for line in f]


def _fit(trainable, run_config, n=3, verbose=0, **tune_kwargs) -> Any:
    return tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search(list(range(n)))},
        tune_config=tune.TuneConfig(**tune_kwargs),
        run_config=run_config(verbose=verbose),
    ).fit()


# ------------------------------------------------------------------ choosing Ray
# These run first, while this process is not connected (the module connects later).
@pytest.mark.parametrize("how", ["init", "env", "ray_env"])
def test_fasttune_opens_a_connection_and_closes_it_at_the_end(
    ray_cluster, run_config, no_address, monkeypatch, how
):
    assert not ray.is_initialized()
    if how == "init":
        tune.init(address=ray_cluster.address)
    elif how == "env":
        monkeypatch.setenv("FASTTUNE_ADDRESS", ray_cluster.address)
    else:  # as `ray job submit` sets it
        monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    # The progress table's last line (usage figures) comes after the executor closed.
    grid = _fit(where_fn, run_config, n=2, verbose=1)
    assert grid.num_errors == 0 and grid.num_terminated == 2
    assert all(r.metrics["actor_id"] and r.metrics["pid"] != os.getpid() for r in grid)
    assert not ray.is_initialized()  # it opened the connection, so it closed it


def test_without_ray_connection_or_address_trials_run_locally(run_config):
    assert not ray.is_initialized()
    grid = _fit(where_fn, run_config, n=2)
    assert all(r.metrics["actor_id"] is None for r in grid)


def test_tuner_has_ray_prepare_the_first_actor_start_before_fit(ray_cluster, run_config):
    # Ray builds a driver's serialization context (importing pyarrow and pydantic,
    # ~0.2 s) before its first actor can start; Tuner() has it built in the background.
    ray.init(address=ray_cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        driver = ray._private.worker.global_worker
        assert driver.current_job_id not in driver.serialization_context_map
        tune.Tuner(where_fn, param_space={"x": 1}, run_config=run_config())
        deadline = time.monotonic() + 30
        while driver.current_job_id not in driver.serialization_context_map:
            assert time.monotonic() < deadline, "Tuner() left Ray's first actor start unprepared"
            time.sleep(0.01)
    finally:
        ray.shutdown()


def test_init_with_an_address_readies_the_connection_this_process_has(ray_cluster, no_address):
    # Where the script says it runs on Ray, Ray's first-object costs are paid at once
    # (as `from ray import tune` pays the imports among them), not in fit().
    ray.init(address=ray_cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        driver = ray._private.worker.global_worker
        assert driver.current_job_id not in driver.serialization_context_map
        tune.init(address="auto")
        assert driver.current_job_id in driver.serialization_context_map
    finally:
        ray.shutdown()
    tune.init(address=ray_cluster.address)  # not connected: nothing to ready, no connection
    assert not ray.is_initialized()


def test_a_connected_process_runs_trials_on_ray_and_stays_connected(ray_connected, run_config):
    job = ray.get_runtime_context().get_job_id()
    grid = _fit(where_fn, run_config, n=3)
    assert grid.num_terminated == 3
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert all(r.metrics["actor_id"] and r.metrics["node_id"] in nodes for r in grid)
    assert ray.is_initialized() and ray.get_runtime_context().get_job_id() == job


def test_address_local_forces_local_workers(ray_connected, run_config, no_address):
    tune.init(address="local")
    grid = _fit(where_fn, run_config, n=2)
    assert all(r.metrics["actor_id"] is None for r in grid)
    assert ray.is_initialized()


# ------------------------------------------------------------------ as on local workers
def test_reused_actors_host_trial_after_trial(ray_connected, run_config):
    grid = _fit(where_fn, run_config, n=6, reuse_actors=True, max_concurrent_trials=2)
    assert grid.num_terminated == 6
    assert len({r.metrics["actor_id"] for r in grid}) <= 2


def test_without_reuse_each_trial_gets_a_new_actor(ray_connected, run_config):
    grid = tune.Tuner(
        Steps,
        param_space={"x": tune.grid_search([0, 1, 2])},
        tune_config=tune.TuneConfig(reuse_actors=False, max_concurrent_trials=1),
        run_config=run_config(stop={"training_iteration": 2}),
    ).fit()
    assert len({r.metrics["actor_id"] for r in grid}) == 3


def test_checkpoint_frequency_checkpoint_at_end_and_stop_criteria(ray_connected, run_config):
    checkpoints = tune.CheckpointConfig(checkpoint_frequency=2, checkpoint_at_end=True)
    grid = tune.Tuner(
        Steps,
        run_config=run_config(stop={"n": 5}, checkpoint_config=checkpoints),
    ).fit()
    result = grid[0]
    assert [line["n"] for line in _lines(result.path)] == [1, 2, 3, 4, 5]  # not one more
    saved = sorted(
        json.load(open(os.path.join(c.path, "n.json"))) for c, _ in result.best_checkpoints
    )
    assert saved == [2, 4, 5]


def test_a_dead_actor_is_retried_from_its_last_checkpoint(ray_connected, run_config, tmp_path):
    grid = tune.Tuner(
        Steps,
        param_space={"die_at": 4, "marker_dir": str(tmp_path)},
        run_config=run_config(
            stop={"training_iteration": 6},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    ).fit()
    assert grid.num_errors == 0
    lines = _lines(grid[0].path)
    # Every iteration once, counted on from the checkpoint: the retry restored the last
    # checkpoint the driver heard of. That is 3, or 2 when the reply carrying iteration 3
    # died with the process (Ray sends a reply after the call returns; os._exit in the
    # next call may come first), and then iteration 3 ran again.
    assert [line["training_iteration"] for line in lines] == [1, 2, 3, 4, 5, 6]
    assert [line["n"] for line in lines] == [1, 2, 3, 4, 5, 6]
    restored = lines[-1]["restored_at"]
    assert restored in (2, 3) and lines[restored]["restored_at"] == restored
    assert len({line["actor_id"] for line in lines}) == 2
    with open(os.path.join(grid[0].path, "error.txt")) as f:
        assert "the Ray actor of trial" in f.read()


def test_a_trial_whose_actor_died_fails_with_rays_error(ray_connected, run_config, tmp_path):
    """As in Ray Tune: Result.error (and what fail_fast="raise" raises) is Ray's
    ActorDiedError, the documented way to tell a lost process from the code's error.

    It dies at its third step, 0.2 s in: dying in the call right after the one that
    started it, the actor could lose that call's reply (Ray sends it after the call
    returns), and the driver would then take the trial for one that never ran on an
    actor that had died idle, and start it again on a new one."""
    space = {"die_at": 3, "sleep": 0.1, "marker_dir": str(tmp_path)}
    grid = tune.Tuner(Steps, param_space=space, run_config=run_config(name="error")).fit()
    assert grid.num_errors == 1
    assert isinstance(grid.errors[0], ray.exceptions.ActorDiedError)
    assert isinstance(grid[0].error, ray.exceptions.RayActorError)
    with pytest.raises(ray.exceptions.ActorDiedError):
        tune.Tuner(
            Steps,
            param_space=space,
            run_config=run_config(
                name="raise", failure_config=tune.FailureConfig(fail_fast="raise")
            ),
        ).fit()


def test_a_function_trial_training_in_a_thread_is_retried_from_its_last_checkpoint(
    ray_connected, run_config, tmp_path
):
    # FIFO, no stopper: nothing decides on a result, so the function trains in a thread
    # of its actor; the process dies there, and the retry resumes from the checkpoint.
    grid = tune.Tuner(
        checkpointing_fn,
        param_space={"steps": 6, "die_at": 4, "marker_dir": str(tmp_path)},
        run_config=run_config(failure_config=tune.FailureConfig(max_failures=1)),
    ).fit()
    assert grid.num_errors == 0
    lines = _lines(grid[0].path)
    assert {line["thread"] for line in lines} == {"fasttune-trial"}
    assert [line["training_iteration"] for line in lines] == [1, 2, 3, 4, 5, 6]
    assert [line["n"] for line in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[-1]["restored_at"] == 3  # the checkpoint of iteration 3, uploaded first
    assert len({line["actor_id"] for line in lines}) == 2
    assert grid[0].checkpoint is not None


def test_a_time_budget_stops_function_trials_training_in_threads(ray_connected, run_config):
    # Each stop reaches its trial's end after the function's cleanup, not with the reply
    # to the stop call: fit() returns with every trial stopped.
    grid = tune.Tuner(
        endless_fn,
        param_space={"cleanup_s": 0.2},
        # Not reused: a trial's stop runs the function's cleanup before TrialStopped.
        # 3 s: each trial's new actor takes ~1 s to start, more on a loaded machine, and
        # both must have reported before the budget ends (1.5 s failed once under load).
        tune_config=tune.TuneConfig(num_samples=2, time_budget_s=3.0, reuse_actors=False),
        run_config=run_config(name="budget"),
    ).fit()
    assert grid.num_errors == 0 and grid.num_terminated == 2
    assert all(r.metrics["n"] > 0 and r.metrics["thread"] == "fasttune-trial" for r in grid)


def test_hyperband_pauses_and_resumes_trials_from_checkpoints(ray_connected, run_config):
    grid = hyperband_tuner(counting, run_config).fit()
    lines = check_final_iterations(grid)
    assert any(lines[x][3]["iterations_since_restore"] == 1 for x in (6, 7))  # resumed


def test_pbt_exploits_on_ray(ray_connected, run_config):
    random.seed(0)
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        hyperparam_mutations={"lr": [0.1, 0.2, 0.4, 0.8]},
        quantile_fraction=0.25,
        resample_probability=0.0,
        synch=True,  # actors start one by one: the population waits at each interval
    )
    grid = tune.Tuner(
        Climber,
        param_space={"lr": tune.grid_search([0.1, 0.2, 0.4, 0.8])},
        tune_config=tune.TuneConfig(scheduler=pbt, metric="score", mode="max", reuse_actors=True),
        run_config=run_config(stop={"training_iteration": 6}),
    ).fit()
    assert grid.num_terminated == 4 and pbt._num_perturbations >= 1
    origins = [[line["origin"] for line in _lines(r.path)] for r in grid]
    assert any(len(set(trial)) > 1 for trial in origins)  # a trial went on from another's model


def test_resource_changing_scheduler_grows_a_trial_over_the_cluster(ray_connected, run_config):
    total = int(ray.cluster_resources()["CPU"])
    scheduler = ResourceChangingScheduler(
        resources_allocation_function=DistributeResources(add_bundles=True)
    )
    grid = tune.Tuner(
        ResourceReporter,
        tune_config=tune.TuneConfig(scheduler=scheduler),
        run_config=run_config(stop={"training_iteration": 4}),
    ).fit()
    lines = _lines(grid[0].path)
    assert [line["n"] for line in lines] == [1, 2, 3, 4]  # continued from its checkpoint
    assert [line["cpus"] for line in lines] == [1, total, total, total]


def test_a_child_task_that_no_spare_bundle_holds_fails_its_trial_at_once(ray_connected, run_config):
    # Ray would leave it pending for ever, the trial waiting on it; Ray Tune raises.
    grid = tune.Tuner(
        tune.with_resources(child_task_fn, {"cpu": 1}),
        param_space={"cpus": 1},
        run_config=run_config(name="no_spare"),
    ).fit()
    assert grid.num_errors == 1
    error = grid[0].error
    assert isinstance(error, RuntimeError), error
    assert "no bundle of this trial's placement group left free can hold" in str(error)
    assert "PlacementGroupFactory([{'CPU': 1.0}] + [{'CPU': 1.0}] * N)" in str(error)
    spare = tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}])
    grid = tune.Tuner(
        tune.with_resources(child_task_fn, spare),
        param_space={"cpus": 1},
        run_config=run_config(name="spare"),
    ).fit()
    assert grid.num_errors == 0 and grid[0].metrics["value"] == 1


def test_with_parameters_objects_reach_every_actor(ray_connected, run_config):
    data = os.urandom(3 * 2**20)
    grid = _fit(tune.with_parameters(data_fn, data=data), run_config, n=3, reuse_actors=False)
    assert [r.metrics["size"] for r in grid] == [len(data)] * 3
    assert len({r.metrics["actor_id"] for r in grid}) == 3


def _groups() -> dict[str, str]:
    """Placement group id -> state, of every group this cluster has had."""
    from ray.util import placement_group_table

    return {pg_id: info["state"] for pg_id, info in placement_group_table().items()}


def test_the_group_asked_for_as_fit_begins_is_the_first_trials(ray_connected, run_config):
    """fit() asks for the trainable's group (and starts its actor) before the run is set
    up; the first trial takes that group: one group for a one-trial run."""
    before = _groups()
    trainable = tune.with_resources(where_fn, {"cpu": 2})
    grid = tune.Tuner(trainable, run_config=run_config()).fit()
    assert grid.num_terminated == 1
    new = {pg: state for pg, state in _groups().items() if pg not in before}
    assert list(new.values()) == ["REMOVED"]


def test_a_prepared_group_of_another_shape_is_dropped_for_a_request(ray_connected):
    """A hint of the wrong shape (resources that turned out to depend on the config)
    never holds resources a trial waits for."""
    from fasttune.executors._ray_resources import RayResourceManager

    manager = RayResourceManager(ray, autoscaling=False)
    before = _groups()
    manager.prepare({"CPU": 1, "head": 1})
    [hinted] = [pg for pg in _groups() if pg not in before]
    allocation = None
    deadline = time.monotonic() + 60
    while allocation is None:  # a request of another shape: the hint goes
        assert time.monotonic() < deadline
        allocation = manager.try_allocate("t", {"CPU": 2, "head": 1})
        time.sleep(0.05)
    assert _groups()[hinted] == "REMOVED"
    manager.shutdown()
