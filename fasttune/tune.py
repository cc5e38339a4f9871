"""The classic entry point ``fasttune.run(...)`` (as ``ray.tune.run``)."""

from __future__ import annotations

import os
from typing import Any

from fasttune.config import CheckpointConfig, FailureConfig, RunConfig
from fasttune.tune_config import TuneConfig


def run(
    run_or_experiment: Any,
    *,
    name: str | None = None,
    metric: str | None = None,
    mode: str | None = None,
    stop: Any = None,
    time_budget_s: float | None = None,
    config: dict[str, Any] | None = None,
    resources_per_trial: Any = None,
    num_samples: int = 1,
    storage_path: str | None = None,
    search_alg: Any = None,
    scheduler: Any = None,
    checkpoint_config: CheckpointConfig | None = None,
    verbose: int = 1,
    progress_reporter: Any = None,
    log_to_file: bool | str | tuple[str, str] = False,
    trial_name_creator: Any = None,
    trial_dirname_creator: Any = None,
    max_failures: int = 0,
    fail_fast: bool | str = False,
    resume: bool | str | None = None,
    reuse_actors: bool | None = None,
    raise_on_failed_trial: bool = True,
    callbacks: list[Any] | None = None,
    max_concurrent_trials: int | None = None,
    local_dir: str | None = None,
    keep_checkpoints_num: int | None = None,
    checkpoint_score_attr: str | None = None,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool | None = None,
    seed: int | None = None,
) -> Any:
    """Run an experiment and return its :class:`~fasttune.ExperimentAnalysis`.

    The arguments mean what they mean for ``ray.tune.run``; the ``Tuner`` API is
    the recommended one.

    Raises:
        TuneError: Some trials ended in ERROR and ``raise_on_failed_trial`` is True.
    """
    from fasttune.error import TuneError
    from fasttune.trainable.util import with_resources
    from fasttune.tuner import Tuner

    trainable = run_or_experiment
    if resources_per_trial is not None:
        trainable = with_resources(trainable, resources_per_trial)
    if checkpoint_config is None:
        attr: str | None
        if checkpoint_score_attr and checkpoint_score_attr.startswith("min-"):
            attr, order = checkpoint_score_attr[4:], "min"
        else:
            attr, order = checkpoint_score_attr, "max"
        checkpoint_config = CheckpointConfig(
            num_to_keep=keep_checkpoints_num,
            checkpoint_score_attribute=attr,
            checkpoint_score_order=order,
            checkpoint_frequency=checkpoint_freq,
            checkpoint_at_end=checkpoint_at_end,
        )
    run_config = RunConfig(
        name=name,
        storage_path=storage_path or local_dir,
        stop=stop,
        checkpoint_config=checkpoint_config,
        failure_config=FailureConfig(max_failures=max_failures, fail_fast=fail_fast),
        verbose=verbose,
        progress_reporter=progress_reporter,
        log_to_file=log_to_file,
        callbacks=callbacks,
    )
    tune_config = TuneConfig(
        metric=metric,
        mode=mode,
        search_alg=search_alg,
        scheduler=scheduler,
        num_samples=num_samples,
        max_concurrent_trials=max_concurrent_trials,
        time_budget_s=time_budget_s,
        reuse_actors=reuse_actors,
        trial_name_creator=trial_name_creator,
        trial_dirname_creator=trial_dirname_creator,
        seed=seed,
    )
    tuner = None
    if resume and name:
        from fasttune.storage.defaults import default_storage_path

        path = os.path.join(storage_path or local_dir or default_storage_path(), name)
        if Tuner.can_restore(path):
            tuner = Tuner.restore(path, trainable, resume_errored=resume == "ERRORED_ONLY")
    if tuner is None:
        tuner = Tuner(
            trainable, param_space=config or {}, tune_config=tune_config, run_config=run_config
        )
    grid = tuner.fit()
    analysis = grid._experiment_analysis
    failed = [t for t in analysis.trials if t.status == "ERROR"]
    if failed and raise_on_failed_trial:
        raise TuneError(f"Trials did not complete: {[str(t) for t in failed]}")
    return analysis
