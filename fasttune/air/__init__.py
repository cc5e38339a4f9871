"""Ray AIR's import paths that Tune scripts still use (``ray.air``).

``fasttune.air.integrations`` holds the experiment-tracker callbacks; the config
classes are at ``fasttune.air`` as in Ray (each loads on first use).
"""

from __future__ import annotations

from fasttune._support.lazy_names import lazy_names

_LAZY = {
    "Checkpoint": "fasttune.checkpoint",
    "CheckpointConfig": "fasttune.config",
    "FailureConfig": "fasttune.config",
    "RunConfig": "fasttune.config",
    "Result": "fasttune.results",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_names(globals(), _LAZY)
