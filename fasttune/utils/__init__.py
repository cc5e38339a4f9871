"""Utilities for trainables (as ``ray.tune.utils``)."""

from fasttune.utils.gpu import wait_for_gpu
from fasttune.utils.serialization import diagnose_serialization
from fasttune.utils.util import (
    deep_update,
    flatten_dict,
    merge_dicts,
    unflatten_dict,
    validate_warmstart,
)
from fasttune.utils.validation import validate_save_restore

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
