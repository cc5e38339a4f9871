"""Alias of :mod:`fasttune.error` (Ray's module is ``ray.tune.error``)."""

from fasttune.error import TrialError, TuneError

__all__ = ["TrialError", "TuneError"]
