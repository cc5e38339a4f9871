"""Where an experiment lives: a local directory, or a directory on a storage filesystem.

``RunConfig(storage_path=..., storage_filesystem=...)`` is resolved here, as Ray does:

- a local path (or ``file://``) is the experiment's home, written in place;
- an fsspec URL (``s3://bucket/prefix``, ``gs://...``, ``memory://...``) or a
  ``storage_filesystem`` (fsspec, or pyarrow when installed) with a path inside it
  is remote: the driver writes to a local *staging* directory and publishes it to
  storage (:mod:`fasttune.storage.sync`), and workers upload their own checkpoints.
  The staging directory is a cache, never the source of truth: it is wiped when a run
  starts and refilled from storage by ``Tuner.restore``.

The staging directory is ``$FASTTUNE_STAGING_DIR/<name>-<hash of the URL>``, by
default under ``~/fasttune_results/_staging``
(see :func:`staging_root`).
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from typing import Any

from fasttune._support.imports import MissingDependencyError
from fasttune.storage.defaults import default_local_dir, default_storage_path
from fasttune.storage.experiment_lock import ExperimentLock
from fasttune.storage.filesystem import FileSystem, get_fs_and_path, is_url, local_filesystem
from fasttune.storage.fsspec_filesystem import FsspecFileSystem
from fasttune.storage.mirror import StorageMirror

STAGING_DIR_ENV = "FASTTUNE_STAGING_DIR"

# Schemes whose fsspec implementation is a separate package, with the extra to install.
_PACKAGES = {
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
}


class StorageNotWritableError(ValueError, OSError):
    """The storage cannot be written: a ValueError, as fasttune raised it, and an
    OSError, as Ray Tune's pyarrow raises it (a missing bucket, an endpoint down)."""


class NotAnExperimentPathError(ValueError):
    """A path that cannot be an experiment directory (a bucket's root, say)."""


@dataclass(frozen=True)
class ExperimentStorage:
    """An experiment's directory on its storage, and where the driver writes it.

    Attributes:
        name: The experiment's name (the last part of its path).
        filesystem: The storage filesystem.
        path: The experiment directory within ``filesystem``.
        local_path: Where the driver writes: ``path`` itself for local storage, else
            the staging directory that is published to ``path``.
        uri: The experiment directory as a user writes it (``s3://bucket/prefix/name``,
            or the local path).
    """

    name: str
    filesystem: FileSystem
    path: str
    local_path: str
    uri: str

    @property
    def is_remote(self) -> bool:
        """True when the driver writes to a staging directory, not to the storage itself."""
        return not self.filesystem.is_local

    @property
    def mirror(self) -> StorageMirror:
        """The staging directory as a mirror of the storage (for workers and the sync)."""
        return StorageMirror(self.filesystem, self.local_path, self.path)


def experiment_storage(
    storage_path: str | os.PathLike[str] | None,
    storage_filesystem: Any,
    name: str,
    *,
    owner: str = "RunConfig",
) -> ExperimentStorage:
    """Resolve ``<storage_path>/<name>``; nothing is created or checked yet.

    Args:
        storage_path: A local directory, a URL, or with ``storage_filesystem`` a path
            inside it; None for the default (``$FASTTUNE_STORAGE_PATH``, which may be
            a URL, else ``~/fasttune_results``).
        storage_filesystem: None, a fasttune ``FileSystem``, an fsspec filesystem or a
            ``pyarrow.fs.FileSystem``.
        name: The experiment's name.
        owner: Named in error messages (``RunConfig``, ``Tuner.restore``...).

    Raises:
        ValueError: An unknown URL scheme, or ``storage_filesystem`` without a path.
        TypeError: ``storage_filesystem`` is not a filesystem.
        MissingDependencyError: The URL's filesystem package is not installed.
    """
    fs, root, uri_root = _resolve_root(storage_path, storage_filesystem, owner)
    path = fs.join(root, name)
    base, query = _split_options(uri_root)
    uri = os.path.join(uri_root, name) if fs.is_local else f"{base.rstrip('/')}/{name}{query}"
    local = path if fs.is_local else staging_dir(name, uri)
    return ExperimentStorage(name=name, filesystem=fs, path=path, local_path=local, uri=uri)


def locate_experiment(
    path: str | os.PathLike[str], storage_filesystem: Any = None, *, owner: str = "Tuner.restore"
) -> ExperimentStorage:
    """The storage of the experiment directory ``path`` (a local path, a URL, or a path
    inside ``storage_filesystem``)."""
    text = os.fspath(path)
    if not is_url(text) and storage_filesystem is None:
        text = _local_path(text)
        return experiment_storage(os.path.dirname(text), None, os.path.basename(text), owner=owner)
    text, query = _split_options(text) if is_url(text) else (text, "")
    scheme, sep, rest = text.partition("://") if is_url(text) else ("", "", text)
    parent, _, name = rest.rstrip("/").rpartition("/")
    if not name or not parent.strip("/"):  # "s3://bucket" is no experiment directory
        raise NotAnExperimentPathError(
            f"{owner}(path={text + query!r}): expected an experiment directory, "
            "<storage_path>/<name>."
        )
    root = f"{scheme}{sep}{parent}{query}"
    return experiment_storage(root, storage_filesystem, name, owner=owner)


def staging_root() -> str:
    """``$FASTTUNE_STAGING_DIR``, else ``_staging`` in the local results directory
    (``~/fasttune_results``, or ``$FASTTUNE_STORAGE_PATH`` when that is a local path)."""
    root = os.environ.get(STAGING_DIR_ENV) or os.path.join(default_local_dir(), "_staging")
    return os.path.abspath(os.path.expanduser(root))


def staging_dir(name: str, uri: str) -> str:
    """The staging directory of the remote experiment ``uri``: one per URL, so that two
    experiments of the same name in different buckets never share one."""
    import hashlib  # here: loading OpenSSL costs 3-10 ms of every start

    digest = hashlib.sha1(uri.encode("utf-8")).hexdigest()[:10]
    return os.path.join(staging_root(), f"{name}-{digest}")


def reset_staging(storage: ExperimentStorage) -> None:
    """Empty the staging directory of a remote experiment (it may hold a crashed run's
    files, which storage does not vouch for).

    Raises:
        ExperimentInUseError: A live driver on this machine runs from it.
    """
    if not storage.is_remote:
        return
    if os.path.isdir(storage.local_path):
        lock = ExperimentLock(storage.local_path)
        lock.acquire()  # refused, naming the driver, while one runs from this directory
        lock.release()
    shutil.rmtree(storage.local_path, ignore_errors=True)
    os.makedirs(storage.local_path, exist_ok=True)


def check_writable(storage: ExperimentStorage, value: Any, *, owner: str = "RunConfig") -> None:
    """Create the experiment directory and write (then delete) a probe file in it.

    Raises:
        StorageNotWritableError: The storage cannot be written (a ValueError and an
            OSError), naming ``value`` and the reason.
    """
    fs = storage.filesystem
    probe = fs.join(storage.path, f".write_test_{uuid.uuid4().hex[:6]}")
    try:
        if fs.is_local:
            fs.makedirs(storage.path)
            with open(probe, "xb") as f:  # a plain write tells as much, without fsyncs
                f.write(b"ok")
        else:
            os.makedirs(storage.local_path, exist_ok=True)
            fs.write_bytes_atomic(probe, b"ok")
        fs.delete_files([probe])
    except Exception as e:
        reason = (e.strerror if isinstance(e, OSError) else None) or f"{type(e).__name__}: {e}"
        hint = (
            "Choose a directory you can write to, or set FASTTUNE_STORAGE_PATH."
            if fs.is_local
            else "Check that the bucket exists and that the credentials reach it (for S3: "
            "the AWS_* environment variables, AWS_ENDPOINT_URL for an S3-compatible "
            "server, or RunConfig(storage_filesystem=s3fs.S3FileSystem(...)))."
        )
        raise StorageNotWritableError(
            f"{owner}(storage_path={value!r}) is not writable: cannot create files in "
            f"{storage.uri!r} ({reason}). {hint}"
        ) from e


# ---------------------------------------------------------------------------- resolving
def _resolve_root(
    storage_path: str | os.PathLike[str] | None, storage_filesystem: Any, owner: str
) -> tuple[FileSystem, str, str]:
    """(filesystem, root within it, root as a URI or local path)."""
    if storage_filesystem is not None:
        fs = _wrap_filesystem(storage_filesystem, owner)
        if storage_path is None:
            raise ValueError(
                f"{owner}(storage_filesystem={_short(storage_filesystem)}) needs storage_path "
                "too: the directory inside that filesystem (e.g. 'bucket/prefix')."
            )
        text = os.fspath(storage_path)
        if fs.is_local:
            root = _local_path(text)
            return fs, root, root
        assert isinstance(fs, FsspecFileSystem)
        root = fs.fs._strip_protocol(text).rstrip("/")
        return fs, root, fs.fs.unstrip_protocol(root)
    text = os.fspath(storage_path) if storage_path is not None else default_storage_path()
    if not is_url(text):
        root = _local_path(text)
        return local_filesystem(), root, root
    opened = _opened_with_options(text, owner, "storage_path")
    if opened is not None:
        base, query = _split_options(text)
        return opened[0], opened[1], base.rstrip("/") + query
    fs = FsspecFileSystem(_fsspec_for(text, owner))
    root = fs.fs._strip_protocol(text).rstrip("/")
    return fs, root, text.rstrip("/")


def filesystem_and_path(
    path: str | os.PathLike[str],
    storage_filesystem: Any = None,
    *,
    owner: str,
    param: str,
    fs_param: str = "storage_filesystem",
) -> tuple[FileSystem, str]:
    """The filesystem serving ``path`` and the path within it, for reading: inside
    ``storage_filesystem`` (fasttune, fsspec or pyarrow) when given, else inferred from
    ``path`` (a local path, an fsspec URL, or a URL with pyarrow's options after ``?``).

    Raises:
        TypeError: ``storage_filesystem`` is not a filesystem.
        ValueError: pyarrow cannot open a URL with options.
        MissingDependencyError: The package serving the URL is not installed.
    """
    text = os.fspath(path)
    if storage_filesystem is not None:
        fs = _wrap_filesystem(storage_filesystem, owner, fs_param)
        if fs.is_local:
            return fs, _local_path(text)
        return fs, text
    opened = _opened_with_options(text, owner, param) if is_url(text) else None
    return opened if opened is not None else get_fs_and_path(text)


def _local_path(text: str) -> str:
    """A local path as given (``~``, ``file://``, relative) made absolute."""
    return os.path.abspath(os.path.expanduser(text.removeprefix("file://")))


def _split_options(url: str) -> tuple[str, str]:
    """``(url without its options, "?options" or "")``."""
    base, sep, query = url.partition("?")
    return base, sep + query


def _opened_with_options(url: str, owner: str, param: str) -> tuple[FileSystem, str] | None:
    """``(filesystem, path in it)`` of a URL with options after ``?``, opened as Ray
    opens it (:func:`_pyarrow_from_uri`); None for a URL without options."""
    if not _split_options(url)[1]:
        return None
    arrow_fs, path = _pyarrow_from_uri(url, owner, param)
    return _wrap_filesystem(arrow_fs, owner), path.rstrip("/")


def _pyarrow_from_uri(url: str, owner: str, param: str) -> tuple[Any, str]:
    """The pyarrow filesystem and path of a URL with options after ``?``
    (``endpoint_override``, ``scheme``, ``region``...), read as Ray Tune reads them:
    with ``pyarrow.fs.FileSystem.from_uri``."""
    try:
        from pyarrow import fs as pyarrow_fs
    except ImportError as e:
        raise MissingDependencyError(
            f"{owner}({param}={url!r}): a URL with options after '?' is read by "
            "pyarrow (as Ray Tune reads it), which is not installed. Install it with: "
            "pip install pyarrow; or pass RunConfig(storage_filesystem=s3fs.S3FileSystem("
            "endpoint_url=...), storage_path='bucket/prefix')."
        ) from e
    try:
        return pyarrow_fs.FileSystem.from_uri(url)
    except Exception as e:  # pyarrow's ArrowInvalid, ArrowNotImplementedError...
        raise ValueError(
            f"{owner}({param}={url!r}): pyarrow cannot open this URL ({e}). Its "
            "options are pyarrow's (for s3://: endpoint_override, scheme, region, "
            "access_key, secret_key...)."
        ) from e


def _fsspec_for(url: str, owner: str) -> Any:
    """The fsspec filesystem serving ``url``, with errors that say what to do."""
    scheme = url.partition("://")[0]
    package, extra = _PACKAGES.get(scheme, (None, "fsspec"))
    try:
        import fsspec
    except ImportError as e:
        raise MissingDependencyError(
            f"{owner}(storage_path={url!r}) needs fsspec for {scheme}:// URLs, which is not "
            f'installed. Install it with: pip install "fasttune[{extra}]"'
        ) from e
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError as e:
        raise ValueError(
            f"{owner}(storage_path={url!r}): unknown storage scheme {scheme!r}. Use a local "
            "directory or an fsspec URL such as 's3://bucket/prefix' (pip install "
            '"fasttune[s3]") or \'gs://bucket/prefix\' (pip install "fasttune[gcs]").'
        ) from e
    except ImportError as e:
        install = f'"fasttune[{extra}]"' if package else f"the package it names ({e})"
        raise MissingDependencyError(
            f"{owner}(storage_path={url!r}) needs {package or 'a filesystem package'} for "
            f"{scheme}:// URLs, which is not installed. Install it with: pip install {install}"
        ) from e
    fs, _ = fsspec.core.url_to_fs(url)
    return fs


def _wrap_filesystem(obj: Any, owner: str, param: str = "storage_filesystem") -> FileSystem:
    """``storage_filesystem`` as a fasttune ``FileSystem`` (local ones as the local one)."""
    if isinstance(obj, FileSystem):
        return obj
    fsspec = sys.modules.get("fsspec")
    if fsspec is not None and isinstance(obj, fsspec.AbstractFileSystem):
        protocols = (obj.protocol,) if isinstance(obj.protocol, str) else tuple(obj.protocol)
        return local_filesystem() if "file" in protocols else FsspecFileSystem(obj)
    pyarrow_fs = sys.modules.get("pyarrow.fs")
    if pyarrow_fs is not None and isinstance(obj, pyarrow_fs.FileSystem):
        if isinstance(obj, pyarrow_fs.LocalFileSystem):
            return local_filesystem()
        handler = getattr(obj, "handler", None)  # a PyFileSystem
        if isinstance(handler, pyarrow_fs.FSSpecHandler):
            # fsspec's filesystem inside (Checkpoint.filesystem gives such a view).
            return _wrap_filesystem(handler.fs, owner, param)
        try:
            from fsspec.implementations.arrow import ArrowFSWrapper
        except ImportError as e:
            raise MissingDependencyError(
                f"{owner}({param}={_short(obj)}) needs fsspec to use a pyarrow "
                "filesystem, which is not installed. Install it with: "
                'pip install "fasttune[fsspec]"'
            ) from e
        return FsspecFileSystem(ArrowFSWrapper(obj))
    raise TypeError(
        f"{owner}({param}=...) must be an fsspec filesystem (e.g. "
        "s3fs.S3FileSystem(...)), a pyarrow.fs.FileSystem or a fasttune.storage.FileSystem, "
        f"got {type(obj).__name__}: {_short(obj)}"
    )


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."
