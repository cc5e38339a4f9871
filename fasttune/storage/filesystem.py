"""One small filesystem layer: every path fasttune touches goes through here.

Local paths (and ``file://`` URLs) are served by :class:`LocalFileSystem`, built on
``os``/``shutil`` only. Other URL schemes (``s3://``, ``gs://``, ``memory://`` ...)
are served by :class:`~fasttune.storage.fsspec_filesystem.FsspecFileSystem`, which
imports fsspec only when such a URL is resolved. Local writes are atomic here
(``atomic_write_bytes``...).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any


def is_url(path: str) -> bool:
    """True for ``scheme://...`` paths other than ``file://``."""
    scheme, sep, _ = str(path).partition("://")
    return bool(sep) and bool(scheme) and scheme != "file" and "/" not in scheme


def _strip_file_scheme(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


class FileSystem:
    """The operations fasttune needs from a storage backend."""

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def isdir(self, path: str) -> bool:
        raise NotImplementedError

    def makedirs(self, path: str) -> None:
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        """Names (not paths) of the entries of a directory."""
        raise NotImplementedError

    def read_bytes(self, path: str) -> bytes:
        raise NotImplementedError

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        """Write ``data`` so that readers see the old or the new content, never a mix."""
        raise NotImplementedError

    def delete(self, path: str) -> None:
        """Remove a file or a directory tree; a missing path is not an error."""
        raise NotImplementedError

    def upload_dir(self, local_dir: str, path: str) -> None:
        """Copy the local directory ``local_dir`` to ``path`` (merged into it)."""
        raise NotImplementedError

    def download_dir(self, path: str, local_dir: str) -> None:
        """Copy the directory ``path`` into the local directory ``local_dir``."""
        raise NotImplementedError

    def put_files(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Upload each local file ``pairs[i][0]`` to ``pairs[i][1]`` (whole, replacing it).

        Backends that can upload concurrently do (fsspec's batched ``put``).
        """
        raise NotImplementedError

    def get_files(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Download each file ``pairs[i][0]`` to the local path ``pairs[i][1]``."""
        raise NotImplementedError

    def delete_files(self, paths: Sequence[str]) -> None:
        """Remove these files (not directories); missing ones are not an error."""
        raise NotImplementedError

    def copy_dir(self, path: str, target: str) -> None:
        """Copy the directory ``path`` to ``target`` within this filesystem (server-side
        where the backend can)."""
        raise NotImplementedError

    def find(self, path: str) -> list[str]:
        """Paths of every file under the directory ``path`` (empty if it is missing)."""
        raise NotImplementedError

    def files_in(self, path: str) -> list[str]:
        """Names of the files directly in the directory ``path`` (not of subdirectories;
        empty if it is missing)."""
        raise NotImplementedError

    @property
    def is_local(self) -> bool:
        return False

    @property
    def type_name(self) -> str:
        """Short name of the backend (``local``, ``s3``, ``memory`` ...), as in Ray."""
        return type(self).__name__

    def join(self, *parts: str) -> str:
        return "/".join(p.rstrip("/") if i == 0 else p.strip("/") for i, p in enumerate(parts))

    def read_many(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The contents of the files among ``paths`` that exist, by path (missing ones
        left out). Object stores fetch them concurrently: one round trip's wait for
        many small files, not one each."""
        out = {}
        for path in paths:
            try:
                out[path] = self.read_bytes(path)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue
        return out

    def read_tails(self, paths: Sequence[str], size: int) -> dict[str, bytes]:
        """The last ``size`` bytes of each file among ``paths`` that exists (a shorter
        file whole: fewer than ``size`` bytes means the whole file), by path; missing
        ones left out."""
        return self._read_ends(paths, size, tail=True)

    def read_heads(self, paths: Sequence[str], size: int) -> dict[str, bytes]:
        """The first ``size`` bytes of each file among ``paths`` that exists, as
        :meth:`read_tails` reads their ends."""
        return self._read_ends(paths, size, tail=False)

    def _read_ends(self, paths: Sequence[str], size: int, *, tail: bool) -> dict[str, bytes]:
        out = {}
        for path in paths:
            try:
                data = self.read_bytes(path)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue
            out[path] = data[-size:] if tail else data[:size]
        return out

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def write_text_atomic(self, path: str, text: str) -> None:
        self.write_bytes_atomic(path, text.encode("utf-8"))

    def read_json(self, path: str) -> Any:
        return json.loads(self.read_text(path))

    def write_json_atomic(self, path: str, obj: Any, **dump_kwargs: Any) -> None:
        self.write_text_atomic(path, json.dumps(obj, **dump_kwargs))


class LocalFileSystem(FileSystem):
    """The local disk. Atomic writes use temp file + fsync + ``os.replace``."""

    @property
    def is_local(self) -> bool:
        return True

    @property
    def type_name(self) -> str:
        return "local"

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def makedirs(self, path: str) -> None:
        ensure_dir(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def _read_ends(self, paths: Sequence[str], size: int, *, tail: bool) -> dict[str, bytes]:
        out = {}
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except (FileNotFoundError, NotADirectoryError):
                continue
            try:
                offset = max(0, os.fstat(fd).st_size - size) if tail else 0
                data = os.pread(fd, size, offset)
                if offset and len(data) < size:  # cut short meanwhile: read it again
                    data = self.read_bytes(path)[-size:]
                out[path] = data
            except IsADirectoryError:
                continue
            finally:
                os.close(fd)
        return out

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        atomic_write_bytes(path, data)

    def delete(self, path: str) -> None:
        import shutil  # here: not on a worker's way to its first trial

        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)

    def upload_dir(self, local_dir: str, path: str) -> None:
        import shutil

        if os.path.abspath(local_dir) != os.path.abspath(path):
            shutil.copytree(local_dir, path, dirs_exist_ok=True)

    def download_dir(self, path: str, local_dir: str) -> None:
        self.upload_dir(path, local_dir)

    def put_files(self, pairs: Sequence[tuple[str, str]]) -> None:
        import shutil

        for local, path in pairs:
            ensure_dir(os.path.dirname(path))
            shutil.copyfile(local, path)

    def get_files(self, pairs: Sequence[tuple[str, str]]) -> None:
        self.put_files(pairs)

    def delete_files(self, paths: Sequence[str]) -> None:
        for path in paths:
            if os.path.lexists(path) and not os.path.isdir(path):
                os.remove(path)

    def copy_dir(self, path: str, target: str) -> None:
        import shutil

        shutil.copytree(path, target, dirs_exist_ok=True)

    def find(self, path: str) -> list[str]:
        return sorted(
            os.path.join(root, name) for root, _dirs, names in os.walk(path) for name in names
        )

    def files_in(self, path: str) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(path) if e.is_file())
        except (FileNotFoundError, NotADirectoryError):
            return []


_LOCAL = LocalFileSystem()


def get_fs_and_path(path: str | os.PathLike[str]) -> tuple[FileSystem, str]:
    """Return the filesystem that serves ``path`` and the path within it."""
    path = os.fspath(path)
    if not is_url(path):
        return _LOCAL, os.path.abspath(os.path.expanduser(_strip_file_scheme(path)))
    from fasttune.storage.fsspec_filesystem import fsspec_fs_and_path  # URLs only

    return fsspec_fs_and_path(path)


def local_filesystem() -> LocalFileSystem:
    return _LOCAL


def ensure_dir(path: str) -> None:
    """Create the directory ``path`` (and its parents) unless it exists.

    One ``stat`` when it exists, where ``os.makedirs(exist_ok=True)`` costs a failed
    ``mkdir``, an exception and a ``stat``: it runs several times per trial.
    """
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)


def make_dir(path: str) -> None:
    """Create the directory ``path`` (and its parents), for a path that usually does
    not exist yet (a trial's folder at its first start): one ``mkdir`` then, where
    :func:`ensure_dir` costs a failed ``stat``, a ``stat`` of the parent and the ``mkdir``.
    """
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)


def open_creating_dirs(path: str, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags, mode)``, making the missing directories of ``path`` first
    if the open finds none. Tried first: a trial's files are opened in a directory
    just made, where a ``stat`` of it before each open would be a wasted system call.
    """
    try:
        return os.open(path, flags, mode)
    except FileNotFoundError:
        directory = os.path.dirname(path)
        if not directory or os.path.isdir(directory):
            raise
        os.makedirs(directory, exist_ok=True)
        return os.open(path, flags, mode)


# Temp names unique across processes and hosts (a random token and the pid, drawn
# once per process and again in a forked child) and within a process (a counter):
# no random draw and no getpid() per write.
def _new_temp_token() -> str:
    return f"{os.urandom(4).hex()}{os.getpid():x}"


_temp_token = _new_temp_token()
_temp_counter = itertools.count()


def _renew_temp_token() -> None:
    global _temp_token
    _temp_token = _new_temp_token()


os.register_at_fork(after_in_child=_renew_temp_token)


def _temp_path_beside(path: str) -> tuple[str, str]:
    """(directory, hidden unique temp path) for an atomic write of ``path``; the
    directory may not exist yet."""
    directory, name = os.path.split(path if path.startswith("/") else os.path.abspath(path))
    return directory, f"{directory}/.{name}.{_temp_token}.{next(_temp_counter)}.tmp"


def _fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories can't be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, durable: bool = True, sync_dir: bool = True
) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, replace).

    With ``durable=False`` the fsyncs are skipped: the write still survives a crash
    of this process (never torn), but not a power loss. For hot-path state.
    ``sync_dir=False`` leaves the directory's fsync to a later durable write in the
    same directory (it makes every rename there durable at once): the file is then
    whole after a power loss, but may be its previous version.
    """
    # os-level calls, not atomic_open's file object: no buffer, no fstat and no isatty
    # probe; 26 us per small file here (two per trial start), where a plain create and
    # write costs 16.
    with _Replacing(os.fspath(path), durable=durable, sync_dir=sync_dir) as tmp:
        fd = open_creating_dirs(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, **dump_kwargs: Any) -> None:
    atomic_write_text(path, json.dumps(obj, **dump_kwargs))


@contextmanager
def atomic_open(
    path: str | os.PathLike[str], mode: str = "wb", *, durable: bool = True, sync_dir: bool = True
) -> Iterator[IO[Any]]:
    """Open a temp file beside ``path``; it replaces ``path`` only if the block succeeds.

    Args:
        path: The file to (re)write.
        mode: ``"wb"`` (bytes) or ``"w"`` (UTF-8 text).
        durable: fsync the file and its directory (survives power loss, not only crashes).
        sync_dir: With ``durable``, fsync the directory too (see :func:`atomic_write_bytes`).

    Raises:
        ValueError: For any other ``mode``.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open(mode=...) must be 'w' or 'wb', got {mode!r}")
    encoding = None if "b" in mode else "utf-8"
    ensure_dir(os.path.dirname(os.path.abspath(path)))
    # "x": a fresh file with the usual permissions (umask), unlike mkstemp's 0600.
    with (
        _Replacing(os.fspath(path), durable=durable, sync_dir=sync_dir) as tmp,
        open(tmp, mode.replace("w", "x"), encoding=encoding) as f,
    ):
        yield f
        f.flush()
        if durable:
            os.fsync(f.fileno())


class _Replacing:
    """``with _Replacing(path, ...) as tmp``: a hidden temp path beside ``path`` to
    write; it replaces ``path`` if the block succeeds and is removed if not (then,
    with ``durable`` and ``sync_dir``, the directory is fsynced). A class, not a
    generator-based context manager: a few microseconds less per atomic write."""

    __slots__ = ("_directory", "_durable", "_path", "_sync_dir", "_tmp")

    def __init__(self, path: str, *, durable: bool, sync_dir: bool):
        self._path = path
        self._durable = durable
        self._sync_dir = sync_dir
        self._directory, self._tmp = _temp_path_beside(path)

    def __enter__(self) -> str:
        return self._tmp

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is not None:
            self._discard()
            return
        try:
            os.replace(self._tmp, self._path)
        except BaseException:
            self._discard()
            raise
        if self._durable and self._sync_dir:
            _fsync_dir(self._directory)

    def _discard(self) -> None:
        if os.path.lexists(self._tmp):
            os.remove(self._tmp)
