"""Publish a set of state files to storage as one change: a manifest commit.

An object store replaces each object atomically, but never several together, and a
driver killed between two uploads would leave, say, a new search state beside an old
trial list, which no restore can make sense of. So state files are never overwritten
in place on storage. Each commit uploads the files that changed under new keys
(``.state/<generation>/<name>``), then replaces one small object,
``experiment_state.manifest.json``, that names the key of every file; readers read
the manifest first. Keys the new manifest no longer names are deleted after it is
written. Wherever the writer is killed, the manifest names a complete set of files
from one commit (and a new writer deletes the keys a dead one left unnamed).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

from fasttune.storage.filesystem import FileSystem

MANIFEST_FILE = "experiment_state.manifest.json"
STATE_DIR = ".state"
FORMAT_VERSION = 1
_DIGEST_LIMIT = 4 << 20  # files up to this size are compared by content, not only by stat


def read_manifest(fs: FileSystem, root: str) -> dict[str, Any] | None:
    """The committed manifest of the experiment directory ``root``, or None if none.

    Raises:
        ValueError: The manifest has a format this fasttune cannot read.
    """
    path = fs.join(root, MANIFEST_FILE)
    try:
        manifest = fs.read_json(path)
    except FileNotFoundError:
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        version = manifest.get("format") if isinstance(manifest, dict) else None
        raise ValueError(
            f"{path} has state manifest format {version!r}, but this fasttune reads format "
            f"{FORMAT_VERSION}."
        )
    return manifest


def download_state(fs: FileSystem, root: str, local_dir: str) -> dict[str, Any] | None:
    """Download the committed state files of ``root`` into ``local_dir``.

    Returns:
        The manifest, or None when ``root`` has no committed state.
    """
    for _ in range(5):
        manifest = read_manifest(fs, root)
        if manifest is None:
            return None
        files = manifest["files"]
        pairs = [
            (fs.join(root, f["key"]), os.path.join(local_dir, name)) for name, f in files.items()
        ]
        try:
            fs.get_files(pairs)
        except FileNotFoundError:
            continue  # a commit replaced them while we read: read its manifest
        return manifest
    raise RuntimeError(f"The experiment state at {root!r} kept changing while it was downloaded.")


class StateCommitter:
    """Commits the local state files ``names`` of ``local_root`` to ``root`` on ``fs``.

    Continues the generations of a manifest already there (a restored experiment), and
    deletes the keys a writer killed mid-commit left behind.
    """

    def __init__(self, fs: FileSystem, root: str, local_root: str, names: Sequence[str]):
        self._fs = fs
        self._root = root
        self._local_root = local_root
        self._names = tuple(names)
        manifest = read_manifest(fs, root)
        self._generation = int(manifest["generation"]) if manifest else 0
        self._files: dict[str, dict[str, Any]] = dict(manifest["files"]) if manifest else {}
        self._published: dict[str, tuple[Any, ...]] = {}  # name -> stamp of what was uploaded
        self.commits = 0
        self._collect_garbage()

    @property
    def generation(self) -> int:
        """The generation of the last commit (0: none yet)."""
        return self._generation

    def commit(self) -> bool:
        """Upload the state files that changed and publish them together.

        Returns:
            False when nothing changed since the last commit (nothing was written).
        """
        changed = []
        for name in self._names:
            local = os.path.join(self._local_root, name)
            stamp = _stamp(local)
            if stamp is None or (self._published.get(name) == stamp and name in self._files):
                continue
            changed.append((name, local, stamp))
        if not changed:
            return False
        fs, generation = self._fs, self._generation + 1
        files = dict(self._files)
        pairs = []
        for name, local, stamp in changed:
            key = f"{STATE_DIR}/{generation:08d}/{name}"
            pairs.append((local, fs.join(self._root, key)))
            files[name] = {"key": key, "size": stamp[1]}
        fs.put_files(pairs)
        manifest = {
            "format": FORMAT_VERSION,
            "generation": generation,
            "time": time.time(),
            "files": files,
        }
        fs.write_bytes_atomic(
            fs.join(self._root, MANIFEST_FILE), json.dumps(manifest, indent=1).encode("utf-8")
        )
        stale = [
            fs.join(self._root, old["key"])
            for name, old in self._files.items()
            if files[name]["key"] != old["key"]
        ]
        self._files, self._generation = files, generation
        self._published.update((name, stamp) for name, _, stamp in changed)
        self.commits += 1
        fs.delete_files(stale)  # no manifest names them any more
        return True

    def _collect_garbage(self) -> None:
        named = {self._fs.join(self._root, f["key"]) for f in self._files.values()}
        prefix = self._fs.join(self._root, STATE_DIR)
        orphans = [path for path in self._fs.find(prefix) if _normal(path) not in _normals(named)]
        self._fs.delete_files(orphans)


def _normal(path: str) -> str:
    return path.strip("/")


def _normals(paths: set[str]) -> set[str]:
    return {_normal(p) for p in paths}


def _stamp(path: str) -> tuple[Any, ...] | None:
    """What identifies a version of the file (None if it is missing).

    Small files by their content: a pickle rewritten unchanged at every snapshot is not
    uploaded again, and a journal truncated and refilled to the same size within one
    clock tick is. Large ones (the append-only base records and configs, which only
    grow) by inode, size and modification time.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if st.st_size > _DIGEST_LIMIT:
        return ("stat", st.st_size, st.st_ino, st.st_mtime_ns)
    import hashlib  # here: loading OpenSSL costs 3-10 ms of every start

    with open(path, "rb") as f:
        return ("content", st.st_size, hashlib.blake2b(f.read(), digest_size=16).digest())
