"""Ray AIR's import paths that Tune scripts still use (``ray.air``).

``fasttune.air.integrations`` holds the experiment-tracker callbacks; the config
classes are at ``fasttune.air`` as in Ray (each loads on first use).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Checkpoint": "fasttune.checkpoint",
    "CheckpointConfig": "fasttune.config",
    "FailureConfig": "fasttune.config",
    "RunConfig": "fasttune.config",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fasttune.air' has no attribute {name!r}")
