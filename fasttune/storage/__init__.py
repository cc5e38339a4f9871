"""Storage: the filesystem layer, atomic writes, and (later) experiment layout."""

from fasttune.storage.filesystem import (
    FileSystem,
    FsspecFileSystem,
    LocalFileSystem,
    atomic_open,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    get_fs_and_path,
    is_url,
)

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
