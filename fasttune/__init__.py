"""fasttune: Ray Tune's API for hyperparameter tuning, fast and local-first.

Write ``import fasttune as tune`` where you wrote ``from ray import tune``.
"""

import importlib
from typing import Any

from fasttune.checkpoint import Checkpoint
from fasttune.execution.placement_groups import PlacementGroupFactory
from fasttune.search.sample import (
    choice,
    grid_search,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)
from fasttune.trainable import (
    FunctionTrainable,
    Trainable,
    TuneContext,
    get_checkpoint,
    get_context,
    report,
    with_parameters,
    with_resources,
)

__version__ = "0.1.0"

# Submodules reachable as attributes (``tune.utils``, ``tune.logger``), imported on
# first use so that ``import fasttune`` stays fast.
_LAZY_SUBMODULES = {"logger", "utils", "search", "execution", "trainable", "result", "context"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"fasttune.{name}")
    raise AttributeError(f"module 'fasttune' has no attribute {name!r}")


__all__ = [
    "Checkpoint",
    "FunctionTrainable",
    "PlacementGroupFactory",
    "Trainable",
    "TuneContext",
    "choice",
    "get_checkpoint",
    "get_context",
    "grid_search",
    "logger",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "report",
    "sample_from",
    "uniform",
    "utils",
    "with_parameters",
    "with_resources",
]
