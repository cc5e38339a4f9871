"""Publishing a staging directory: what is uploaded, in which order, and when."""

from __future__ import annotations

import os
import uuid

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from fasttune.storage import FsspecFileSystem, get_fs_and_path
from fasttune.storage.mirror import StorageMirror
from fasttune.storage.state_commit import read_manifest
from fasttune.storage.sync import ExperimentSync

STATE = ("experiment_state.json", "search_state.pkl")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def new_sync(mirror) -> ExperimentSync:
    """A sync whose clock stands still, so that it is always due."""
    return ExperimentSync(mirror, STATE, clock=Clock())


@pytest.fixture(params=["memory", "s3"])
def mirror(request, tmp_path):
    """A staging directory and its storage: memory://, and a real S3 API server."""
    if request.param == "s3":
        url = f"s3://{request.getfixturevalue('s3_bucket')}/sync"
    else:
        url = f"memory://sync-{uuid.uuid4().hex}"
    fs, root = get_fs_and_path(url)
    staging = tmp_path / "staging"
    staging.mkdir()
    yield StorageMirror(fs, str(staging), root)
    if request.param == "memory":
        mem = fsspec.filesystem("memory")
        if mem.exists(root):
            mem.rm(root, recursive=True)


def write(path, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def write_files(root, files: dict[str, bytes]) -> None:
    """Write each ``{path relative to root: content}``."""
    for rel, data in files.items():
        write(f"{root}/{rel}", data)


def stored(mirror) -> dict[str, bytes]:
    """{path relative to the storage root: content} of every stored object."""
    fs, root = mirror.filesystem, mirror.root.strip("/")
    return {p.strip("/")[len(root) + 1 :]: fs.read_bytes(p) for p in fs.find(mirror.root)}


def test_trial_files_go_up_whole_checkpoints_and_hidden_files_do_not(mirror):
    local = mirror.local_root
    write_files(
        local,
        {
            "t1/result.json": b"1\n",
            "t1/.driver.lock": b"x",
            "t1/checkpoint_000000/model.bin": b"weights",
            "pbt_global.txt": b"policy",
            "experiment_state.json": b"{}",
        },
    )
    sync = new_sync(mirror)
    sync.sync([("t1", False)])
    files = stored(mirror)
    assert files["t1/result.json"] == b"1\n"
    assert files["pbt_global.txt"] == b"policy"
    assert not any("checkpoint_" in p or ".driver.lock" in p for p in files)
    assert "experiment_state.json" not in files  # state files only through the commit
    assert read_manifest(mirror.filesystem, mirror.root)["files"].keys() == {
        "experiment_state.json"
    }

    # Appended: the whole file again (an object store has no append).
    write(f"{local}/t1/result.json", b"1\n2\n")
    sync.sync([("t1", False)])
    assert stored(mirror)["t1/result.json"] == b"1\n2\n"
    assert sync.stats.files_uploaded == 3


@pytest.mark.parametrize("artifacts", [False, True])
def test_a_trials_own_subdirectories_go_up_with_sync_artifacts(mirror, artifacts):
    # SyncConfig(sync_artifacts=True), as in Ray: what a trial writes under its
    # directory reaches storage; its checkpoints stay its worker's to upload.
    local = mirror.local_root
    write_files(
        local,
        {
            "t1/result.json": b"1\n",
            "t1/plots/a/loss.png": b"png",
            "t1/.hidden/x": b"x",
            "t1/checkpoint_000000/model.bin": b"weights",
            "t1/checkpoint_000000/sub/more.bin": b"weights",
        },
    )
    sync = ExperimentSync(mirror, STATE, clock=Clock(), artifacts=artifacts)
    sync.sync([("t1", False)])
    files = stored(mirror)
    assert ("t1/plots/a/loss.png" in files) is artifacts
    assert not any("checkpoint_" in p or ".hidden" in p for p in files)
    if artifacts:  # changed and removed artifacts follow, as trial files do
        write(f"{local}/t1/plots/a/loss.png", b"png2")
        os.remove(f"{local}/t1/result.json")
        sync.sync([("t1", False)])
        assert stored(mirror)["t1/plots/a/loss.png"] == b"png2"


def test_unchanged_files_are_skipped(mirror):
    write(f"{mirror.local_root}/t1/result.json", b"1\n")
    write(f"{mirror.local_root}/t1/params.json", b"{}")
    sync = new_sync(mirror)
    sync.sync([("t1", False)])
    sync.sync([("t1", False)])
    assert sync.stats.files_uploaded == 2 and sync.stats.syncs == 2


def test_a_finished_trials_directory_is_scanned_once_more_then_never(mirror):
    local = mirror.local_root
    write(f"{local}/t1/result.json", b"1\n")
    sync = new_sync(mirror)
    sync.sync([("t1", True)])
    write(f"{local}/t1/late.txt", b"written after the trial finished")
    sync.sync([("t1", True)])
    assert "t1/late.txt" not in stored(mirror)


class RecordingMemoryFileSystem(MemoryFileSystem):
    """The memory store, noting the name of each object written, in order."""

    cachable = False

    def __init__(self, *args, on_write=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.written: list[str] = []
        self.on_write = on_write

    def pipe_file(self, path, value, *args, **kwargs):
        self.written.append(path.rsplit("/", 1)[-1])
        if self.on_write:
            self.on_write()
        return super().pipe_file(path, value, *args, **kwargs)

    def put_file(self, lpath, rpath, *args, **kwargs):
        self.written.append(rpath.rsplit("/", 1)[-1])
        if self.on_write:
            self.on_write()
        return super().put_file(lpath, rpath, *args, **kwargs)


def recording_mirror(tmp_path, **kwargs):
    store = RecordingMemoryFileSystem(**kwargs)
    staging = tmp_path / "rec_staging"
    staging.mkdir()
    return store, StorageMirror(FsspecFileSystem(store), str(staging), f"/rec-{uuid.uuid4().hex}")


def test_state_is_committed_after_the_trial_files_it_refers_to(tmp_path):
    """A reader that sees a commit sees every trial file written before it."""
    store, mirror = recording_mirror(tmp_path)
    local = mirror.local_root
    write(f"{local}/t1/result.json", b"1\n")
    write(f"{local}/experiment_state.json", b'{"results": 1}')
    new_sync(mirror).sync([("t1", False)])
    assert store.written == [
        "result.json",
        "experiment_state.json",
        "experiment_state.manifest.json",
    ]
    store.rm(mirror.root, recursive=True)


def test_deletions_wait_for_the_commit_and_vanished_files_follow(mirror):
    local = mirror.local_root
    fs = mirror.filesystem
    write(f"{local}/t1/checkpoint_000000/model.bin", b"w")
    mirror.upload_dir(f"{local}/t1/checkpoint_000000")  # as the worker does
    write(f"{local}/t1/events.out.tfevents.1", b"e")
    sync = new_sync(mirror)
    sync.sync([("t1", False)])
    sync.delete_later([f"{local}/t1/checkpoint_000000"])
    assert "t1/checkpoint_000000/model.bin" in stored(mirror)  # not before the next commit
    os.remove(f"{local}/t1/events.out.tfevents.1")
    write(f"{local}/experiment_state.json", b"{}")
    sync.sync([("t1", False)])
    assert stored(mirror).keys() == {
        "experiment_state.manifest.json",
        *(f["key"] for f in read_manifest(fs, mirror.root)["files"].values()),
    }


def test_syncing_takes_at_most_its_share_of_the_drivers_time(tmp_path):
    clock = Clock()

    def slow_write():
        clock.now += 1.0  # each write to the store takes a second

    store, mirror = recording_mirror(tmp_path, on_write=slow_write)
    sync = ExperimentSync(mirror, STATE, clock=clock, max_share=0.1)
    write(f"{mirror.local_root}/experiment_state.json", b"1")
    assert sync.sync([]) is True  # two writes (state, manifest): t = 0..2, next due at 20
    clock.now = 15.0
    write(f"{mirror.local_root}/experiment_state.json", b"2")
    assert sync.sync([]) is False
    assert sync.sync([], force=True) is True  # the end of a run always syncs
    clock.now = 18.0 + 20.0
    write(f"{mirror.local_root}/experiment_state.json", b"3")
    assert sync.sync([]) is True
    assert sync.stats.syncs == 3 and sync.stats.commits == 3
    store.rm(mirror.root, recursive=True)


def test_mirror_maps_staging_paths_and_refuses_others(mirror, tmp_path):
    assert mirror.remote_path(mirror.local_root) == mirror.root
    assert mirror.remote_path(os.path.join(mirror.local_root, "t", "c")) == f"{mirror.root}/t/c"
    with pytest.raises(ValueError, match="not inside the staging directory"):
        mirror.remote_path(str(tmp_path / "elsewhere"))


def test_mirror_fetches_a_checkpoint_whole_or_not_at_all(mirror):
    local = mirror.local_root
    write(f"{local}/t/checkpoint_000001/a/b.bin", b"deep")
    mirror.upload_dir(f"{local}/t/checkpoint_000001")
    os.rename(f"{local}/t", f"{local}/moved")
    assert mirror.fetch_dir(f"{local}/t/checkpoint_000001") is True
    with open(f"{local}/t/checkpoint_000001/a/b.bin", "rb") as f:
        assert f.read() == b"deep"
    assert os.listdir(f"{local}/t") == ["checkpoint_000001"]  # no partial download left
    assert mirror.fetch_dir(f"{local}/t/checkpoint_000009") is False
    assert os.listdir(f"{local}/t") == ["checkpoint_000001"]


def test_mirror_fetch_files_takes_only_the_top_level_files(mirror):
    local = mirror.local_root
    write(f"{local}/t/result.json", b"r")
    write(f"{local}/t/checkpoint_000000/x", b"c")
    mirror.filesystem.upload_dir(f"{local}/t", mirror.remote_path(f"{local}/t"))
    os.rename(f"{local}/t", f"{local}/old")
    mirror.fetch_files([f"{local}/t", f"{local}/missing"])
    assert os.listdir(f"{local}/t") == ["result.json"]


def test_mirror_copies_in_storage(mirror):
    local = mirror.local_root
    write(f"{local}/a/checkpoint_000000/x", b"donor")
    mirror.upload_dir(f"{local}/a/checkpoint_000000")
    mirror.copy_dir(f"{local}/a/checkpoint_000000", f"{local}/b/checkpoint_000003")
    assert stored(mirror)["b/checkpoint_000003/x"] == b"donor"
    assert not os.path.exists(f"{local}/b")  # nothing travelled through this machine
