"""``ray.train``'s names that Tune scripts use, at ``fasttune.train`` (each loads on use).

Example:
    >>> from fasttune.train import Checkpoint, RunConfig, report
"""

from __future__ import annotations

from fasttune._support.lazy_names import lazy_names

_LAZY = {
    "Checkpoint": "fasttune.checkpoint",
    "CheckpointConfig": "fasttune.config",
    "FailureConfig": "fasttune.config",
    "RunConfig": "fasttune.config",
    "Result": "fasttune.results",
    "SyncConfig": "fasttune.config",
    "report": "fasttune.trainable.session",
    "get_checkpoint": "fasttune.trainable.session",
    "get_context": "fasttune.trainable.context",
    "TuneContext": "fasttune.trainable.context",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_names(globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
