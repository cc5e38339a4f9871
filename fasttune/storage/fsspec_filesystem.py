"""Remote storage through fsspec: S3, GCS, Azure, ``memory://`` and any other scheme.

fsspec itself is imported only when a URL is resolved
(:func:`fasttune.storage.filesystem.get_fs_and_path`, :func:`fsspec_fs_and_path`) or a
filesystem object is wrapped; it comes with the ``fasttune[fsspec]`` extra (``[s3]``,
``[gcs]`` add the protocol's package).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from fasttune.storage.filesystem import FileSystem, ensure_dir

# Object stores: a key needs no parent "directory", and makedirs may cost a request
# (s3fs checks, or creates, the bucket).
_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory"})


class FsspecFileSystem(FileSystem):
    """Any fsspec filesystem (S3, GCS, memory, ...). Needs ``fasttune[fsspec]``.

    Queries about a path first drop fsspec's cached listings of it and its parents:
    other processes (workers uploading checkpoints) change the store behind this one.
    """

    def __init__(self, fs: Any):
        self.fs = fs
        protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
        self._object_store = any(p in _OBJECT_STORES for p in protocols)

    def _make_parent(self, path: str) -> None:
        if not self._object_store:
            parent = path.rsplit("/", 1)[0]
            if parent:
                self.fs.makedirs(parent, exist_ok=True)

    @property
    def type_name(self) -> str:
        protocol = self.fs.protocol
        return str(protocol if isinstance(protocol, str) else protocol[0])

    def _fresh(self, path: str) -> str:
        """``path``, with fsspec's cached listings of it and its parents dropped."""
        self.fs.invalidate_cache(self.fs._strip_protocol(path))
        return path

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._fresh(path)))

    def isdir(self, path: str) -> bool:
        return bool(self.fs.isdir(self._fresh(path)))

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        names = self.fs.ls(self._fresh(path), detail=False)
        return sorted(n.rstrip("/").rsplit("/", 1)[-1] for n in names)

    def read_bytes(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def read_many(self, paths: Sequence[str]) -> dict[str, bytes]:
        # fsspec's cat of a list: concurrent requests on async stores (s3fs, gcsfs). It
        # reads a path with *, ? or [ as a glob: those (a trial folder named after a list
        # value) are read one by one.
        plain = [path for path in paths if not any(c in path for c in "*?[")]
        out = super().read_many([path for path in paths if any(c in path for c in "*?[")])
        if plain:
            found = self.fs.cat(plain, on_error="omit")
            strip = self.fs._strip_protocol
            wanted = {strip(path): path for path in plain}
            out.update({wanted.get(strip(k), k): bytes(data) for k, data in found.items()})
        return out

    def _read_ends(self, paths: Sequence[str], size: int, *, tail: bool) -> dict[str, bytes]:
        # One ranged request per file, concurrent on async stores: a suffix range
        # (``bytes=-size``) gives the whole object when it is shorter, as does a range
        # past a short object's end. A file whose range fails otherwise (an empty
        # object's range is refused) is read whole.
        if not paths:
            return {}
        start, end = (-size, None) if tail else (0, size)
        ends = self.fs.cat_ranges(list(paths), start, end, on_error="return")
        out = {}
        for path, data in zip(paths, ends):
            if isinstance(data, FileNotFoundError):
                continue
            if isinstance(data, BaseException):
                try:
                    whole = self.read_bytes(path)
                except FileNotFoundError:
                    continue
                data = whole[-size:] if tail else whole[:size]
            out[path] = bytes(data)
        return out

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        # Object stores publish a whole object at once; ``pipe`` is one PUT.
        self._make_parent(path)
        self.fs.pipe_file(path, data)

    def delete(self, path: str) -> None:
        if self.fs.exists(self._fresh(path)):
            self.fs.rm(path, recursive=True)

    def upload_dir(self, local_dir: str, path: str) -> None:
        pairs = []
        for root, dirs, files in os.walk(local_dir):
            rel = os.path.relpath(root, local_dir)
            target = path if rel == "." else self.join(path, rel.replace(os.sep, "/"))
            if not files and not dirs:
                self.fs.makedirs(target, exist_ok=True)  # keep empty directories where it can
            elif not self._object_store:
                self.fs.makedirs(target, exist_ok=True)
            pairs += [(os.path.join(root, name), self.join(target, name)) for name in files]
        self.put_files(pairs)

    def put_files(self, pairs: Sequence[tuple[str, str]]) -> None:
        if pairs:
            if not self._object_store:
                for parent in {path.rsplit("/", 1)[0] for _, path in pairs}:
                    self.fs.makedirs(parent, exist_ok=True)
            self.fs.put([local for local, _ in pairs], [path for _, path in pairs])

    def get_files(self, pairs: Sequence[tuple[str, str]]) -> None:
        if pairs:
            for parent in {os.path.dirname(local) for _, local in pairs}:
                ensure_dir(parent)
            self.fs.get([path for path, _ in pairs], [local for _, local in pairs])

    def delete_files(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        try:
            self.fs.rm(list(paths))  # one batched request on object stores
            return
        except FileNotFoundError:
            pass  # some were gone: remove the others one by one
        except TypeError:
            pass  # a filesystem whose rm takes one path (pyarrow's, through fsspec)
        for path in paths:
            if self.fs.exists(self._fresh(path)):
                self.fs.rm_file(path)

    def copy_dir(self, path: str, target: str) -> None:
        sources = self.find(path)
        prefix = self.fs._strip_protocol(path).rstrip("/")
        targets = [self.join(target, source[len(prefix) :].strip("/")) for source in sources]
        if sources:
            self.fs.copy(sources, targets)

    def find(self, path: str) -> list[str]:
        try:
            return sorted(self.fs.find(self._fresh(path)))
        except FileNotFoundError:
            return []

    def files_in(self, path: str) -> list[str]:
        try:
            entries = self.fs.ls(self._fresh(path), detail=True)
        except FileNotFoundError:
            return []
        return sorted(
            e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e["type"] == "file"
        )

    def download_dir(self, path: str, local_dir: str) -> None:
        # Normalise as fsspec does, so that the paths ``find`` returns start with it.
        prefix = self.fs._strip_protocol(path).rstrip("/")
        try:  # one listing: nothing found is a missing directory (as on object stores)
            entries = self.fs.find(self._fresh(prefix), withdirs=True, detail=True)
        except FileNotFoundError:
            entries = {}
        if not entries or entries.get(prefix, {}).get("type") == "file":
            raise FileNotFoundError(f"No directory at {path!r} to download.")
        os.makedirs(local_dir, exist_ok=True)
        pairs = []
        for remote, info in sorted(entries.items()):
            rel = remote[len(prefix) :].strip("/")
            if not rel:
                continue
            local = os.path.join(local_dir, *rel.split("/"))
            if info["type"] == "directory":
                os.makedirs(local, exist_ok=True)
            else:
                pairs.append((remote, local))
        self.get_files(pairs)


_PROTOCOL_EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}


def fsspec_fs_and_path(url: str) -> tuple[FsspecFileSystem, str]:
    """The fsspec filesystem that serves ``url``, and the path within it.

    Raises:
        MissingDependencyError: fsspec is not installed (names the extra).
        ImportError: The protocol's package is missing (names the extra, when known).
    """
    from fasttune._support.imports import import_optional

    fsspec = import_optional("fsspec", extra="fsspec")
    try:
        fs, inner = fsspec.core.url_to_fs(url)
    except ImportError as e:  # fsspec names the package its protocol needs
        extra = _PROTOCOL_EXTRAS.get(url.partition("://")[0].lower())
        hint = f'pip install "fasttune[{extra}]"' if extra else "install it"
        raise ImportError(f"{url!r}: {e} ({hint}).") from None
    return FsspecFileSystem(fs), inner
