"""fasttune: Ray Tune's API for hyperparameter tuning, fast and local-first.

Write ``import fasttune as tune`` where you wrote ``from ray import tune``. Every
public name loads its module on first use, so ``import fasttune`` costs a few
milliseconds (and a worker process loads only what its trainable uses).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasttune._support.lazy_names import lazy_names

__version__ = "0.1.0"

_SAMPLING = [
    "choice",
    "create_scheduler",
    "create_searcher", "grid_search", "lograndint", "loguniform", "qlograndint", "qloguniform",
    "qrandint", "qrandn", "quniform", "randint", "randn", "sample_from", "uniform",
]  # fmt: skip
_TRAINABLE = [
    "FunctionTrainable", "Trainable", "TuneContext", "get_checkpoint", "get_context",
    "report", "with_parameters", "with_resources",
]  # fmt: skip

# Public name -> the module that defines it.
_ATTRIBUTES: dict[str, str] = {
    **dict.fromkeys(_SAMPLING, "fasttune.search.sample"),
    **dict.fromkeys(_TRAINABLE, "fasttune.trainable"),
    "Checkpoint": "fasttune.checkpoint",
    "PlacementGroupFactory": "fasttune.execution.placement_groups",
    "CheckpointConfig": "fasttune.config",
    "FailureConfig": "fasttune.config",
    "RunConfig": "fasttune.config",
    "SyncConfig": "fasttune.config",
    "TuneConfig": "fasttune.tune_config",
    "Tuner": "fasttune.tuner",
    "run": "fasttune.tune",
    "run_experiments": "fasttune.tune",
    "Experiment": "fasttune.experiment.experiment",
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
    "TuneError": "fasttune.error",
    "create_scheduler": "fasttune.schedulers",
    "create_searcher": "fasttune.search",
    "init": "fasttune._internal.resources",
    "shutdown": "fasttune._internal.resources",
    "is_initialized": "fasttune._internal.resources",
}

# Submodules reachable as attributes (``tune.utils``, ``tune.logger``...).
_SUBMODULES = {
    "logger", "utils", "search", "execution", "trainable", "result", "context", "schedulers",
    "stopper", "experiment", "progress", "callback", "results", "registry", "tuner",
    "integration", "air", "train",
}  # fmt: skip


__getattr__ = lazy_names(globals(), _ATTRIBUTES, _SUBMODULES)


def __dir__() -> list[str]:
    return sorted({*globals(), *_ATTRIBUTES, *_SUBMODULES})


__all__ = [
    "CLIReporter",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "Experiment",
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
    "create_scheduler",
    "create_searcher",
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
    "run_experiments",
    "sample_from",
    "shutdown",
    "uniform",
    "utils",
    "with_parameters",
    "with_resources",
]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily
    from fasttune import logger, utils
    from fasttune._internal.resources import init, is_initialized, shutdown
    from fasttune.callback import Callback
    from fasttune.checkpoint import Checkpoint
    from fasttune.config import CheckpointConfig, FailureConfig, RunConfig, SyncConfig
    from fasttune.error import TuneError
    from fasttune.execution.placement_groups import PlacementGroupFactory
    from fasttune.progress import CLIReporter, JupyterNotebookReporter, ProgressReporter
    from fasttune.registry import register_env, register_trainable
    from fasttune.results import ExperimentAnalysis, Result, ResultGrid
    from fasttune.schedulers import create_scheduler
    from fasttune.search import create_searcher
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
    from fasttune.stopper import Stopper
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
    from fasttune.tune import run
    from fasttune.tune_config import TuneConfig
    from fasttune.tuner import Tuner
