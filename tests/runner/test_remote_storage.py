"""Experiments in remote storage, fast: memory:// with the inline executor.

The same paths as S3 (tests/runner/test_s3_storage.py runs them against a real S3
API server with worker processes): staging, commits, checkpoints uploaded by the
loop that made them, restore from storage into an empty staging directory.
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
import uuid

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import fasttune as tune
from fasttune.executors.inline import InlineExecutor
from tests.runner.test_scheduling import ExploitOnce, PauseOnceAtTwo, Tracking


@pytest.fixture
def url(tmp_path, monkeypatch):
    """A fresh memory:// storage path; the staging directory under tmp_path."""
    monkeypatch.setenv("FASTTUNE_STAGING_DIR", str(tmp_path / "staging"))
    root = f"memory://bucket-{uuid.uuid4().hex[:8]}/exps"
    yield root
    memory = fsspec.filesystem("memory")
    bucket = memory._strip_protocol(root).rsplit("/", 1)[0]
    if memory.exists(bucket):
        memory.rm(bucket, recursive=True)


def memory_files(path: str) -> dict[str, bytes]:
    """{path relative to ``path``: content} of every object under a memory:// path."""
    memory = fsspec.filesystem("memory")
    prefix = memory._strip_protocol(path).rstrip("/") + "/"
    return {p[len(prefix) :]: memory.cat_file(p) for p in memory.find(prefix)}


def fit(trainable, url, *, executor=None, **kwargs):
    tune_config = kwargs.pop("tune_config", tune.TuneConfig(metric="i", mode="max"))
    kwargs.setdefault("name", "exp")
    return tune.Tuner(
        trainable,
        param_space=kwargs.pop("param_space", {}),
        tune_config=tune_config,
        run_config=tune.RunConfig(storage_path=url, verbose=0, **kwargs),
        _executor=executor or InlineExecutor(),
    ).fit()


def flaky(config):
    """Counts to 5 with a checkpoint per step; the trial x=2 fails at 3 on its first run."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as local:
            start = json.load(open(os.path.join(local, "state.json")))["i"] + 1
    for i in range(start, 5):
        if config["x"] == 2 and i == 3 and not os.path.exists(config["fixed"]):
            raise RuntimeError("planned failure")
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "state.json"), "w") as f:
            json.dump({"i": i}, f)
        checkpoint = tune.Checkpoint.from_directory(d)
        tune.report({"i": i, "resumed_from": start}, checkpoint=checkpoint)


def test_storage_holds_the_experiment_and_results_are_read_from_it(url, tmp_path):
    fixed = str(tmp_path / "fixed")
    grid = fit(
        flaky,
        url,
        param_space={"x": tune.grid_search([1, 2]), "fixed": fixed},
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
    )
    assert grid.num_terminated == 1 and grid.num_errors == 1
    stored = memory_files(f"{url}/exp")
    errored = next(r for r in grid if r.error is not None)
    trial_dir = errored.path.rsplit("/", 1)[-1]
    assert "planned failure" in stored[f"{trial_dir}/error.txt"].decode()
    assert "planned failure" in str(errored.error)
    # num_to_keep=1: only the latest checkpoint of each trial is left in storage.
    for result, latest in ((errored, "checkpoint_000002"), (grid.get_best_result(), None)):
        name = result.path.rsplit("/", 1)[-1]
        kept = {p.split("/")[1] for p in stored if p.startswith(name + "/checkpoint_")}
        assert kept == {latest or "checkpoint_000004"}
    assert "memory" in errored.checkpoint.filesystem.type_name  # pyarrow's view

    # Another reader, from storage alone.
    analysis = tune.ExperimentAnalysis(f"{url}/exp", default_metric="i", default_mode="max")
    assert sorted(t.status.value for t in analysis.trials) == ["ERROR", "TERMINATED"]
    best = analysis.best_checkpoint
    assert "memory" in best.filesystem.type_name and best.path.endswith("checkpoint_000004")
    with best.as_directory() as local:
        assert json.load(open(os.path.join(local, "state.json"))) == {"i": 4}
    assert list(analysis.trial_dataframes[analysis.best_trial.trial_id]["i"]) == [0, 1, 2, 3, 4]


def test_restore_from_storage_into_an_empty_staging_directory(url, tmp_path, monkeypatch):
    fixed = str(tmp_path / "fixed")
    fit(flaky, url, param_space={"x": tune.grid_search([1, 2]), "fixed": fixed})
    open(fixed, "w").close()
    # Another machine: nothing staged; the checkpoint to resume comes from storage.
    monkeypatch.setenv("FASTTUNE_STAGING_DIR", str(tmp_path / "machine2"))
    experiment = f"{url}/exp"
    assert tune.Tuner.can_restore(experiment)
    tuner = tune.Tuner.restore(
        experiment, trainable=flaky, resume_errored=True, _executor=InlineExecutor()
    )
    grid = tuner.fit()
    assert grid.num_terminated == 2 and grid.num_errors == 0
    resumed = next(r for r in grid if r.config["x"] == 2)
    assert resumed.metrics["resumed_from"] == 3 and resumed.metrics["i"] == 4
    name = resumed.path.rsplit("/", 1)[-1]
    lines = memory_files(experiment)[f"{name}/result.json"].decode().splitlines()
    assert [json.loads(line)["i"] for line in lines] == [0, 1, 2, 3, 4]
    assert tuner.get_results().num_terminated == 2


def test_a_paused_trial_resumes_from_the_checkpoint_its_loop_uploaded(url):
    scheduler = PauseOnceAtTwo()
    grid = fit(
        Tracking,
        url,
        param_space={"x": 1},
        tune_config=tune.TuneConfig(num_samples=2, scheduler=scheduler),
    )
    assert grid.num_terminated == 2
    stored = memory_files(f"{url}/exp")
    for result in grid:
        assert result.metrics["n"] == 6
        name = result.path.rsplit("/", 1)[-1]
        assert f"{name}/checkpoint_000002/.trainable_state.pkl" in stored


def test_an_exploit_copies_the_donors_checkpoint_in_storage(url):
    scheduler = ExploitOnce()
    grid = fit(
        Tracking,
        url,
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(scheduler=scheduler, max_concurrent_trials=1),
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
    )
    assert scheduler.done
    exploited = next(r for r in grid if r.config["x"] == 10)
    stored = memory_files(f"{url}/exp")
    name = exploited.path.rsplit("/", 1)[-1]
    adopted = {p.split("/")[1] for p in stored if p.startswith(f"{name}/checkpoint_")}
    for checkpoint, _ in exploited.best_checkpoints:
        assert checkpoint.path.rsplit("/", 1)[-1] in adopted


def test_a_new_fit_refuses_a_name_that_holds_an_experiment_in_storage(url):
    fit(flaky, url, param_space={"x": 1, "fixed": ""})
    with pytest.raises(ValueError, match=r"already holds an experiment.*Tuner.restore"):
        fit(flaky, url, param_space={"x": 1, "fixed": ""})


def test_memory_storage_with_worker_processes_is_refused(url):
    def trainable(config):
        tune.report({"i": 1})

    with pytest.raises(ValueError, match=r"storage_path='memory://.*worker processes.*inline"):
        tune.Tuner(
            trainable, run_config=tune.RunConfig(storage_path=url, name="x", verbose=0)
        ).fit()


class CountingMemoryFileSystem(MemoryFileSystem):
    """The memory store, counting the uploads of each object."""

    cachable = False
    uploads: collections.Counter = collections.Counter()

    def put_file(self, lpath, rpath, *args, **kwargs):
        self.uploads[rpath] += 1
        return super().put_file(lpath, rpath, *args, **kwargs)


def reporting(config):
    """Reports n = 1..6 with a checkpoint each time (the function API)."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as local:
            start = json.load(open(os.path.join(local, "n.json")))
    for n in range(start + 1, 7):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "n.json"), "w") as f:
            json.dump(n, f)
        tune.report({"n": n}, checkpoint=tune.Checkpoint.from_directory(d))


@pytest.mark.parametrize("trainable", [Tracking, reporting], ids=["class", "function"])
def test_each_checkpoint_is_uploaded_once(tmp_path, monkeypatch, trainable):
    """Periodic, at-end and pause saves, reported checkpoints: one upload each, though a
    pause saves what was just checkpointed again."""
    monkeypatch.setenv("FASTTUNE_STAGING_DIR", str(tmp_path / "staging"))
    store = CountingMemoryFileSystem()
    store.uploads.clear()
    root = f"/once-{uuid.uuid4().hex[:8]}"
    checkpoint_config = tune.CheckpointConfig()
    if trainable is Tracking:
        checkpoint_config = tune.CheckpointConfig(checkpoint_frequency=2, checkpoint_at_end=True)
    grid = tune.Tuner(
        trainable,
        param_space={"x": 1},
        tune_config=tune.TuneConfig(num_samples=2, scheduler=PauseOnceAtTwo()),
        run_config=tune.RunConfig(
            storage_path=root,
            storage_filesystem=store,
            name="exp",
            verbose=0,
            checkpoint_config=checkpoint_config,
        ),
        _executor=InlineExecutor(),
    ).fit()
    assert grid.num_terminated == 2 and all(r.metrics["n"] == 6 for r in grid)
    checkpoint_uploads = {k: n for k, n in store.uploads.items() if "/checkpoint_" in k}
    names = {k.split("/")[-2] for k in checkpoint_uploads}
    assert len(names) >= 3
    assert set(checkpoint_uploads.values()) == {1}, checkpoint_uploads
    store.rm(root, recursive=True)
