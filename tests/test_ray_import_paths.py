"""Ray Tune's public import paths resolve under fasttune (issue 11, "Import paths").

The modules and names below are written down from Ray Tune 2.x's API reference
(docs.ray.io, "Ray Tune API"), not imported from Ray: a script rewritten mechanically
(``ray.tune.X`` -> ``fasttune.X``, ``ray.air.integrations.X`` ->
``fasttune.air.integrations.X``, ``ray.train.X`` -> ``fasttune.train.X``) must import.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

RAY_TUNE_PATHS: dict[str, list[str]] = {
    # ray.tune
    "fasttune": [
        "Tuner", "TuneConfig", "RunConfig", "CheckpointConfig", "FailureConfig", "SyncConfig",
        "Checkpoint", "report", "get_checkpoint", "get_context", "TuneContext",
        "with_parameters", "with_resources", "Trainable", "FunctionTrainable", "Callback",
        "Stopper", "ResultGrid", "ExperimentAnalysis", "run", "TuneError",
        "uniform", "quniform", "loguniform", "qloguniform", "randn", "qrandn", "randint",
        "qrandint", "lograndint", "qlograndint", "choice", "grid_search", "sample_from",
        "register_trainable", "register_env", "PlacementGroupFactory", "CLIReporter",
        "JupyterNotebookReporter", "ProgressReporter", "create_scheduler", "create_searcher",
    ],
    "fasttune.schedulers": [
        "TrialScheduler", "FIFOScheduler", "AsyncHyperBandScheduler", "ASHAScheduler",
        "HyperBandScheduler", "MedianStoppingRule", "PopulationBasedTraining",
        "PopulationBasedTrainingReplay", "PB2", "HyperBandForBOHB",
        "ResourceChangingScheduler", "create_scheduler",
    ],
    "fasttune.schedulers.pb2": ["PB2"],
    "fasttune.schedulers.resource_changing_scheduler": [
        "DistributeResources", "DistributeResourcesToTopJob",
    ],
    "fasttune.search": [
        "Searcher", "SearchAlgorithm", "BasicVariantGenerator", "ConcurrencyLimiter",
        "Repeater", "SearchGenerator", "create_searcher",
    ],
    "fasttune.search.basic_variant": ["BasicVariantGenerator"],
    "fasttune.search.optuna": ["OptunaSearch"],
    "fasttune.search.hyperopt": ["HyperOptSearch"],
    "fasttune.search.bayesopt": ["BayesOptSearch"],
    "fasttune.search.nevergrad": ["NevergradSearch"],
    "fasttune.search.bohb": ["TuneBOHB"],
    "fasttune.search.zoopt": ["ZOOptSearch"],
    "fasttune.search.ax": ["AxSearch"],
    "fasttune.search.hebo": ["HEBOSearch"],
    "fasttune.stopper": [
        "Stopper", "CombinedStopper", "FunctionStopper", "MaximumIterationStopper",
        "ExperimentPlateauStopper", "TrialPlateauStopper", "TimeoutStopper",
    ],
    "fasttune.logger": [
        "LoggerCallback", "CSVLoggerCallback", "JsonLoggerCallback", "TBXLoggerCallback",
        "Logger", "CSVLogger", "JsonLogger", "TBXLogger", "NoopLogger", "UnifiedLogger",
    ],
    "fasttune.logger.aim": ["AimLoggerCallback"],
    "fasttune.logger.csv": ["CSVLogger", "CSVLoggerCallback"],
    "fasttune.logger.json": ["JsonLogger", "JsonLoggerCallback"],
    "fasttune.logger.tensorboardx": ["TBXLogger", "TBXLoggerCallback"],
    "fasttune.logger.mlflow": ["MLflowLoggerCallback"],
    "fasttune.logger.wandb": ["WandbLoggerCallback"],
    "fasttune.logger.comet": ["CometLoggerCallback"],
    "fasttune.experiment": ["Trial"],
    "fasttune.execution.placement_groups": ["PlacementGroupFactory"],
    "fasttune.utils": ["wait_for_gpu", "diagnose_serialization", "validate_save_restore"],
    "fasttune.utils.mock_trainable": ["MyTrainableClass"],
    "fasttune.progress_reporter": ["CLIReporter", "JupyterNotebookReporter", "ProgressReporter"],
    "fasttune.result_grid": ["ResultGrid"],
    "fasttune.analysis": ["ExperimentAnalysis"],
    "fasttune.registry": ["register_trainable", "register_env"],
    "fasttune.error": ["TuneError"],
    "fasttune.trainable": ["Trainable", "FunctionTrainable"],
    "fasttune.track": ["TrackSession"],  # the legacy tune.track API
    "fasttune.track.session": ["TrackSession"],
    # ray.tune.integration.*
    "fasttune.integration.xgboost": ["TuneReportCallback", "TuneReportCheckpointCallback"],
    "fasttune.integration.lightgbm": ["TuneReportCallback", "TuneReportCheckpointCallback"],
    "fasttune.integration.pytorch_lightning": [
        "TuneReportCallback", "TuneReportCheckpointCallback",
    ],
    "fasttune.integration.keras": ["TuneReportCallback", "TuneReportCheckpointCallback"],
    # ray.air.integrations.*
    "fasttune.air.integrations.keras": ["ReportCheckpointCallback"],
    "fasttune.air.integrations.mlflow": ["MLflowLoggerCallback", "setup_mlflow"],
    "fasttune.air.integrations.wandb": ["WandbLoggerCallback", "setup_wandb"],
    "fasttune.air.integrations.comet": ["CometLoggerCallback"],
    "fasttune.air": ["RunConfig", "CheckpointConfig", "FailureConfig", "Checkpoint", "Result"],
    # ray.train names used with Tune
    "fasttune.train": [
        "Checkpoint", "RunConfig", "CheckpointConfig", "FailureConfig", "report",
        "get_checkpoint", "get_context", "Result",
    ],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(RAY_TUNE_PATHS))
def test_ray_tune_module_and_names_resolve(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in RAY_TUNE_PATHS[module] if not hasattr(imported, name)]
    assert not missing, f"{module} lacks {missing}"


@pytest.mark.parametrize(
    ("module", "name", "home"),
    [
        ("fasttune.logger.csv", "CSVLoggerCallback", "fasttune.logger"),
        ("fasttune.logger.json", "JsonLoggerCallback", "fasttune.logger"),
        ("fasttune.logger.tensorboardx", "TBXLoggerCallback", "fasttune.logger"),
        ("fasttune.logger.mlflow", "MLflowLoggerCallback", "fasttune.air.integrations.mlflow"),
        ("fasttune.logger.wandb", "WandbLoggerCallback", "fasttune.air.integrations.wandb"),
        ("fasttune.logger.comet", "CometLoggerCallback", "fasttune.air.integrations.comet"),
    ],
)
def test_ray_s_logger_module_paths_are_the_same_classes(module: str, name: str, home: str) -> None:
    # `from ray.tune.logger.csv import CSVLoggerCallback` and the like, in a fresh
    # interpreter (no import cycle whichever module comes first), give the one class.
    code = (
        f"from {module} import {name} as a\n"
        f"from {home} import {name} as b\n"
        "assert a is b, (a, b)\n"
        f"import {module} as m\n"
        "try:\n    m.NoSuchName\nexcept AttributeError:\n    pass\n"
        "else:\n    raise SystemExit('unknown names must raise AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
