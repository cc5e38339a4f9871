"""Utilities for trainables (as ``ray.tune.utils``); each loads on first use."""

import importlib
from typing import Any

_LAZY = {
    "wait_for_gpu": "fasttune.utils.gpu",
    "diagnose_serialization": "fasttune.utils.serialization",
    # It drives a Trainable, so it lives in the trainable layer, above this one; the
    # name (Ray's path) is resolved on first use and never imported from below.
    "validate_save_restore": "fasttune.trainable.validation",
    "deep_update": "fasttune.utils.util",
    "flatten_dict": "fasttune.utils.util",
    "merge_dicts": "fasttune.utils.util",
    "unflatten_dict": "fasttune.utils.util",
    "validate_warmstart": "fasttune.utils.util",
}

__all__ = [
    "deep_update",
    "diagnose_serialization",
    "flatten_dict",
    "merge_dicts",
    "unflatten_dict",
    "validate_save_restore",
    "validate_warmstart",
    "wait_for_gpu",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fasttune.utils' has no attribute {name!r}")
