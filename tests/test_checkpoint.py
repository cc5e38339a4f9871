"""``Checkpoint``: directories on local disk or fsspec storage, metadata, pickling."""

from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
import uuid

import cloudpickle
import fsspec
import pytest

import fasttune
from fasttune import Checkpoint
from fasttune.checkpoint import storage_filesystem_of
from fasttune.logger import NoopLogger
from fasttune.storage import FsspecFileSystem, LocalFileSystem, get_fs_and_path


@pytest.fixture
def memory_url():
    """A fresh ``memory://`` URL, removed from the in-memory store afterwards."""
    root = f"memory://fasttune-ckpt-{uuid.uuid4().hex}"
    yield root
    mem = fsspec.filesystem("memory")
    inner = mem._strip_protocol(root)
    if mem.exists(inner):
        mem.rm(inner, recursive=True)


@pytest.fixture
def private_tempdir(tmp_path, monkeypatch):
    """Point ``tempfile`` at a private directory, so temp copies can be counted."""
    directory = tmp_path / "tempdir"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


FILES = {
    "model.bin": b"\x00\x01weights",
    ".hidden": b"secret",
    "sub/opt.txt": b"optimizer",
    "sub/deeper/.also_hidden": b"deep",
}


def write_files(directory, files=FILES) -> None:
    for rel, content in files.items():
        path = os.path.join(directory, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)


def read_files(directory) -> dict[str, bytes]:
    found = {}
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, directory).replace(os.sep, "/")] = f.read()
    return found


@pytest.fixture
def local_ckpt(tmp_path) -> Checkpoint:
    src = tmp_path / "ckpt"
    write_files(src)
    (src / "empty").mkdir()
    return Checkpoint.from_directory(str(src))


@pytest.fixture
def memory_ckpt(tmp_path, memory_url) -> Checkpoint:
    src = tmp_path / "upload_src"
    write_files(src)
    (src / "empty").mkdir()
    fs, path = get_fs_and_path(memory_url + "/ckpt")
    fs.upload_dir(str(src), path)
    return Checkpoint(memory_url + "/ckpt")


@pytest.fixture(params=["local", "memory"])
def ckpt(request) -> Checkpoint:
    return request.getfixturevalue(f"{request.param}_ckpt")


# ----------------------------------------------------------------------------- construction
def test_from_directory_is_local_and_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = Checkpoint.from_directory("rel")
    assert isinstance(c, Checkpoint)
    assert isinstance(storage_filesystem_of(c), LocalFileSystem)
    assert c.path == str(tmp_path / "rel")


def test_pathlike_home_and_file_url_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Checkpoint(tmp_path / "a").path == str(tmp_path / "a")
    assert Checkpoint("~/b").path == str(tmp_path / "b")
    assert Checkpoint(f"file://{tmp_path}/c").path == str(tmp_path / "c")
    assert isinstance(storage_filesystem_of(Checkpoint(f"file://{tmp_path}/c")), LocalFileSystem)


def test_memory_url_checkpoint(memory_url):
    c = Checkpoint(memory_url + "/x")
    assert isinstance(storage_filesystem_of(c), FsspecFileSystem)
    assert not storage_filesystem_of(c).is_local
    assert "://" not in c.path
    assert c.path.endswith(memory_url.split("://", 1)[1] + "/x")


def test_filesystem_is_pyarrows_as_in_ray(tmp_path, memory_ckpt, monkeypatch):
    """Ray's Checkpoint.filesystem is a pyarrow filesystem, on which user code calls
    pyarrow; given back to Checkpoint(), it is the same checkpoint."""
    import pyarrow.fs as pafs

    write_files(tmp_path / "ckpt", FILES)
    local = Checkpoint(str(tmp_path / "ckpt"))
    assert isinstance(local.filesystem, pafs.LocalFileSystem)
    assert local.filesystem is local.filesystem  # made once
    info = memory_ckpt.filesystem.get_file_info(f"{memory_ckpt.path}/.hidden")
    assert isinstance(memory_ckpt.filesystem, pafs.FileSystem) and info.size == len(b"secret")
    with memory_ckpt.filesystem.open_input_stream(f"{memory_ckpt.path}/.hidden") as f:
        assert f.read() == b"secret"
    pafs.copy_files(
        memory_ckpt.path,
        str(tmp_path / "copied"),
        source_filesystem=memory_ckpt.filesystem,
        destination_filesystem=pafs.LocalFileSystem(),
    )
    assert read_files(tmp_path / "copied") == FILES
    assert Checkpoint(memory_ckpt.path, filesystem=memory_ckpt.filesystem) == memory_ckpt
    # The user's own pyarrow filesystem comes back as it was given.
    sub = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    assert Checkpoint("ckpt", filesystem=sub).filesystem is sub
    # Unpickled, the view is made again.
    assert isinstance(pickle.loads(pickle.dumps(memory_ckpt)).filesystem, pafs.PyFileSystem)
    # Without pyarrow: fasttune's own filesystem.
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert Checkpoint(str(tmp_path / "ckpt")).filesystem is storage_filesystem_of(local)


def test_explicit_filesystem(memory_ckpt):
    wrapped = Checkpoint(memory_ckpt.path, filesystem=memory_ckpt.filesystem)
    assert wrapped == memory_ckpt
    raw = Checkpoint(memory_ckpt.path, filesystem=fsspec.filesystem("memory"))
    assert isinstance(storage_filesystem_of(raw), FsspecFileSystem)
    assert raw == memory_ckpt
    with raw.as_directory() as local:
        assert read_files(local) == FILES


def test_a_pyarrow_filesystem_as_rays_checkpoint_takes_it(tmp_path):
    pafs = pytest.importorskip("pyarrow.fs")
    write_files(tmp_path / "ckpt", FILES)
    local = Checkpoint(str(tmp_path / "ckpt"), filesystem=pafs.LocalFileSystem())
    assert isinstance(storage_filesystem_of(local), LocalFileSystem)
    with local.as_directory() as d:
        assert read_files(d) == FILES
    sub = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())  # not local to us
    remote = Checkpoint("ckpt", filesystem=sub)
    assert remote.to_directory(str(tmp_path / "copy")) == str(tmp_path / "copy")
    assert read_files(tmp_path / "copy") == FILES


@pytest.mark.parametrize("bad", [123, None, b"/tmp/bytes", ["/tmp/a"], 1.5])
def test_bad_path_type_names_the_parameter(bad):
    with pytest.raises(TypeError, match=r"path=") as info:
        Checkpoint(bad)  # type: ignore[arg-type]
    assert type(bad).__name__ in str(info.value)


def test_bad_filesystem_type_names_the_parameter(tmp_path):
    with pytest.raises(TypeError, match=r"filesystem=.*str"):
        Checkpoint(str(tmp_path), filesystem="s3")  # type: ignore[arg-type]


def test_repr(tmp_path, memory_url):
    assert repr(Checkpoint(str(tmp_path))) == f"Checkpoint(filesystem=local, path={tmp_path})"
    r = repr(Checkpoint(memory_url + "/x"))
    assert r.startswith("Checkpoint(filesystem=memory, path=")
    assert r.endswith("/x)")


# ----------------------------------------------------------------------------- equality
def test_equality_and_hash(tmp_path, memory_url):
    a = Checkpoint(str(tmp_path / "a"))
    assert a == Checkpoint(tmp_path / "a")
    assert hash(a) == hash(Checkpoint(tmp_path / "a"))
    assert a != Checkpoint(str(tmp_path / "b"))
    assert a != str(tmp_path / "a")
    assert len({a, Checkpoint(tmp_path / "a"), Checkpoint(tmp_path / "b")}) == 2

    remote = Checkpoint(memory_url + "/x")
    assert remote == Checkpoint(memory_url + "/x")
    # Same path string on another filesystem is another checkpoint.
    assert Checkpoint(remote.path) != remote
    other_protocol = FsspecFileSystem(fsspec.filesystem("file"))
    assert Checkpoint(remote.path, filesystem=other_protocol) != remote


# ----------------------------------------------------------------------------- to_directory
def test_to_directory_copies_everything(ckpt, tmp_path):
    target = tmp_path / "out"
    returned = ckpt.to_directory(target)
    assert returned == str(target)
    assert read_files(target) == FILES
    assert os.path.isdir(target / "empty")
    with ckpt.as_directory() as source:  # the source is untouched
        assert read_files(source) == FILES


def test_to_directory_merges_into_existing_dir(ckpt, tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "mine.txt").write_text("keep")
    (target / "model.bin").write_bytes(b"stale")
    ckpt.to_directory(str(target))
    assert read_files(target) == {**FILES, "mine.txt": b"keep"}


def test_to_directory_without_path_makes_fresh_temp_dirs(ckpt, private_tempdir):
    first = ckpt.to_directory()
    second = ckpt.to_directory()
    assert first != second
    for d in (first, second):
        assert os.path.dirname(d) == str(private_tempdir)
        assert d != ckpt.path
        assert read_files(d) == FILES
    # They are real copies: changing one changes neither the other nor the source.
    with open(os.path.join(first, "model.bin"), "wb") as f:
        f.write(b"changed")
    assert read_files(second) == FILES
    with ckpt.as_directory() as source:
        assert read_files(source) == FILES


def test_to_directory_of_missing_checkpoint_raises_and_leaks_nothing(
    tmp_path, memory_url, private_tempdir
):
    for missing in (Checkpoint(str(tmp_path / "missing")), Checkpoint(memory_url + "/missing")):
        with pytest.raises(FileNotFoundError):
            missing.to_directory()
        assert os.listdir(private_tempdir) == []


# ----------------------------------------------------------------------------- as_directory
def test_as_directory_local_is_in_place(local_ckpt, private_tempdir):
    with local_ckpt.as_directory() as d:
        assert d == local_ckpt.path
        assert read_files(d) == FILES
        assert os.listdir(private_tempdir) == []  # no copy was made
    assert read_files(local_ckpt.path) == FILES  # and nothing was deleted


def test_as_directory_remote_is_a_temp_copy_removed_afterwards(memory_ckpt, private_tempdir):
    with memory_ckpt.as_directory() as d:
        assert os.path.isdir(d)
        assert os.path.dirname(d) == str(private_tempdir)
        assert read_files(d) == FILES
        assert os.path.isdir(os.path.join(d, "empty"))
    assert not os.path.exists(d)
    assert os.listdir(private_tempdir) == []
    # The remote checkpoint itself is untouched.
    assert fsspec.filesystem("memory").cat_file(f"{memory_ckpt.path}/.hidden") == b"secret"


def test_as_directory_remote_removes_copy_when_block_raises(memory_ckpt, private_tempdir):
    with pytest.raises(RuntimeError, match="inside"), memory_ckpt.as_directory() as d:
        assert read_files(d) == FILES
        raise RuntimeError("inside")
    assert not os.path.exists(d)
    assert os.listdir(private_tempdir) == []


# ----------------------------------------------------------------------------- metadata
def test_metadata_round_trip(ckpt):
    assert ckpt.get_metadata() == {}
    ckpt.set_metadata({"epoch": 3, "tags": ["a", "b"], "nested": {"lr": 0.1}, "none": None})
    assert ckpt.get_metadata() == {
        "epoch": 3,
        "tags": ["a", "b"],
        "nested": {"lr": 0.1},
        "none": None,
    }
    ckpt.update_metadata({"epoch": 4, "extra": True})
    assert ckpt.get_metadata() == {
        "epoch": 4,
        "tags": ["a", "b"],
        "nested": {"lr": 0.1},
        "none": None,
        "extra": True,
    }
    ckpt.set_metadata({"only": 1})  # set replaces
    assert ckpt.get_metadata() == {"only": 1}
    # Another Checkpoint object on the same path reads the same metadata.
    assert Checkpoint(ckpt.path, filesystem=ckpt.filesystem).get_metadata() == {"only": 1}
    # The returned dict is a copy.
    got = ckpt.get_metadata()
    got["only"] = 2
    assert ckpt.get_metadata() == {"only": 1}


def test_metadata_lives_in_metadata_json(local_ckpt, tmp_path):
    local_ckpt.set_metadata({"k": "v"})
    with open(os.path.join(local_ckpt.path, ".metadata.json")) as f:
        assert json.load(f) == {"k": "v"}
    copy = Checkpoint.from_directory(local_ckpt.to_directory(tmp_path / "copy"))
    assert copy.get_metadata() == {"k": "v"}


def test_update_metadata_on_empty_checkpoint(ckpt):
    ckpt.update_metadata({"a": 1})
    ckpt.update_metadata({"b": 2})
    assert ckpt.get_metadata() == {"a": 1, "b": 2}


def test_set_metadata_creates_the_directory(tmp_path, memory_url):
    for c in (Checkpoint(str(tmp_path / "new")), Checkpoint(memory_url + "/new")):
        c.set_metadata({"x": 1})
        assert c.get_metadata() == {"x": 1}


@pytest.mark.parametrize("bad", [None, [("a", 1)], "a=1", 5])
def test_metadata_must_be_a_dict(ckpt, bad):
    ckpt.set_metadata({"kept": True})
    with pytest.raises(TypeError, match=r"set_metadata\(metadata=\.\.\.\) must be a dict"):
        ckpt.set_metadata(bad)
    with pytest.raises(TypeError, match=r"update_metadata\(metadata=\.\.\.\) must be a dict"):
        ckpt.update_metadata(bad)
    assert ckpt.get_metadata() == {"kept": True}


def test_metadata_must_be_json(ckpt):
    ckpt.set_metadata({"kept": True})
    circular: dict = {}
    circular["self"] = circular
    for bad in ({"obj": object()}, {"s": {1, 2}}, {("tuple", "key"): 1}, circular):
        with pytest.raises(TypeError, match="JSON"):
            ckpt.set_metadata(bad)
        with pytest.raises(TypeError, match="JSON"):
            ckpt.update_metadata(bad)
    assert ckpt.get_metadata() == {"kept": True}


# ----------------------------------------------------------------------------- pickling
@pytest.mark.parametrize(
    "dumps,loads", [(pickle.dumps, pickle.loads), (cloudpickle.dumps, pickle.loads)]
)
def test_pickle_round_trip(ckpt, dumps, loads):
    ckpt.set_metadata({"m": 1})
    clone = loads(dumps(ckpt))
    assert clone == ckpt
    assert clone.path == ckpt.path
    assert type(storage_filesystem_of(clone)) is type(storage_filesystem_of(ckpt))
    assert repr(clone) == repr(ckpt)
    assert clone.get_metadata() == {"m": 1}
    with clone.as_directory() as d:
        assert read_files(d) == {**FILES, ".metadata.json": b'{"m": 1}'}


# ----------------------------------------------------------------------------- Trainable
class Stateful(fasttune.Trainable):
    def setup(self, config):
        self.state = config.get("start", 0)

    def step(self):
        self.state += 10
        return {"state": self.state}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "state.txt"), "w") as f:
            f.write(str(self.state))

    def load_checkpoint(self, checkpoint_dir):
        self.loaded_from = checkpoint_dir
        with open(os.path.join(checkpoint_dir, "state.txt")) as f:
            self.state = int(f.read())


def test_trainable_restores_from_memory_checkpoint(tmp_path, memory_url, private_tempdir):
    def logger_creator(name):
        logdir = tmp_path / name
        logdir.mkdir()
        return lambda c: NoopLogger(c, str(logdir))

    source = Stateful(config={"start": 1}, logger_creator=logger_creator("a"))
    try:
        for _ in range(3):
            source.train()
        saved = source.save()
    finally:
        source.stop()

    fs, remote = get_fs_and_path(memory_url + "/trial/checkpoint")
    fs.upload_dir(saved, remote)
    assert "state.txt" in fs.listdir(remote)

    target = Stateful(config={"start": 0}, logger_creator=logger_creator("b"))
    try:
        assert target.state == 0 and target.iteration == 0
        assert target.restore(Checkpoint(memory_url + "/trial/checkpoint")) is True
        assert target.state == 31
        assert target.iteration == 3
        assert target.training_iteration == 3
        # It loaded from a temp copy, which is gone now.
        assert os.path.dirname(target.loaded_from) == str(private_tempdir)
        assert not os.path.exists(target.loaded_from)
        result = target.train()
        assert result["state"] == 41
        assert result["training_iteration"] == 4
        assert result["iterations_since_restore"] == 1
    finally:
        target.stop()
