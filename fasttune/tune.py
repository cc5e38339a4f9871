"""The classic entry point ``fasttune.run(...)`` (as ``ray.tune.run``)."""

from __future__ import annotations

import inspect
import os
import warnings
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
    from fasttune.experiment.experiment import FIELDS, Experiment
    from fasttune.trainable.util import with_resources
    from fasttune.tuner import Tuner

    if isinstance(run_or_experiment, Experiment):
        # As Ray: the experiment's own arguments come from it, the run's from this call.
        run_args = {
            key: value
            for key, value in locals().items()
            if key in _RUN_ARGS and key not in FIELDS and key != "name"
        }
        return run(run_or_experiment.run, **run_or_experiment.run_kwargs(), **run_args)
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
    flags = resume_flags(resume)
    if flags is not None and name:
        from fasttune.storage.defaults import default_storage_path

        path = os.path.join(storage_path or local_dir or default_storage_path(), name)
        if Tuner.can_restore(path):
            tuner = Tuner.restore(
                path,
                trainable,
                resume_unfinished=flags.get("resume_unfinished", True),
                resume_errored=flags.get("resume_errored", False),
                restart_errored=flags.get("restart_errored", False),
            )
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


_RESUME_MODES = frozenset({"LOCAL", "REMOTE", "PROMPT", "AUTO"})
_RESUME_SUFFIXES = {
    "ERRORED": {"resume_errored": True},
    "RESTART_ERRORED": {"restart_errored": True},
    "ERRORED_ONLY": {"resume_unfinished": False, "resume_errored": True, "restart_errored": False},
    "RESTART_ERRORED_ONLY": {
        "resume_unfinished": False,
        "resume_errored": False,
        "restart_errored": True,
    },
}


def resume_flags(resume: bool | str | None) -> dict[str, bool] | None:
    """``tune.run(resume=...)`` as ``Tuner.restore`` flags; None for a new run.

    As Ray: ``True`` is ``"LOCAL"``; a mode (``LOCAL``, ``REMOTE``, ``PROMPT``,
    ``AUTO``: each continues the experiment at ``<storage_path>/<name>`` when there
    is one, else starts it) takes suffixes ``+ERRORED`` (resume errored trials from
    their last checkpoint), ``+RESTART_ERRORED`` (restart them from scratch), and
    ``+ERRORED_ONLY`` / ``+RESTART_ERRORED_ONLY`` (the same, with the unfinished
    trials ended rather than resumed). A bare ``"ERRORED_ONLY"`` is Ray's deprecated
    spelling of ``"LOCAL+RESTART_ERRORED_ONLY"``.

    Raises:
        ValueError: For any other value.
    """
    if resume is None or resume is False:
        return None
    if resume is True:
        resume = "LOCAL"
    if resume == "ERRORED_ONLY":
        warnings.warn(
            "tune.run(resume='ERRORED_ONLY') is deprecated (as in Ray): pass "
            "resume='LOCAL+RESTART_ERRORED_ONLY'.",
            DeprecationWarning,
            stacklevel=3,
        )
        resume = "LOCAL+RESTART_ERRORED_ONLY"
    mode, *suffixes = resume.split("+") if isinstance(resume, str) else [""]
    if mode not in _RESUME_MODES or any(s not in _RESUME_SUFFIXES for s in suffixes):
        raise ValueError(
            f"tune.run(resume={resume!r}) is invalid: use True, False, or one of "
            f"{sorted(_RESUME_MODES)} followed by any of "
            f"{['+' + s for s in _RESUME_SUFFIXES]} (e.g. 'AUTO+ERRORED')."
        )
    flags: dict[str, bool] = {}
    for suffix in suffixes:
        flags.update(_RESUME_SUFFIXES[suffix])
    return flags


# tune.run's keyword arguments (those an Experiment does not hold are the run's own).
_RUN_ARGS = frozenset(inspect.signature(run).parameters) - {"run_or_experiment"}


def run_experiments(
    experiments: Any,
    scheduler: Any = None,
    verbose: int = 2,
    progress_reporter: Any = None,
    resume: bool | str | None = False,
    reuse_actors: bool | None = None,
    raise_on_failed_trial: bool = True,
    callbacks: list[Any] | None = None,
    **run_kwargs: Any,
) -> list[Any]:
    """Run experiments and return all their trials (as ``ray.tune.run_experiments``).

    Args:
        experiments: An ``Experiment``, a list of them, or Ray's ``{name: spec}`` dict
            (spec: ``{"run": trainable, "config": ..., "stop": ..., ...}``).
        scheduler, verbose, progress_reporter, resume, reuse_actors,
        raise_on_failed_trial, callbacks: As for ``tune.run``; further keyword
            arguments (e.g. ``search_alg``, ``metric``, ``mode``) go to it as well.

    Returns:
        The trials of every experiment, in order. Several experiments run one after
        the other (Ray runs them side by side).

    Raises:
        TypeError: If ``experiments`` has none of the accepted forms.
        TuneError: Some trials ended in ERROR and ``raise_on_failed_trial`` is True.
    """
    from fasttune.experiment.experiment import as_experiment_list

    trials: list[Any] = []
    for experiment in as_experiment_list(experiments):
        analysis = run(
            experiment,
            scheduler=scheduler,
            verbose=verbose,
            progress_reporter=progress_reporter,
            resume=resume,
            reuse_actors=reuse_actors,
            raise_on_failed_trial=raise_on_failed_trial,
            callbacks=callbacks,
            **run_kwargs,
        )
        trials.extend(analysis.trials)
    return trials
