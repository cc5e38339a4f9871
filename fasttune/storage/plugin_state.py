"""Plugin state on disk: one pickle, written atomically, on any storage fasttune serves."""

from __future__ import annotations

import fnmatch
import os
import pickle
from typing import Any

import cloudpickle

from fasttune.storage.filesystem import get_fs_and_path


def write_pickle(path: str | os.PathLike[str], obj: Any) -> None:
    """Pickle ``obj`` (cloudpickle: lambdas in search spaces survive) to ``path`` atomically."""
    fs, inner = get_fs_and_path(path)
    fs.write_bytes_atomic(inner, cloudpickle.dumps(obj))


def read_pickle(path: str | os.PathLike[str]) -> Any:
    """Load what :func:`write_pickle` wrote."""
    fs, inner = get_fs_and_path(path)
    return pickle.loads(fs.read_bytes(inner))


def newest_matching(directory: str | os.PathLike[str], pattern: str) -> str | None:
    """The lexically greatest file in ``directory`` matching ``pattern``, or None.

    Returns the path in the form given (a URL stays a URL).
    """
    fs, inner = get_fs_and_path(directory)
    if not fs.isdir(inner):
        return None
    names = [name for name in fs.listdir(inner) if fnmatch.fnmatchcase(name, pattern)]
    if not names:
        return None
    return f"{os.fspath(directory).rstrip('/')}/{max(names)}"
