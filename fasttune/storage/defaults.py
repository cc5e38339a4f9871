"""Default locations."""

from __future__ import annotations

import os

STORAGE_PATH_ENV = "FASTTUNE_STORAGE_PATH"


def default_storage_path() -> str:
    """``$FASTTUNE_STORAGE_PATH`` if set, else ``~/fasttune_results``."""
    path = os.environ.get(STORAGE_PATH_ENV) or os.path.join("~", "fasttune_results")
    return os.path.abspath(os.path.expanduser(path))
