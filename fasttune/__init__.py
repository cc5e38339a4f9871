"""fasttune: Ray Tune's API for hyperparameter tuning, fast and local-first.

Write ``import fasttune as tune`` where you wrote ``from ray import tune``.
"""

import importlib
from typing import Any

from fasttune.checkpoint import Checkpoint
from fasttune.config import CheckpointConfig, FailureConfig, RunConfig, SyncConfig
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
from fasttune.tune_config import TuneConfig
from fasttune.tuner import Tuner

__version__ = "0.1.0"

# Submodules reachable as attributes (``tune.utils``, ``tune.logger``), imported on
# first use so that ``import fasttune`` stays fast.
_LAZY_SUBMODULES = {
    "logger", "utils", "search", "execution", "trainable", "result", "context", "schedulers",
    "stopper", "experiment", "progress", "callback", "results",
}  # fmt: skip


# Public names whose modules are imported on first use.
_LAZY_ATTRIBUTES = {
    "run": "fasttune.tune",
    "ResultGrid": "fasttune.results",
    "Result": "fasttune.results",
    "ExperimentAnalysis": "fasttune.results",
    "Callback": "fasttune.callback",
    "Stopper": "fasttune.stopper",
    "ProgressReporter": "fasttune.progress",
    "CLIReporter": "fasttune.progress",
    "JupyterNotebookReporter": "fasttune.progress",
    "register_trainable": "fasttune.registry",
    "register_env": "fasttune.registry",
    "TuneError": "fasttune.errors",
    "init": "fasttune._internal.resources",
    "shutdown": "fasttune._internal.resources",
    "is_initialized": "fasttune._internal.resources",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"fasttune.{name}")
    if name in _LAZY_ATTRIBUTES:
        return getattr(importlib.import_module(_LAZY_ATTRIBUTES[name]), name)
    raise AttributeError(f"module 'fasttune' has no attribute {name!r}")


__all__ = [
    "CLIReporter",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "ExperimentAnalysis",
    "FailureConfig",
    "FunctionTrainable",
    "JupyterNotebookReporter",
    "PlacementGroupFactory",
    "ProgressReporter",
    "Result",
    "ResultGrid",
    "RunConfig",
    "Stopper",
    "SyncConfig",
    "Trainable",
    "TuneConfig",
    "TuneContext",
    "TuneError",
    "Tuner",
    "choice",
    "get_checkpoint",
    "get_context",
    "grid_search",
    "init",
    "is_initialized",
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
    "register_env",
    "register_trainable",
    "report",
    "run",
    "sample_from",
    "shutdown",
    "uniform",
    "utils",
    "with_parameters",
    "with_resources",
]
