"""Storage: the filesystem layer, atomic writes, and (later) experiment layout."""

from fasttune.storage.filesystem import (
    FileSystem,
    LocalFileSystem,
    atomic_open,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    get_fs_and_path,
    is_url,
)
from fasttune.storage.fsspec_filesystem import FsspecFileSystem

__all__ = [
    "FileSystem",
    "FsspecFileSystem",
    "LocalFileSystem",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "get_fs_and_path",
    "is_url",
]
