"""``ray.train``'s names that Tune scripts use, at ``fasttune.train`` (each loads on use).

Example:
    >>> from fasttune.train import Checkpoint, RunConfig, report
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Checkpoint": "fasttune.checkpoint",
    "CheckpointConfig": "fasttune.config",
    "FailureConfig": "fasttune.config",
    "RunConfig": "fasttune.config",
    "SyncConfig": "fasttune.config",
    "report": "fasttune.trainable.session",
    "get_checkpoint": "fasttune.trainable.session",
    "get_context": "fasttune.trainable.context",
    "TuneContext": "fasttune.trainable.context",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fasttune.train' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
