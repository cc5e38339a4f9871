"""Where an experiment lives: RunConfig(storage_path, storage_filesystem) resolved."""

from __future__ import annotations

import os
import sys

import fsspec
import pytest

from fasttune._support.imports import MissingDependencyError
from fasttune.storage import FsspecFileSystem, LocalFileSystem
from fasttune.storage.location import (
    check_writable,
    experiment_storage,
    locate_experiment,
    reset_staging,
    staging_root,
)


@pytest.fixture(autouse=True)
def _staging(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTTUNE_STAGING_DIR", str(tmp_path / "staging"))
    monkeypatch.delenv("FASTTUNE_STORAGE_PATH", raising=False)


def test_a_local_path_is_written_in_place(tmp_path):
    storage = experiment_storage(str(tmp_path / "results"), None, "exp")
    assert isinstance(storage.filesystem, LocalFileSystem) and not storage.is_remote
    assert storage.path == storage.local_path == storage.uri == str(tmp_path / "results" / "exp")
    assert experiment_storage(f"file://{tmp_path}", None, "e").path == str(tmp_path / "e")


def test_a_url_is_remote_with_a_staging_directory_per_url(tmp_path):
    storage = experiment_storage("memory://bucket/prefix/", None, "exp")
    assert isinstance(storage.filesystem, FsspecFileSystem) and storage.is_remote
    assert storage.uri == "memory://bucket/prefix/exp"
    assert storage.path == "/bucket/prefix/exp"
    assert os.path.dirname(storage.local_path) == str(tmp_path / "staging")
    assert os.path.basename(storage.local_path).startswith("exp-")
    other = experiment_storage("memory://other-bucket", None, "exp")
    assert other.local_path != storage.local_path
    assert storage.mirror.remote_path(os.path.join(storage.local_path, "t")) == f"{storage.path}/t"


def test_the_default_staging_root_is_in_the_local_results_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("FASTTUNE_STAGING_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert staging_root() == str(tmp_path / "home" / "fasttune_results" / "_staging")
    monkeypatch.setenv("FASTTUNE_STORAGE_PATH", "memory://bucket")
    assert staging_root() == str(tmp_path / "home" / "fasttune_results" / "_staging")
    assert experiment_storage(None, None, "exp").uri == "memory://bucket/exp"


def test_a_storage_filesystem_takes_a_path_inside_it():
    memory = fsspec.filesystem("memory")
    storage = experiment_storage("bucket/prefix", memory, "exp")
    assert storage.is_remote and storage.path == "/bucket/prefix/exp"
    assert storage.filesystem.fs is memory
    # A URL with the scheme is accepted too, as is a fasttune FileSystem.
    assert experiment_storage("memory://bucket/prefix", memory, "exp").path == storage.path
    wrapped = FsspecFileSystem(memory)
    assert experiment_storage("bucket", wrapped, "exp").filesystem is wrapped


def test_a_local_fsspec_filesystem_is_local_storage(tmp_path):
    storage = experiment_storage(str(tmp_path), fsspec.filesystem("file"), "exp")
    assert not storage.is_remote and storage.local_path == str(tmp_path / "exp")


def test_a_pyarrow_filesystem_is_accepted(tmp_path):
    pafs = pytest.importorskip("pyarrow.fs")
    local = experiment_storage(str(tmp_path), pafs.LocalFileSystem(), "exp")
    assert not local.is_remote
    memory = pafs.PyFileSystem(pafs.FSSpecHandler(fsspec.filesystem("memory")))
    storage = experiment_storage("/bucket/p", memory, "exp")
    assert storage.is_remote
    storage.filesystem.write_text_atomic(storage.filesystem.join(storage.path, "f"), "x")
    assert fsspec.filesystem("memory").cat_file("/bucket/p/exp/f") == b"x"


def test_a_storage_filesystem_without_a_path_is_refused():
    with pytest.raises(ValueError, match=r"RunConfig\(storage_filesystem=.*needs storage_path"):
        experiment_storage(None, fsspec.filesystem("memory"), "exp")


def test_something_else_as_storage_filesystem_is_refused():
    with pytest.raises(TypeError, match=r"RunConfig\(storage_filesystem=\.\.\.\) must be .*str"):
        experiment_storage("bucket", "s3", "exp")


def test_an_unknown_scheme_is_refused():
    with pytest.raises(ValueError) as info:
        experiment_storage("nosuchscheme://bucket/prefix", None, "exp")
    message = str(info.value)
    assert "RunConfig(storage_path='nosuchscheme://bucket/prefix')" in message
    assert "unknown storage scheme 'nosuchscheme'" in message
    assert 'pip install "fasttune[s3]"' in message


def test_a_missing_s3fs_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if it were not installed
    registry = sys.modules["fsspec.registry"]._registry  # s3fs registers itself on import
    monkeypatch.delitem(registry, "s3", raising=False)
    with pytest.raises(MissingDependencyError) as info:
        experiment_storage("s3://bucket/prefix", None, "exp")
    message = str(info.value)
    assert "RunConfig(storage_path='s3://bucket/prefix') needs s3fs" in message
    assert 'pip install "fasttune[s3]"' in message


def test_locate_experiment_splits_name_and_root(tmp_path):
    storage = locate_experiment("memory://bucket/prefix/exp/")
    assert storage.name == "exp" and storage.uri == "memory://bucket/prefix/exp"
    local = locate_experiment(str(tmp_path / "exp"))
    assert local.name == "exp" and local.path == str(tmp_path / "exp")
    for bucket_only in ("memory://", "s3://bucket/"):
        with pytest.raises(ValueError, match=r"Tuner.restore\(path='.*'\): expected an exp"):
            locate_experiment(bucket_only)


def test_reset_staging_empties_only_a_remote_experiments_staging(tmp_path):
    storage = experiment_storage("memory://bucket", None, "exp")
    os.makedirs(os.path.join(storage.local_path, "old"))
    reset_staging(storage)
    assert os.listdir(storage.local_path) == []
    local = experiment_storage(str(tmp_path / "r"), None, "exp")
    os.makedirs(os.path.join(local.local_path, "kept"))
    reset_staging(local)
    assert os.listdir(local.local_path) == ["kept"]


def test_check_writable_names_the_value_and_what_to_do(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    storage = experiment_storage(str(blocker), None, "exp")
    with pytest.raises(ValueError, match=r"storage_path='x'\) is not writable.*FASTTUNE_STORAGE"):
        check_writable(storage, "x")
    remote = experiment_storage("memory://bucket", None, "exp")
    check_writable(remote, "memory://bucket")  # the probe is written and removed
    assert fsspec.filesystem("memory").find(remote.path) == []


def test_reset_staging_refuses_while_a_driver_runs_from_it():
    from fasttune.storage.experiment_lock import ExperimentInUseError, ExperimentLock

    storage = experiment_storage("memory://bucket", None, "exp")
    reset_staging(storage)
    with open(os.path.join(storage.local_path, "result.json"), "w") as f:
        f.write("{}\n")
    # The lock a running driver holds (fcntl locks are per open file here too).
    with ExperimentLock(storage.local_path):
        with pytest.raises(ExperimentInUseError, match="being run by another driver"):
            reset_staging(storage)
        assert os.path.exists(os.path.join(storage.local_path, "result.json"))
    reset_staging(storage)
    assert os.listdir(storage.local_path) == []
