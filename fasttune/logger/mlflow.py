"""``MLflowLoggerCallback``, also at Ray's ``ray.tune.logger.mlflow`` path.

The callback lives in :mod:`fasttune.air.integrations.mlflow`; it is loaded on first use
(a name looked up, as ``fasttune/__init__.py`` does: the tracker sits in a layer
above this package).
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "MLflowLoggerCallback":
        return getattr(importlib.import_module("fasttune.air.integrations.mlflow"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
