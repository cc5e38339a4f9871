"""``Checkpoint``: a directory of files on some filesystem (as ``ray.tune.Checkpoint``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fasttune.storage.arrow_view import arrow_filesystem
from fasttune.storage.filesystem import FileSystem, get_fs_and_path

_METADATA_FILE = ".metadata.json"


class Checkpoint:
    """A reference to a checkpoint directory, local or remote.

    Args:
        path: Directory path or URL (``s3://...``, ``memory://...``) of the checkpoint.
        filesystem: The :class:`~fasttune.storage.FileSystem`, fsspec or pyarrow
            filesystem serving ``path``; inferred from the path when omitted.

    Raises:
        TypeError: If ``path`` is not a string or path, or ``filesystem`` is not a
            filesystem.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> ckpt = Checkpoint.from_directory(d)
        >>> with ckpt.as_directory() as local:
        ...     local == ckpt.path
        True
    """

    def __init__(self, path: str | os.PathLike[str], filesystem: Any = None):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"Checkpoint(path=...) must be a directory path or URL string, got "
                f"{type(path).__name__}: {path!r}"
            )
        self._filesystem, self.path = _own_filesystem(os.fspath(path), filesystem)
        self._arrow: Any = None

    @property
    def filesystem(self) -> Any:
        """The filesystem :attr:`path` is on: a ``pyarrow.fs.FileSystem``, as in Ray
        Tune (fasttune's own :class:`~fasttune.storage.FileSystem` without pyarrow)."""
        if self._arrow is None:
            self._arrow = arrow_filesystem(self._filesystem)
        return self._arrow

    @filesystem.setter
    def filesystem(self, filesystem: Any) -> None:
        self._filesystem, self.path = _own_filesystem(self.path, filesystem)
        self._arrow = None

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """Create a checkpoint that refers to an existing directory."""
        return cls(path)

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files to a local directory (a new temp dir by default)."""
        if path is not None:
            target = os.fspath(path)
            os.makedirs(target, exist_ok=True)
            self._filesystem.download_dir(self.path, target)
            return target
        import shutil  # here: a worker process seldom needs them
        import tempfile

        target = tempfile.mkdtemp(prefix="checkpoint_tmp_")
        try:
            self._filesystem.download_dir(self.path, target)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        return target

    @contextmanager
    def as_directory(self) -> Iterator[str]:
        """Yield a local directory with the checkpoint's files.

        A local checkpoint is yielded in place (no copy, do not modify it); a remote
        one is downloaded to a temporary directory that is deleted afterwards.
        """
        if self._filesystem.is_local:
            yield self.path
            return
        import shutil

        local = self.to_directory()
        try:
            yield local
        finally:
            shutil.rmtree(local, ignore_errors=True)

    def get_metadata(self) -> dict[str, Any]:
        """Return the metadata dict stored with the checkpoint (empty if none)."""
        meta_path = self._filesystem.join(self.path, _METADATA_FILE)
        if not self._filesystem.exists(meta_path):
            return {}
        return dict(self._filesystem.read_json(meta_path))

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Replace the checkpoint's metadata (must be JSON-serialisable)."""
        _check_metadata_dict("set_metadata", metadata)
        try:
            text = json.dumps(metadata)
        except (TypeError, ValueError) as e:  # ValueError: circular reference
            raise TypeError(
                f"Checkpoint.set_metadata(metadata=...) must be JSON-serialisable: {e}"
            ) from e
        self._filesystem.makedirs(self.path)
        self._filesystem.write_text_atomic(self._filesystem.join(self.path, _METADATA_FILE), text)

    def update_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the checkpoint's metadata."""
        _check_metadata_dict("update_metadata", metadata)
        merged = self.get_metadata()
        merged.update(metadata)
        self.set_metadata(merged)

    def __repr__(self) -> str:
        return f"Checkpoint(filesystem={self._filesystem.type_name}, path={self.path})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Checkpoint)
            and other.path == self.path
            and type(other._filesystem) is type(self._filesystem)
            and other._filesystem.type_name == self._filesystem.type_name
        )

    def __hash__(self) -> int:
        return hash(self.path)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "filesystem": self._filesystem}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._filesystem = state["filesystem"]
        self._arrow = None


def _own_filesystem(path: str, filesystem: Any) -> tuple[FileSystem, str]:
    """fasttune's filesystem for ``path`` and the path within it: inferred from the path
    without ``filesystem``; a fasttune, fsspec or pyarrow ``filesystem`` (as Ray's
    Checkpoint takes) wrapped as ``RunConfig(storage_filesystem=...)`` wraps it."""
    if filesystem is None:
        return get_fs_and_path(path)
    if isinstance(filesystem, FileSystem):
        return filesystem, path
    from fasttune.storage.location import filesystem_and_path

    return filesystem_and_path(
        path, filesystem, owner="Checkpoint", param="path", fs_param="filesystem"
    )


def storage_filesystem_of(checkpoint: Checkpoint) -> FileSystem:
    """The :class:`~fasttune.storage.FileSystem` fasttune reads ``checkpoint`` with
    (its :attr:`~Checkpoint.filesystem` is pyarrow's, for users)."""
    return checkpoint._filesystem


def _check_metadata_dict(method: str, metadata: Any) -> None:
    if not isinstance(metadata, dict):
        raise TypeError(
            f"Checkpoint.{method}(metadata=...) must be a dict, got "
            f"{type(metadata).__name__}: {metadata!r}"
        )
