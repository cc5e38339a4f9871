"""The pyarrow filesystem a Ray Tune user expects where fasttune keeps its own.

Ray Tune's ``Result.filesystem``, ``ResultGrid.filesystem`` and
``Checkpoint.filesystem`` are ``pyarrow.fs.FileSystem`` objects, and user code calls
pyarrow on them (``open_input_stream``, ``get_file_info``, ``pyarrow.fs.copy_files``).
fasttune reads and writes through :class:`~fasttune.storage.FileSystem`; these
attributes give a pyarrow filesystem serving the same paths, made when they are read:
the user's own pyarrow filesystem when one was given, ``LocalFileSystem`` for local
paths, and an fsspec filesystem (S3, GCS, memory...) wrapped in ``PyFileSystem``.
Without pyarrow installed they give fasttune's own filesystem.
"""

from __future__ import annotations

from typing import Any

from fasttune.storage.filesystem import FileSystem


def arrow_filesystem(filesystem: FileSystem) -> Any:
    """A ``pyarrow.fs.FileSystem`` serving the paths ``filesystem`` serves, the same
    path strings included; ``filesystem`` itself when pyarrow is not installed or
    cannot serve it."""
    try:
        from pyarrow import fs as pyarrow_fs
    except ImportError:
        return filesystem
    if filesystem.is_local:
        return pyarrow_fs.LocalFileSystem()
    inner = getattr(filesystem, "fs", None)  # FsspecFileSystem's fsspec filesystem
    if inner is None:
        return filesystem
    user_given = getattr(inner, "fs", None)  # a pyarrow one inside fsspec's ArrowFSWrapper
    if isinstance(user_given, pyarrow_fs.FileSystem):
        return user_given
    return pyarrow_fs.PyFileSystem(pyarrow_fs.FSSpecHandler(inner))
