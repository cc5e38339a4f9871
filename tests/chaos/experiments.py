"""Deterministic experiments for the chaos suite, run as their own (killed) process.

Each trial counts its iterations in its checkpoint (every iteration), reports that
counter, and appends every iteration it *starts* to a side log outside the
experiment, so the checks can tell what ran, not only what was recorded. A callback
appends every completion to another side log. Results are a pure function of the
config and the iteration, so an uninterrupted run is the reference.

PBT (``pbt``) changes a trial's config when it exploits another trial, so there the side
logs and checkpoint folders are named by trial id rather than by config.

Usage: python -m tests.chaos.experiments KIND STORAGE SIDE_DIR
KIND: random | asha | optuna | pbt
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import fasttune as tune

ITERATIONS = 10
TRIALS = 8
# Every second iteration: a kill after an odd iteration makes the trial resume from the
# checkpoint before it, so its result files must be cut back (each iteration once).
CHECKPOINT_EVERY = 2
NAME = "chaos"
# PBT: a population of 4 running at once, perturbed at every checkpoint (synch), its
# draws from the `random` module seeded here (the scheduler has no seed of its own).
POPULATION = 4
PBT_SEED = 7


def trials_of(kind: str) -> int:
    return POPULATION if kind == "pbt" else TRIALS


def side_key(config: dict[str, Any]) -> str:
    """The name of a trial's side log: its config x, or (PBT) its trial id."""
    if config.get("by_trial_id"):
        return str(tune.get_context().get_trial_id())
    return f"{config['x']:.6f}"


def counting(config: dict[str, Any]) -> None:
    """Score ``-(x - 0.3)^2 + iteration / 100``; a checkpoint every CHECKPOINT_EVERY."""
    counter = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "counter")) as f:
            counter = int(f.read())
    side = os.path.join(config["side_dir"], f"{side_key(config)}.log")
    while counter < ITERATIONS:
        counter += 1
        with open(side, "a") as f:
            f.write(f"{counter}\n")
        time.sleep(0.04)
        score = -((config["x"] - 0.3) ** 2) + counter / 100
        checkpoint = None
        if counter % CHECKPOINT_EVERY == 0:
            directory = os.path.join(config["side_dir"], "checkpoints", side_key(config))
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, "counter"), "w") as f:
                f.write(str(counter))
            checkpoint = tune.Checkpoint.from_directory(directory)
        tune.report({"score": score, "counter": counter}, checkpoint=checkpoint)


class CompletionLog(tune.Callback):
    """Appends each completed trial's config x to a side file (restored with the run).

    It is also a slow user callback (20 ms per result), which widens the moments when
    a result line is written but its checkpoint not yet recorded.
    """

    def __init__(self, path: str):
        self.path = path

    def on_trial_result(self, iteration, trials, trial, result, **info):
        time.sleep(0.02)

    def on_trial_complete(self, iteration, trials, trial, **info):
        with open(self.path, "a") as f:
            f.write(json.dumps({"x": trial.config["x"], "trial_id": trial.trial_id}) + "\n")


def make_tuner(kind: str, storage: str, side_dir: str) -> tune.Tuner:
    tune_config: dict[str, Any] = {"num_samples": trials_of(kind), "metric": "score", "mode": "max"}
    param_space: dict[str, Any] = {"x": tune.uniform(0, 1), "side_dir": side_dir}
    if kind == "random":
        tune_config.update(seed=7, max_concurrent_trials=2)
    elif kind == "asha":
        from fasttune.schedulers import ASHAScheduler

        # One trial at a time: ASHA's decisions then depend on nothing but the results.
        tune_config.update(
            seed=7,
            max_concurrent_trials=1,
            scheduler=ASHAScheduler(max_t=ITERATIONS, grace_period=2, reduction_factor=2),
        )
    elif kind == "optuna":
        from optuna.samplers import TPESampler

        from fasttune.search.optuna import OptunaSearch

        tune_config.update(
            max_concurrent_trials=1,
            search_alg=OptunaSearch(sampler=TPESampler(seed=7, n_startup_trials=3)),
        )
    elif kind == "pbt":
        from fasttune.schedulers import PopulationBasedTraining

        # synch: every trial waits at each perturbation point and all are perturbed
        # together, so the decisions depend on the results only (not on timing).
        tune_config.update(
            seed=7,
            max_concurrent_trials=POPULATION,
            scheduler=PopulationBasedTraining(
                time_attr="training_iteration",
                perturbation_interval=CHECKPOINT_EVERY,
                hyperparam_mutations={"x": tune.uniform(0, 1)},
                quantile_fraction=0.25,
                synch=True,
            ),
        )
        param_space["by_trial_id"] = True
    else:
        raise ValueError(f"unknown chaos experiment {kind!r}")
    return tune.Tuner(
        counting,
        param_space=param_space,
        tune_config=tune.TuneConfig(**tune_config),
        run_config=tune.RunConfig(
            storage_path=storage,
            name=NAME,
            verbose=0,
            callbacks=[CompletionLog(os.path.join(side_dir, "completions.jsonl"))],
            # Workers and the fork server are killed too: a trial that loses its worker
            # is retried from its newest checkpoint.
            failure_config=tune.FailureConfig(max_failures=-1),
        ),
    )


def run(kind: str, storage: str, side_dir: str) -> None:
    if kind == "pbt":
        import random

        random.seed(PBT_SEED)  # PBT's draws (on a restore, its saved state takes over)
    # PBT's population runs at once (its trials sleep, so 2 cores are enough).
    tune.init(num_cpus=POPULATION if kind == "pbt" else 2)
    path = os.path.join(storage, NAME)
    if tune.Tuner.can_restore(path):
        tuner = tune.Tuner.restore(path, trainable=counting)
    else:
        tuner = make_tuner(kind, storage, side_dir)
    print("started", flush=True)
    tuner.fit()
    print("finished", flush=True)


if __name__ == "__main__":
    run(*sys.argv[1:4])
