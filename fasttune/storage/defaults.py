"""Default locations."""

from __future__ import annotations

import os

from fasttune.storage.filesystem import is_url

STORAGE_PATH_ENV = "FASTTUNE_STORAGE_PATH"


def default_storage_path() -> str:
    """``$FASTTUNE_STORAGE_PATH`` if set (a local path or a URL), else ``~/fasttune_results``."""
    path = os.environ.get(STORAGE_PATH_ENV) or os.path.join("~", "fasttune_results")
    if is_url(path):
        return path
    return os.path.abspath(os.path.expanduser(path))


def default_local_dir() -> str:
    """A local directory for fasttune's files: ``$FASTTUNE_STORAGE_PATH`` when it is a local
    path, else ``~/fasttune_results`` (also when that variable is a URL)."""
    path = default_storage_path()
    return os.path.expanduser(os.path.join("~", "fasttune_results")) if is_url(path) else path
