"""Committing state files to storage: all of one commit or all of the previous one."""

from __future__ import annotations

import json
import os
import uuid

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from fasttune.storage import FsspecFileSystem, get_fs_and_path
from fasttune.storage.state_commit import (
    MANIFEST_FILE,
    STATE_DIR,
    StateCommitter,
    download_state,
    read_manifest,
)

NAMES = ("experiment_state.json", "search_state.pkl", "trial_states.jsonl", "journal")


@pytest.fixture
def remote():
    """(filesystem, root) of a fresh memory:// directory."""
    url = f"memory://state-{uuid.uuid4().hex}"
    fs, root = get_fs_and_path(url)
    yield fs, root
    mem = fsspec.filesystem("memory")
    if mem.exists(root):
        mem.rm(root, recursive=True)


def write_state(directory, version: str, names=NAMES) -> dict[str, bytes]:
    """Write each state file with content naming ``version``; return what was written."""
    os.makedirs(directory, exist_ok=True)
    contents = {name: f"{name}@{version}".encode() for name in names}
    for name, data in contents.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return contents


def downloaded(fs, root, tmp_path) -> dict[str, bytes]:
    target = tmp_path / f"download-{uuid.uuid4().hex[:6]}"
    assert download_state(fs, root, str(target)) is not None
    return {name: (target / name).read_bytes() for name in os.listdir(target)}


def test_a_commit_publishes_every_file_under_the_manifest(remote, tmp_path):
    fs, root = remote
    local = tmp_path / "staging"
    v1 = write_state(local, "v1")
    committer = StateCommitter(fs, root, str(local), NAMES)
    assert committer.commit() is True
    manifest = read_manifest(fs, root)
    assert manifest["generation"] == 1 and set(manifest["files"]) == set(NAMES)
    assert all(f["key"].startswith(f"{STATE_DIR}/00000001/") for f in manifest["files"].values())
    assert downloaded(fs, root, tmp_path) == v1


def test_unchanged_files_are_not_uploaded_again_and_replaced_keys_are_deleted(remote, tmp_path):
    fs, root = remote
    local = tmp_path / "staging"
    write_state(local, "v1")
    committer = StateCommitter(fs, root, str(local), NAMES)
    committer.commit()
    assert committer.commit() is False  # nothing changed: nothing written
    # Rewritten with the same content (a pickle saved at every snapshot): not a change.
    write_state(local, "v1", names=("search_state.pkl",))
    assert committer.commit() is False
    write_state(local, "v2", names=("journal",))
    assert committer.commit() is True
    files = read_manifest(fs, root)["files"]
    assert files["journal"]["key"] == f"{STATE_DIR}/00000002/journal"
    assert files["search_state.pkl"]["key"] == f"{STATE_DIR}/00000001/search_state.pkl"
    stored = {p.strip("/").removeprefix(root.strip("/") + "/") for p in fs.find(root)}
    assert stored == {MANIFEST_FILE} | {f["key"] for f in files.values()}


def test_a_journal_refilled_to_the_same_size_is_a_change(remote, tmp_path):
    fs, root = remote
    local = tmp_path / "staging"
    write_state(local, "v1")
    committer = StateCommitter(fs, root, str(local), NAMES)
    committer.commit()
    path = local / "journal"
    stat = os.stat(path)
    path.write_bytes(b"X" * stat.st_size)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    assert committer.commit() is True
    assert downloaded(fs, root, tmp_path)["journal"] == b"X" * stat.st_size


def test_a_new_committer_continues_the_generations(remote, tmp_path):
    fs, root = remote
    local = tmp_path / "staging"
    write_state(local, "v1")
    StateCommitter(fs, root, str(local), NAMES).commit()
    other = tmp_path / "other_machine"
    assert download_state(fs, root, str(other))
    write_state(other, "v2", names=("journal",))
    committer = StateCommitter(fs, root, str(other), NAMES)
    assert committer.generation == 1
    assert committer.commit() is True
    assert read_manifest(fs, root)["generation"] == 2
    assert downloaded(fs, root, tmp_path)["journal"] == b"journal@v2"


def test_no_manifest_means_no_state(remote, tmp_path):
    fs, root = remote
    assert read_manifest(fs, root) is None
    assert download_state(fs, root, str(tmp_path / "x")) is None


def test_a_manifest_of_an_unknown_format_is_refused(remote):
    fs, root = remote
    fs.write_text_atomic(fs.join(root, MANIFEST_FILE), json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="format 99"):
        read_manifest(fs, root)


class Killed(BaseException):
    """The writer dies here."""


class DyingMemoryFileSystem(MemoryFileSystem):
    """The memory store, whose writer dies after ``budget`` writes or deletions."""

    cachable = False
    budget = -1

    def _spend(self):
        if self.budget == 0:
            raise Killed
        self.budget -= 1

    def pipe_file(self, path, value, *args, **kwargs):
        self._spend()
        return super().pipe_file(path, value, *args, **kwargs)

    def put_file(self, lpath, rpath, *args, **kwargs):
        self._spend()
        return super().put_file(lpath, rpath, *args, **kwargs)

    def rm(self, path, *args, **kwargs):
        self._spend()
        return super().rm(path, *args, **kwargs)


def test_a_writer_killed_at_any_write_leaves_one_complete_commit(tmp_path):
    """Kill the writer before each of its writes in turn: a reader always finds every
    file of the old commit or every file of the new one, never a mix; the next writer
    deletes what the dead one left unnamed."""
    kill_points = 0
    while True:
        dying = DyingMemoryFileSystem()
        fs = FsspecFileSystem(dying)
        root = f"/kill-{uuid.uuid4().hex}"
        local = tmp_path / f"staging-{kill_points}"
        old = write_state(local, "old")
        StateCommitter(fs, root, str(local), NAMES).commit()
        new = write_state(local, "new", names=NAMES[:3])  # the journal is unchanged
        new = {**old, **new}
        committer = StateCommitter(fs, root, str(local), NAMES)
        dying.budget = kill_points
        try:
            committer.commit()
            finished = True
        except Killed:
            finished = False
        dying.budget = -1
        state = downloaded(fs, root, tmp_path)
        assert state == (new if finished else old) or state == new, kill_points
        # A new writer (a restored driver) cleans up and commits.
        StateCommitter(fs, root, str(local), NAMES).commit()
        keys = {f["key"] for f in read_manifest(fs, root)["files"].values()}
        left = {p.strip("/").removeprefix(root.strip("/") + "/") for p in fs.find(root)}
        assert left == keys | {MANIFEST_FILE}
        assert downloaded(fs, root, tmp_path) == new
        dying.rm(root, recursive=True)
        if finished:
            break
        kill_points += 1
    assert kill_points >= 4  # three files, the manifest, the deletions
