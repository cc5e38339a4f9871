"""Real experiment folders made by real runs, shared by the CLI, plot and dashboard tests.

``project`` holds three finished experiments (``errors``: two trials fail;
``asha``: ASHA stops some trials early; ``pbt``: PBT exploits checkpoints).
``make_hyperband`` runs one under HyperBand (a fixture of its own: ``lsx`` tests
count the project's experiments). ``running_experiment`` starts a slow run in its own
process and yields while it runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import fasttune as tune
from fasttune.schedulers import ASHAScheduler, HyperBandScheduler, PopulationBasedTraining


def failing(config: dict[str, Any]) -> None:
    print(f"training with x={config['x']}")
    for i in range(1, 6):
        if config["x"] > 0.8 and i == 3:
            raise ValueError(f"x={config['x']} is too large")
        tune.report({"loss": (config["x"] - 0.3) ** 2 + 1.0 / i, "acc": config["x"] * i})


def curve(config: dict[str, Any]) -> None:
    for i in range(1, 13):
        tune.report({"score": config["lr"] * i + (1 if config["opt"] == "adam" else 0)})


def pbt_trainable(config: dict[str, Any]) -> None:
    step, checkpoint = 0, tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "s.json")) as f:
            step = json.load(f)["step"]
    while step < 12:
        step += 1
        folder = tempfile.mkdtemp()
        with open(os.path.join(folder, "s.json"), "w") as f:
            json.dump({"step": step}, f)
        tune.report(
            {"score": config["lr"] * step}, checkpoint=tune.Checkpoint.from_directory(folder)
        )


def make_project(root: str) -> str:
    """Run the three experiments into ``root`` (about 3 s on 2 cores)."""
    tune.init(num_cpus=2, num_gpus=0)
    try:
        tune.Tuner(
            failing,
            param_space={"x": tune.grid_search([0.1, 0.3, 0.5, 0.9, 0.95]), "tag": "a"},
            tune_config=tune.TuneConfig(metric="loss", mode="min"),
            run_config=tune.RunConfig(
                storage_path=root, name="errors", verbose=0, log_to_file=True
            ),
        ).fit()
        tune.Tuner(
            curve,
            param_space={"lr": tune.uniform(0.01, 1.0), "opt": tune.choice(["adam", "sgd"])},
            tune_config=tune.TuneConfig(
                metric="score",
                mode="max",
                num_samples=12,
                seed=1,
                scheduler=ASHAScheduler(max_t=12, grace_period=2, reduction_factor=2),
            ),
            run_config=tune.RunConfig(storage_path=root, name="asha", verbose=0),
        ).fit()
        tune.Tuner(
            pbt_trainable,
            param_space={"lr": tune.uniform(0.1, 1.0)},
            tune_config=tune.TuneConfig(
                metric="score",
                mode="max",
                num_samples=4,
                seed=2,
                scheduler=PopulationBasedTraining(
                    time_attr="training_iteration",
                    perturbation_interval=3,
                    hyperparam_mutations={"lr": tune.uniform(0.1, 1.0)},
                ),
            ),
            run_config=tune.RunConfig(storage_path=root, name="pbt", verbose=0),
        ).fit()
    finally:
        tune.shutdown()
    return root


def make_hyperband(root: str) -> str:
    """Run an experiment under HyperBand (max_t=9, eta=3: milestones 1, 3 and 9) into
    ``root``; its trials checkpoint, so promoted ones resume where they paused."""
    tune.init(num_cpus=2, num_gpus=0)
    try:
        tune.Tuner(
            pbt_trainable,  # score = lr * step, a checkpoint at each step
            param_space={"lr": tune.uniform(0.1, 1.0)},
            tune_config=tune.TuneConfig(
                metric="score",
                mode="max",
                num_samples=12,
                seed=3,
                scheduler=HyperBandScheduler(max_t=9, reduction_factor=3),
            ),
            run_config=tune.RunConfig(storage_path=root, name="hyperband", verbose=0),
        ).fit()
    finally:
        tune.shutdown()
    return os.path.join(root, "hyperband")


RUNNING_SCRIPT = """
import sys, time
import fasttune as tune

def slow(config):
    for i in range(1, 100000):
        time.sleep(0.2)
        tune.report({"loss": 1.0 / i + config["x"]})

tune.init(num_cpus=2)
tune.Tuner(
    slow,
    param_space={"x": tune.grid_search([0.1, 0.2])},
    tune_config=tune.TuneConfig(metric="loss", mode="min"),
    run_config=tune.RunConfig(storage_path=sys.argv[1], name="live", verbose=0),
).fit()
"""


def iterations_of(experiment: str) -> int:
    """The number of result lines written so far under ``experiment``."""
    total = 0
    for name in os.listdir(experiment):
        path = os.path.join(experiment, name, "result.json")
        if os.path.exists(path):
            with open(path, "rb") as f:
                total += f.read().count(b"\n")
    return total


def running_experiment(root: str) -> Iterator[str]:
    """Start the slow run, wait until both trials reported, yield its folder, kill it."""
    script = os.path.join(root, "slow_run.py")
    with open(script, "w") as f:
        f.write(RUNNING_SCRIPT)
    process = subprocess.Popen([sys.executable, script, root], cwd=os.getcwd())
    experiment = os.path.join(root, "live")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.isdir(experiment) and iterations_of(experiment) >= 4:
                break
            if process.poll() is not None:
                raise RuntimeError(f"the slow run exited early with {process.returncode}")
            time.sleep(0.1)
        else:
            raise TimeoutError("the slow run wrote no results in 60 s")
        yield experiment
    finally:
        process.kill()
        process.wait()
