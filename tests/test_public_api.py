"""The public namespace matches ``ray.tune`` for the parts built so far, and stays light."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import fasttune as tune

PUBLIC_NAMES = [
    "Tuner", "TuneConfig", "RunConfig", "CheckpointConfig", "FailureConfig", "SyncConfig",
    "ResultGrid", "Result", "ExperimentAnalysis", "run", "Callback", "Stopper", "TuneError",
    "register_trainable", "register_env", "CLIReporter", "JupyterNotebookReporter",
    "ProgressReporter", "init",
    "Trainable", "FunctionTrainable", "report", "get_checkpoint", "get_context", "TuneContext",
    "Checkpoint", "with_parameters", "with_resources", "PlacementGroupFactory",
    "uniform", "quniform", "loguniform", "qloguniform", "randn", "qrandn", "randint",
    "qrandint", "lograndint", "qlograndint", "choice", "grid_search", "sample_from",
]  # fmt: skip


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_top_level_names(name):
    assert getattr(tune, name) is not None
    assert name in tune.__all__


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("fasttune.trainable", ["Trainable", "FunctionTrainable", "with_parameters"]),
        ("fasttune.tuner", ["Tuner"]),
        ("fasttune.tune_config", ["TuneConfig"]),
        ("fasttune.result_grid", ["ResultGrid"]),
        ("fasttune.analysis", ["ExperimentAnalysis"]),
        ("fasttune.callback", ["Callback"]),
        ("fasttune.error", ["TuneError"]),
        ("fasttune.experiment", ["Trial"]),
        ("fasttune.registry", ["register_trainable"]),
        ("fasttune.schedulers", ["TrialScheduler", "FIFOScheduler"]),
        ("fasttune.stopper", ["Stopper", "MaximumIterationStopper", "TimeoutStopper"]),
        ("fasttune.search", ["Searcher", "BasicVariantGenerator", "SearchGenerator"]),
        ("fasttune.progress_reporter", ["CLIReporter", "JupyterNotebookReporter"]),
        ("fasttune.trainable.trainable", ["Trainable"]),
        ("fasttune.trainable.function_trainable", ["FunctionTrainable", "wrap_function"]),
        ("fasttune.search.sample", ["Domain", "Float", "Integer", "Categorical", "Function"]),
        ("fasttune.search.variant_generator", ["generate_variants", "grid_search"]),
        ("fasttune.logger", ["Logger", "JsonLogger", "CSVLogger", "TBXLogger", "UnifiedLogger"]),
        ("fasttune.execution.placement_groups", ["PlacementGroupFactory"]),
        ("fasttune.utils", ["validate_save_restore", "diagnose_serialization", "wait_for_gpu"]),
        ("fasttune.utils.util", ["validate_warmstart", "flatten_dict"]),
        ("fasttune.result", ["TRAINING_ITERATION", "DONE", "TIME_TOTAL_S"]),
        ("fasttune.context", ["TuneContext", "get_context"]),
    ],
)  # fmt: skip
def test_ray_module_paths_resolve(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert hasattr(mod, name), f"{module}.{name}"


def test_submodules_are_attributes():
    assert tune.utils.validate_save_restore is not None
    assert tune.logger.JsonLogger is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tune.nope


def test_import_is_light():
    code = (
        "import sys, fasttune; "
        "print(','.join(m for m in ('numpy', 'tensorboardX', 'pandas', 'psutil', 'fsspec', "
        "'optuna', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_local_run_leaves_slow_stdlib_modules_unimported(tmp_path):
    """A local run, in the driver and in the workers, imports none of the standard
    modules its usual path does not need and that cost milliseconds of every start:
    hashlib (loads OpenSSL), tarfile, html (its entity table), decimal."""
    slow = ("hashlib", "tarfile", "html", "decimal")
    code = (
        "import json, sys, fasttune as tune\n"
        f"SLOW = {slow!r}\n"
        "def trainable(config):\n"
        "    tune.report({'x': config['x'], 'worker': [m for m in SLOW if m in sys.modules]})\n"
        "grid = tune.Tuner(trainable, param_space={'x': tune.grid_search([1, 2])},\n"
        f"    run_config=tune.RunConfig(storage_path={str(tmp_path)!r}, verbose=1)).fit()\n"
        "driver = [m for m in SLOW if m in sys.modules]\n"
        "workers = sorted({m for r in grid for m in r.metrics['worker']})\n"
        "print(json.dumps({'errors': len(grid.errors), 'driver': driver, 'workers': workers}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "errors": 0,
        "driver": [],
        "workers": [],
    }
