"""Utilities for trainables (as ``ray.tune.utils``)."""

from fasttune.utils.util import deep_update, flatten_dict, merge_dicts, unflatten_dict

__all__ = ["deep_update", "flatten_dict", "merge_dicts", "unflatten_dict"]
