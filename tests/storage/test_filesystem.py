"""The storage layer: path dispatch, the backend operations, and atomic writes."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
import uuid

import fsspec
import pytest

import fasttune
from fasttune.storage import (
    FsspecFileSystem,
    LocalFileSystem,
    atomic_open,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    get_fs_and_path,
    is_url,
)
from fasttune.storage.filesystem import FileSystem

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fasttune.__file__)))


@pytest.fixture
def memory_url():
    """A fresh ``memory://`` directory URL, removed from the in-memory store afterwards."""
    root = f"memory://fasttune-test-{uuid.uuid4().hex}"
    yield root
    mem = fsspec.filesystem("memory")
    inner = mem._strip_protocol(root)
    if mem.exists(inner):
        mem.rm(inner, recursive=True)


@pytest.fixture(params=["local", "memory"])
def backend(request, tmp_path, memory_url) -> tuple[FileSystem, str]:
    """(filesystem, root directory within it) for each storage backend."""
    url = str(tmp_path / "root") if request.param == "local" else memory_url
    fs, root = get_fs_and_path(url)
    fs.makedirs(root)
    return fs, root


def make_tree(directory) -> dict[str, bytes]:
    """Fill ``directory`` with nested, hidden and binary files; return {relpath: content}."""
    files = {
        "top.txt": b"top",
        ".hidden": b"dot file",
        "sub/inner.bin": bytes(range(256)) * 4,
        "sub/deeper/leaf.json": b'{"a": 1}',
        "sub/.also_hidden/x": b"x",
    }
    for rel, content in files.items():
        path = os.path.join(directory, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
    os.makedirs(os.path.join(directory, "empty_dir"))
    return files


def read_tree(directory) -> tuple[dict[str, bytes], set[str]]:
    """({relpath: content} of every file, set of every directory relpath) under ``directory``."""
    files, dirs = {}, set()
    for root, subdirs, names in os.walk(directory):
        rel_root = os.path.relpath(root, directory)
        for d in subdirs:
            dirs.add(os.path.normpath(os.path.join(rel_root, d)).replace(os.sep, "/"))
        for name in names:
            rel = os.path.normpath(os.path.join(rel_root, name)).replace(os.sep, "/")
            with open(os.path.join(root, name), "rb") as f:
                files[rel] = f.read()
    return files, dirs


# ----------------------------------------------------------------------------- dispatch
@pytest.mark.parametrize(
    "path",
    ["s3://bucket/key", "gs://b", "memory://x/y", "memory://", "hdfs://host:9000/p"],
)
def test_is_url_true_for_remote_schemes(path):
    assert is_url(path)


@pytest.mark.parametrize(
    "path",
    [
        "/tmp/a",
        "relative/dir",
        "~/x",
        "file:///tmp/a",
        "file://relative",
        "/weird/dir://name",
        "://no-scheme",
        "",
    ],
)
def test_is_url_false_for_local_paths(path):
    assert not is_url(path)


def test_get_fs_and_path_plain_absolute_path(tmp_path):
    fs, path = get_fs_and_path(str(tmp_path / "a"))
    assert isinstance(fs, LocalFileSystem)
    assert fs.is_local
    assert fs.type_name == "local"
    assert path == str(tmp_path / "a")


def test_get_fs_and_path_relative_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fs, path = get_fs_and_path("rel/dir")
    assert isinstance(fs, LocalFileSystem)
    assert path == os.path.join(str(tmp_path), "rel", "dir")


def test_get_fs_and_path_accepts_pathlike(tmp_path):
    fs, path = get_fs_and_path(tmp_path / "p")
    assert isinstance(fs, LocalFileSystem)
    assert path == str(tmp_path / "p")


def test_get_fs_and_path_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    fs, path = get_fs_and_path("~/results/exp")
    assert isinstance(fs, LocalFileSystem)
    assert path == os.path.join(str(tmp_path), "results", "exp")


def test_get_fs_and_path_file_url(tmp_path, monkeypatch):
    fs, path = get_fs_and_path(f"file://{tmp_path}/exp")
    assert isinstance(fs, LocalFileSystem)
    assert path == os.path.join(str(tmp_path), "exp")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert get_fs_and_path("file://~/exp")[1] == os.path.join(str(tmp_path), "exp")


def test_get_fs_and_path_memory_url(memory_url):
    fs, path = get_fs_and_path(memory_url + "/exp/")
    assert isinstance(fs, FsspecFileSystem)
    assert not fs.is_local
    assert fs.type_name == "memory"
    assert "://" not in path
    assert path.rstrip("/").endswith(memory_url.split("://", 1)[1] + "/exp")
    # The path really addresses fsspec's memory filesystem.
    fs.write_bytes_atomic(fs.join(path, "f"), b"data")
    assert fsspec.filesystem("memory").cat_file(memory_url + "/exp/f") == b"data"


def test_missing_fsspec_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # makes `import fsspec` fail
    with pytest.raises(ImportError, match=r"fasttune\[fsspec\]"):
        get_fs_and_path("memory://x")


# ----------------------------------------------------------------------------- backends
def test_write_and_read_bytes_text_json(backend):
    fs, root = backend
    fs.write_bytes_atomic(fs.join(root, "b.bin"), b"\x00\x01\xff")
    fs.write_text_atomic(fs.join(root, "t.txt"), "héllo ✓")
    fs.write_json_atomic(fs.join(root, "j.json"), {"b": [1, 2.5, None], "a": "x"}, sort_keys=True)
    assert fs.read_bytes(fs.join(root, "b.bin")) == b"\x00\x01\xff"
    assert fs.read_text(fs.join(root, "t.txt")) == "héllo ✓"
    assert fs.read_bytes(fs.join(root, "t.txt")) == "héllo ✓".encode()
    assert fs.read_json(fs.join(root, "j.json")) == {"a": "x", "b": [1, 2.5, None]}
    # dump kwargs are honoured
    assert fs.read_text(fs.join(root, "j.json")).startswith('{"a"')


def test_overwrite_replaces_content(backend):
    fs, root = backend
    path = fs.join(root, "f")
    fs.write_bytes_atomic(path, b"first, longer content")
    fs.write_bytes_atomic(path, b"second")
    assert fs.read_bytes(path) == b"second"


def test_write_creates_parent_directories(backend):
    fs, root = backend
    path = fs.join(root, "a", "b", "c.txt")
    fs.write_text_atomic(path, "deep")
    assert fs.read_text(path) == "deep"
    assert fs.isdir(fs.join(root, "a", "b"))


def test_exists_and_isdir(backend):
    fs, root = backend
    fs.write_text_atomic(fs.join(root, "file"), "x")
    fs.makedirs(fs.join(root, "dir"))
    assert fs.exists(fs.join(root, "file"))
    assert not fs.isdir(fs.join(root, "file"))
    assert fs.exists(fs.join(root, "dir"))
    assert fs.isdir(fs.join(root, "dir"))
    assert not fs.exists(fs.join(root, "missing"))
    assert not fs.isdir(fs.join(root, "missing"))


def test_makedirs_is_idempotent(backend):
    fs, root = backend
    fs.makedirs(fs.join(root, "x", "y"))
    fs.makedirs(fs.join(root, "x", "y"))
    assert fs.isdir(fs.join(root, "x", "y"))


def test_listdir_returns_sorted_names_including_hidden(backend):
    fs, root = backend
    for name in ["b.txt", "a.txt", ".hidden"]:
        fs.write_text_atomic(fs.join(root, name), name)
    fs.makedirs(fs.join(root, "sub"))
    fs.write_text_atomic(fs.join(root, "sub", "nested"), "n")
    assert fs.listdir(root) == [".hidden", "a.txt", "b.txt", "sub"]
    assert fs.listdir(fs.join(root, "sub")) == ["nested"]


def test_listdir_missing_raises(backend):
    fs, root = backend
    with pytest.raises(FileNotFoundError):
        fs.listdir(fs.join(root, "missing"))


def test_read_missing_raises(backend):
    fs, root = backend
    with pytest.raises(FileNotFoundError):
        fs.read_bytes(fs.join(root, "missing"))


@pytest.mark.parametrize("kind", ["local", "memory", "s3"])
def test_read_many_returns_the_files_that_exist(kind, request, tmp_path, memory_url):
    """One batch (concurrent on object stores), keyed by the paths asked for."""
    if kind == "s3":
        url = f"s3://{request.getfixturevalue('s3_bucket')}/many"
    else:
        url = str(tmp_path / "many") if kind == "local" else memory_url
    fs, root = get_fs_and_path(url)
    fs.makedirs(root)
    wanted = {fs.join(root, f"t{i}", "params.json"): f'{{"i": {i}}}'.encode() for i in range(40)}
    wanted[fs.join(root, "t_x=[1, 2]", "params.json")] = b'{"x": [1, 2]}'  # not a glob
    fs.write_bytes_atomic(fs.join(root, "t_x=1", "params.json"), b"{}")  # what it would match
    for path, data in wanted.items():
        fs.write_bytes_atomic(path, data)
    missing = [fs.join(root, "t99", "params.json"), fs.join(root, "t0", "nope.json")]
    assert fs.read_many([*wanted, *missing]) == wanted
    assert fs.read_many([]) == {}


def test_delete_file_tree_and_missing(backend):
    fs, root = backend
    fs.write_text_atomic(fs.join(root, "keep"), "k")
    fs.write_text_atomic(fs.join(root, "f"), "x")
    fs.write_text_atomic(fs.join(root, "tree", "a", "b"), "x")
    fs.write_text_atomic(fs.join(root, "tree", "c"), "x")

    fs.delete(fs.join(root, "f"))
    assert not fs.exists(fs.join(root, "f"))

    fs.delete(fs.join(root, "tree"))
    assert not fs.exists(fs.join(root, "tree"))
    assert not fs.exists(fs.join(root, "tree", "a", "b"))

    fs.delete(fs.join(root, "never-existed"))  # not an error
    fs.delete(fs.join(root, "tree"))  # deleting twice is fine too
    assert fs.listdir(root) == ["keep"]


def test_upload_download_round_trip(backend, tmp_path):
    fs, root = backend
    src = tmp_path / "src"
    expected = make_tree(src)
    remote = fs.join(root, "ckpt")
    fs.upload_dir(str(src), remote)

    assert fs.listdir(remote) == [".hidden", "empty_dir", "sub", "top.txt"]
    assert fs.read_bytes(fs.join(remote, "sub", "deeper", "leaf.json")) == b'{"a": 1}'

    dst = tmp_path / "dst"
    fs.download_dir(remote, str(dst))
    files, dirs = read_tree(dst)
    assert files == expected
    assert "empty_dir" in dirs
    assert "sub/deeper" in dirs


def test_upload_merges_into_existing_directory(backend, tmp_path):
    fs, root = backend
    remote = fs.join(root, "dir")
    fs.write_text_atomic(fs.join(remote, "old.txt"), "old")
    fs.write_text_atomic(fs.join(remote, "shared.txt"), "old")
    src = tmp_path / "src"
    src.mkdir()
    (src / "shared.txt").write_text("new")
    (src / "added.txt").write_text("added")
    fs.upload_dir(str(src), remote)
    assert fs.listdir(remote) == ["added.txt", "old.txt", "shared.txt"]
    assert fs.read_text(fs.join(remote, "shared.txt")) == "new"
    assert fs.read_text(fs.join(remote, "old.txt")) == "old"


def test_download_missing_directory_raises(backend, tmp_path):
    fs, root = backend
    with pytest.raises(FileNotFoundError):
        fs.download_dir(fs.join(root, "missing"), str(tmp_path / "dst"))


def test_memory_upload_is_visible_through_fsspec(memory_url, tmp_path):
    fs, root = get_fs_and_path(memory_url)
    expected = make_tree(tmp_path / "src")
    fs.upload_dir(str(tmp_path / "src"), fs.join(root, "c"))
    mem = fsspec.filesystem("memory")
    for rel, content in expected.items():
        assert mem.cat_file(f"{memory_url}/c/{rel}") == content


def test_memory_download_accepts_unnormalised_path(memory_url, tmp_path):
    """A path without fsspec's leading slash still downloads to the right relative names."""
    fs, root = get_fs_and_path(memory_url)
    fs.write_text_atomic(fs.join(root, "d", "sub", "f.txt"), "x")
    fs.download_dir(root.lstrip("/") + "/d/", str(tmp_path / "dst"))
    assert read_tree(tmp_path / "dst")[0] == {"sub/f.txt": b"x"}


def test_local_upload_onto_itself_is_a_noop(tmp_path):
    fs, root = get_fs_and_path(tmp_path / "d")
    expected = make_tree(root)
    fs.upload_dir(root, root)
    fs.download_dir(root + "/", root)
    assert read_tree(root)[0] == expected


def test_local_delete_symlink_keeps_target(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "f").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target)
    LocalFileSystem().delete(str(link))
    assert not os.path.lexists(link)
    assert (target / "f").read_text() == "x"


def test_join():
    assert FsspecFileSystem(fsspec.filesystem("memory")).join("/a/", "/b/", "c") == "/a/b/c"
    assert LocalFileSystem().join("/a", "b", "c") == os.path.join("/a", "b", "c")


def test_fsspec_filesystem_pickles(memory_url):
    import pickle

    fs, root = get_fs_and_path(memory_url)
    fs.write_text_atomic(fs.join(root, "f"), "x")
    clone = pickle.loads(pickle.dumps(fs))
    assert isinstance(clone, FsspecFileSystem)
    assert clone.read_text(clone.join(root, "f")) == "x"


# ----------------------------------------------------------------------------- atomic writes
def _names(directory) -> list[str]:
    return sorted(os.listdir(directory))


def test_atomic_write_helpers(tmp_path):
    atomic_write_bytes(tmp_path / "new" / "b.bin", b"\x00bytes")
    atomic_write_text(str(tmp_path / "t.txt"), "texte ✓")
    atomic_write_json(tmp_path / "j.json", {"z": 1, "a": [1]}, sort_keys=True)
    assert (tmp_path / "new" / "b.bin").read_bytes() == b"\x00bytes"
    assert (tmp_path / "t.txt").read_bytes() == "texte ✓".encode()
    assert (tmp_path / "j.json").read_text() == '{"a": [1], "z": 1}'
    assert json.loads((tmp_path / "j.json").read_text()) == {"a": [1], "z": 1}
    assert _names(tmp_path) == ["j.json", "new", "t.txt"]  # no temp files left behind
    assert _names(tmp_path / "new") == ["b.bin"]


def test_atomic_write_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    atomic_write_text("rel.txt", "x")
    assert (tmp_path / "rel.txt").read_text() == "x"
    assert _names(tmp_path) == ["rel.txt"]


def test_atomic_write_failure_keeps_old_content(tmp_path):
    path = tmp_path / "f.json"
    atomic_write_json(path, {"v": 1})
    with pytest.raises(TypeError):
        atomic_write_json(path, {"v": object()})
    assert json.loads(path.read_text()) == {"v": 1}
    with pytest.raises(TypeError):
        atomic_write_bytes(path, "not bytes")  # type: ignore[arg-type]
    assert json.loads(path.read_text()) == {"v": 1}
    assert _names(tmp_path) == ["f.json"]


def test_atomic_open_success(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"old")
    with atomic_open(path) as f:
        f.write(b"new ")
        f.write(b"content")
        assert path.read_bytes() == b"old"  # nothing visible until the block ends
    assert path.read_bytes() == b"new content"
    assert _names(tmp_path) == ["f"]


def test_atomic_open_text_mode_is_utf8(tmp_path):
    path = tmp_path / "t.txt"
    with atomic_open(str(path), "w") as f:
        f.write("ünïcode ✓")
    assert path.read_bytes() == "ünïcode ✓".encode()


def test_atomic_open_block_raises_keeps_old_content(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"), atomic_open(path) as f:
        f.write(b"partial")
        raise RuntimeError("boom")
    assert path.read_bytes() == b"old"
    assert _names(tmp_path) == ["f"]


def test_atomic_open_block_raises_without_old_file(tmp_path):
    path = tmp_path / "sub" / "f"
    with pytest.raises(KeyboardInterrupt), atomic_open(path) as f:
        f.write(b"partial")
        raise KeyboardInterrupt
    assert not path.exists()
    assert _names(tmp_path / "sub") == []


@pytest.mark.parametrize("mode", ["r", "rb", "a", "ab", "w+", "x"])
def test_atomic_open_rejects_other_modes(tmp_path, mode):
    with pytest.raises(ValueError, match="mode"), atomic_open(tmp_path / "f", mode):
        pass
    assert _names(tmp_path) == []


def test_atomic_writes_use_the_usual_permissions(tmp_path):
    """Files get the mode a plain open() would give them (umask), not mkstemp's 0600."""
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    expected = stat.S_IMODE(os.stat(plain).st_mode)
    with atomic_open(tmp_path / "opened") as f:
        f.write(b"x")
    atomic_write_bytes(tmp_path / "written", b"x")
    assert stat.S_IMODE(os.stat(tmp_path / "opened").st_mode) == expected
    assert stat.S_IMODE(os.stat(tmp_path / "written").st_mode) == expected


_WRITER = """
import sys
from fasttune.storage.filesystem import atomic_write_bytes

path, size = sys.argv[1], int(sys.argv[2])
payloads = [b"a" * size, b"b" * size]
i = 0
while True:
    atomic_write_bytes(path, payloads[i % 2])
    i += 1
    if i == 1:
        print("ready", flush=True)
"""

_OPEN_THEN_HANG = """
import sys, time
from fasttune.storage.filesystem import atomic_open

with atomic_open(sys.argv[1]) as f:
    f.write(b"half-written " * 1000)
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def _spawn(script: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, env=env, text=True
    )


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_atomic_write_bytes_survives_sigkill(tmp_path):
    """Readers and survivors of SIGKILL only ever see one complete payload."""
    size = 5 * 1024 * 1024
    payloads = (b"a" * size, b"b" * size)
    path = tmp_path / "target.bin"
    rng = random.Random(1234)
    seen = set()
    reads = 0

    def check(where: str) -> None:
        data = path.read_bytes()
        assert data in payloads, (
            f"{where}: torn file, {len(data)} bytes, starts {data[:4]!r}, ends {data[-4:]!r}"
        )
        seen.add(data[:1])
        for name in os.listdir(tmp_path):
            assert name == "target.bin" or (
                name.startswith(".target.bin.") and name.endswith(".tmp")
            ), f"unexpected file {name!r}"

    for round_ in range(8):
        proc = _spawn(_WRITER, str(path), str(size))
        try:
            if round_ == 0:
                time.sleep(rng.uniform(0.0, 0.3))  # may die before the first write ends
            else:
                assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
                deadline = time.monotonic() + rng.uniform(0.01, 0.3)
                while time.monotonic() < deadline:  # read concurrently with the writer
                    check(f"round {round_}, concurrent read")
                    reads += 1
        finally:
            _kill(proc)
        if path.exists():
            check(f"round {round_}, after SIGKILL")
        else:
            assert round_ == 0, "the file vanished after a complete write"
            assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == []

    assert reads > 0
    assert seen == {b"a", b"b"}  # the writer really alternated under our reads
    atomic_write_bytes(path, b"final")  # leftovers of killed writers don't get in the way
    assert path.read_bytes() == b"final"


def test_atomic_open_survives_sigkill_inside_block(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"old content")
    proc = _spawn(_OPEN_THEN_HANG, str(path))
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
        assert path.read_bytes() == b"old content"
    finally:
        _kill(proc)
    assert path.read_bytes() == b"old content"
    leftovers = [n for n in os.listdir(tmp_path) if n != "f"]
    # The killed writer's temp file is hidden and never takes the final name.
    assert len(leftovers) == 1
    assert leftovers[0].startswith(".f.") and leftovers[0].endswith(".tmp")


def _tail_files(fs: FileSystem, root: str) -> dict[str, bytes]:
    contents = {"long": bytes(range(256)) * 40, "short": b"abc", "empty": b""}
    for name, data in contents.items():
        fs.write_bytes_atomic(fs.join(root, name), data)
    return contents


def _assert_ends_read(fs: FileSystem, root: str) -> None:
    contents = _tail_files(fs, root)
    paths = [fs.join(root, name) for name in (*contents, "missing")]
    assert fs.read_tails(paths, 1000) == {
        fs.join(root, name): data[-1000:] for name, data in contents.items()
    }
    assert fs.read_heads(paths, 1000) == {
        fs.join(root, name): data[:1000] for name, data in contents.items()
    }


def test_read_tails_and_heads_give_each_files_ends_or_the_whole_shorter_file(backend):
    _assert_ends_read(*backend)


def test_read_tails_and_heads_from_s3_read_only_the_ends(s3_server, s3_bucket):
    """A range per object on S3 (an empty object's is refused: read whole)."""
    _assert_ends_read(*get_fs_and_path(f"s3://{s3_bucket}/tails"))
