"""fasttune: Ray Tune's API for hyperparameter tuning, fast and local-first.

Write ``import fasttune as tune`` where you wrote ``from ray import tune``.
"""

from fasttune import logger, utils
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
