"""Calling hpbandster's ``BOHB`` config generator the way ``TuneBOHB`` needs.

- :func:`import_bohb`: the class, or an ImportError naming ``fasttune[bohb]``;
- :class:`Job`: the finished-run record ``BOHB.new_result`` reads;
- :class:`~fasttune.search._rng.NumpyState` (imported here too, where pickled BOHB
  states look for it): BOHB samples from numpy's *global* random state; each
  searcher keeps its own, swapped in around every call;
- :func:`quiet`: hides warnings the user cannot act on (hpbandster uses ConfigSpace
  APIs that 1.x deprecates; statsmodels warns about numpy's default generator and
  degenerate kernels);
- :class:`DebugLogger`: hpbandster's sampling diagnostics (KDE dumps) at DEBUG.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.search._rng import NumpyState

__all__ = ["DebugLogger", "Job", "NumpyState", "import_bohb", "quiet"]


def import_bohb() -> Any:
    """hpbandster's ``BOHB`` config generator class (ConfigSpace is checked too).

    Raises:
        ImportError: Naming ``pip install "fasttune[bohb]"`` if either is missing.
    """
    import_optional("ConfigSpace", extra="bohb", feature="TuneBOHB")
    import_optional("hpbandster", extra="bohb", feature="TuneBOHB")
    module = import_optional(
        "hpbandster.optimizers.config_generators.bohb", extra="bohb", feature="TuneBOHB"
    )
    return module.BOHB


class Job:
    """One evaluation of ``config`` at ``budget``, as hpbandster's dispatcher reports it.

    Example:
        >>> Job(0.5, 3.0, {"x": 1}).kwargs
        {'budget': 3.0, 'config': {'x': 1}}
    """

    def __init__(self, loss: float, budget: float, config: dict[str, Any]):
        self.result = {"loss": loss}
        self.kwargs = {"budget": budget, "config": dict(config)}
        self.exception = None


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Hide the deprecation and numerical warnings hpbandster's code raises."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        # A categorical the good configs all agree on: statsmodels divides by zero.
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="statsmodels")
        yield


class DebugLogger(logging.LoggerAdapter):
    """hpbandster's warnings at DEBUG: its KDE dumps are nothing the user can fix."""

    def warning(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        self.debug(msg, *args, **kwargs)
