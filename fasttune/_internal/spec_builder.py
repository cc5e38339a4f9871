"""Validate a Tuner's inputs and resolve every default into a ``RunSpec``."""

from __future__ import annotations

import copy
import logging
import os
import uuid
from datetime import datetime
from typing import Any

from fasttune._internal.plugin_setup import configure_plugins
from fasttune._internal.run_spec import RunSpec
from fasttune._internal.trainable_resolution import (
    default_checkpoint_at_end,
    is_function_trainable,
    pickle_trainable,
)
from fasttune._internal.trial_factory import TrialFactory
from fasttune._support.noop_hooks import is_noop_hook
from fasttune.config import RunConfig
from fasttune.executors import flow_control
from fasttune.storage.experiment_lease import check_lease
from fasttune.storage.location import (
    ExperimentStorage,
    check_writable,
    experiment_storage,
    reset_staging,
)
from fasttune.storage.state_commit import read_manifest
from fasttune.tune_config import TuneConfig

logger = logging.getLogger(__name__)


def trainable_name_of(trainable_cls: Any) -> str:
    """The trainable's name, as experiment names and restores use it."""
    return getattr(trainable_cls, "_name", None) or trainable_cls.__name__


def default_experiment_name(trainable_name: str) -> str:
    """An unnamed experiment's name: the trainable's and the time (as Ray Tune names it)."""
    return f"{trainable_name}_{datetime.now():%Y-%m-%d_%H-%M-%S}"


def experiment_location(
    run_config: RunConfig, trainable_name: str, *, restoring: bool = False, executor: Any = None
) -> ExperimentStorage:
    """Where the experiment is stored, its directory created and checked writable.

    For remote storage (a URL or a ``storage_filesystem``) the driver writes to a staging
    directory: emptied for a new run, kept for a restore (``Tuner.restore`` has just
    downloaded the experiment's state into it).

    Raises:
        ExperimentInUseError: A live driver on another machine runs the remote experiment.
        ValueError: The storage path is not writable, has an unknown scheme, is
            ``memory://`` while trials run in other processes, or (remote, not
            restoring) already holds an experiment of that name.
        MissingDependencyError: The URL's filesystem package is not installed.
    """
    name = run_config.name or default_experiment_name(trainable_name)
    storage = experiment_storage(run_config.storage_path, run_config.storage_filesystem, name)
    if storage.is_remote:
        # First: a store that cannot be reached or written fails here, saying so.
        check_writable(storage, run_config.storage_path or storage.uri)
        # A live driver elsewhere runs it: say so (not "already holds an experiment").
        check_lease(storage.filesystem, storage.path, storage.uri)
    if storage.is_remote and not restoring:
        if read_manifest(storage.filesystem, storage.path) is not None:
            # Object stores cannot move it aside (as a local earlier run is): refuse to
            # overwrite the state that keeps it restorable.
            raise ValueError(
                f"RunConfig(storage_path={run_config.storage_path!r}, name={name!r}): "
                f"{storage.uri} already holds an experiment. Continue it with "
                f"Tuner.restore({storage.uri!r}, trainable=...).fit(), or give this run "
                "another RunConfig(name=...)."
            )
        reset_staging(storage)
    if storage.filesystem.type_name == "memory" and not getattr(
        executor, "runs_in_driver_process", False
    ):
        raise ValueError(
            f"RunConfig(storage_path={storage.uri!r}): a memory:// filesystem lives inside "
            "one process, and trials run in worker processes that cannot write to it. Use "
            "it with the inline executor (FASTTUNE_EXECUTOR=inline), or use real storage "
            "(a local directory, s3://...)."
        )
    if not storage.is_remote:
        check_writable(storage, run_config.storage_path or storage.uri)
    return storage


def _snapshot_period_s() -> float:
    """Seconds between snapshots (and syncs to remote storage): Ray's
    ``TUNE_GLOBAL_CHECKPOINT_S`` when it is a number, else 10."""
    value = os.environ.get("TUNE_GLOBAL_CHECKPOINT_S", "auto")
    try:
        return max(0.0, float(value))
    except ValueError:
        return 10.0


def _log_files(log_to_file: Any) -> tuple[str | None, str | None]:
    if log_to_file is True:
        return "stdout", "stderr"
    if not log_to_file:
        return None, None
    if isinstance(log_to_file, str):
        return log_to_file, log_to_file
    return log_to_file[0], log_to_file[1]


def _chdir_enabled() -> bool:
    for var in ("FASTTUNE_CHDIR_TO_TRIAL_DIR", "RAY_CHDIR_TO_TRIAL_DIR"):
        if os.environ.get(var) == "0":
            return False
    return True


LARGE_VALUE_BYTES = 16 << 20
"""A ``param_space`` value this large is worth a warning (copied into every trial)."""


def _warn_about_large_values(space: Any, path: str = "param_space") -> None:
    """Warn about big arrays or blobs in ``param_space``: every trial's config, its
    ``params.json``/``params.pkl`` and each launch carry a copy."""
    if isinstance(space, dict):
        for key, value in space.items():
            _warn_about_large_values(value, f"{path}[{key!r}]")
        return
    if isinstance(space, (list, tuple)) and len(space) < 1000:
        for i, value in enumerate(space):
            _warn_about_large_values(value, f"{path}[{i}]")
        return
    size = getattr(space, "nbytes", None)
    if not isinstance(size, int):
        size = len(space) if isinstance(space, (bytes, bytearray, str)) else 0
    if size >= LARGE_VALUE_BYTES:
        logger.warning(
            "%s holds %.0f MB (%s); every trial's config, params files and launch carry a "
            "copy, which is slow. Pass large objects with "
            "tune.with_parameters(trainable, name=value): they are stored once and "
            "loaded by each worker.",
            path,
            size / 1e6,
            type(space).__name__,
        )


def _max_pending_trials(search_alg: Any, resource_manager: Any) -> int:
    """Ray's rule: the default generator keeps max(16, 1.1 x CPUs) pending; searchers 1."""
    from fasttune.search.basic_variant import BasicVariantGenerator

    override = os.environ.get("TUNE_MAX_PENDING_TRIALS_PG")
    if override and override != "auto":
        return max(1, int(override))
    if isinstance(search_alg, BasicVariantGenerator):
        return max(16, int(resource_manager.total.get("CPU", 1) * 1.1))
    return 1


def resources_function(trainable_cls: Any) -> Any:
    from fasttune.execution.placement_groups import PlacementGroupFactory, normalize_resources

    default = PlacementGroupFactory([{"CPU": 1}])

    def resources_for(config: dict[str, Any]) -> Any:
        requested = trainable_cls.default_resource_request(config)
        return default if requested is None else normalize_resources(requested)

    return resources_for


def build_run_spec(
    trainable_cls: Any,
    param_space: dict[str, Any],
    tune_config: TuneConfig,
    run_config: RunConfig,
    *,
    experiment_hash: str | None = None,
    restoring: bool = False,
    executor: Any,
) -> RunSpec:
    """Everything the controller needs, with each input checked.

    The caller (``Tuner.fit``) passes ``executor``, the user's or its default: the
    choice belongs to the public API above the core, which never imports it.
    ``experiment_hash`` is the restored run's, or the one a ``Tuner`` chose when it
    wrote ``tuner.pkl`` on construction.
    """
    from fasttune._internal.resources import ResourceManager
    from fasttune.callback import CallbackList
    from fasttune.executors.base import Executor, ResourceAccounting
    from fasttune.stopper import make_stopper

    if not isinstance(param_space, dict):
        raise TypeError(f"Tuner(param_space=...) must be a dict, got {type(param_space).__name__}")
    trainable_name = trainable_name_of(trainable_cls)
    _warn_about_large_values(param_space)
    blob, key = pickle_trainable(trainable_cls)
    storage = experiment_location(
        run_config, trainable_name, restoring=restoring, executor=executor
    )
    name, experiment_path = storage.name, storage.local_path
    search_alg, scheduler, metric, mode = configure_plugins(
        tune_config, param_space, stop=run_config.stop
    )
    search_alg.add_configurations(copy.deepcopy(param_space), tune_config.num_samples)
    stopper, criterion = make_stopper(run_config.stop)

    # RunConfig.__post_init__ fills these in: a RunConfig has them, whatever it was given.
    cc, failure_config, verbose = (
        run_config.checkpoint_config,
        run_config.failure_config,
        run_config.verbose,
    )
    assert cc is not None and failure_config is not None and verbose is not None
    if is_function_trainable(trainable_cls) and (cc.checkpoint_frequency or cc.checkpoint_at_end):
        raise ValueError(
            "CheckpointConfig(checkpoint_frequency=..., checkpoint_at_end=...) only apply to "
            "class trainables. A function trainable saves checkpoints by passing them to "
            "fasttune.report(metrics, checkpoint=...)."
        )
    reuse = tune_config.reuse_actors
    if reuse is None:
        reuse = is_function_trainable(trainable_cls)

    from fasttune.logger.logger_callback import default_logger_callbacks

    # An executor whose trials run elsewhere (a Ray cluster) answers for its resources.
    own = executor.resource_manager() if isinstance(executor, Executor) else None
    resource_manager: ResourceAccounting = own if own is not None else ResourceManager()
    callbacks = list(run_config.callbacks or [])
    callbacks += default_logger_callbacks(callbacks)
    result_files = None
    if _results_written_as_reported(executor, scheduler, stopper, criterion):
        from fasttune.logger.trial_result_files import offloadable_loggers

        kinds, callbacks = offloadable_loggers(callbacks)
        result_files = kinds or None
    if type(verbose) is not int or verbose != 0:  # nothing to show: not even imported
        from fasttune.progress import create_progress_callback

        progress = create_progress_callback(
            verbose,
            run_config.progress_reporter,
            metric=metric,
            mode=mode,
            sys_info=lambda: [resource_manager.usage_string()],
        )
        if progress is not None:
            callbacks.append(progress)

    callback_list = CallbackList(callbacks)
    # Nothing on the driver looks at every result: workers send each batch's last one.
    last_result_only = (
        result_files is not None
        and is_noop_hook(search_alg, "on_trial_result")
        and not callback_list.listeners("on_trial_result")
    )
    callbacks_decide = any(
        not type(cb).__module__.startswith("fasttune.")
        for cb in callback_list.listeners("on_trial_result")
    )

    factory = TrialFactory(
        trainable_name,
        experiment_path,
        resources_function(trainable_cls),
        criterion,
        cc,
        default_checkpoint_at_end(trainable_cls, cc.checkpoint_at_end),
        failure_config.max_failures,
        tune_config.trial_name_creator,
        tune_config.trial_dirname_creator,
        experiment_hash,
    )
    return RunSpec(
        name=name,
        experiment_path=experiment_path,
        trainable_cls=trainable_cls,
        trainable_blob=blob,
        trainable_key=key,
        param_space=param_space,
        num_samples=tune_config.num_samples,
        search_alg=search_alg,
        scheduler=scheduler,
        executor=executor,
        resource_manager=resource_manager,
        trial_factory=factory,
        callbacks=callback_list,
        stopper=stopper,
        metric=metric,
        mode=mode,
        checkpoint_config=cc,
        failure_config=failure_config,
        checkpoint_at_end=factory.checkpoint_at_end,
        reuse_actors=bool(reuse),
        max_concurrent_trials=tune_config.max_concurrent_trials or None,  # 0: no limit
        time_budget_s=tune_config.time_budget_s,
        log_to_file=_log_files(run_config.log_to_file),
        sync_artifacts=bool(run_config.sync_config and run_config.sync_config.sync_artifacts),
        chdir=_chdir_enabled(),
        flow=_flow(executor, scheduler, stopper, criterion, result_files, callbacks_decide),
        max_pending_trials=_max_pending_trials(search_alg, resource_manager),
        queue_depth=getattr(executor, "queue_depth", 0)
        if reuse and _starts_in_fifo_order(scheduler)
        else 0,
        experiment_id=uuid.uuid4().hex,
        meta={"name": name, "trainable_name": trainable_name, "metric": metric, "mode": mode},
        snapshot_period_s=_snapshot_period_s(),
        storage=storage,
        result_files=result_files,
        last_result_only=last_result_only,
        callbacks_decide=callbacks_decide,
    )


def _flow(
    executor: Any,
    scheduler: Any,
    stopper: Any,
    criterion: dict[str, Any],
    result_files: Any,
    callbacks_decide: bool = False,
) -> flow_control.FlowControl:
    """:data:`~flow_control.UNDECIDED` when no decision can come on a result: where the
    workers write the result files, and on an executor whose workers cannot (a Ray
    cluster: there a wait for each decision costs a round trip between machines);
    there, :data:`~flow_control.CALLBACKS_ONLY` when a callback of the user's reads
    results (it may ask for a checkpoint in one); else what the scheduler tolerates."""
    if result_files or (
        not getattr(executor, "writes_result_files", False)
        and _no_decision_on_results(scheduler, stopper, criterion)
    ):
        return flow_control.CALLBACKS_ONLY if callbacks_decide else flow_control.UNDECIDED
    return flow_control.for_scheduler(scheduler)


def _starts_in_fifo_order(scheduler: Any) -> bool:
    """Whether the scheduler picks the next trial as FIFO does (first waiting that fits)."""
    from fasttune.schedulers.trial_scheduler import FIFOScheduler

    chooser = getattr(type(scheduler), "choose_trial_to_run", None)
    return chooser is FIFOScheduler.choose_trial_to_run


def _no_decision_on_results(scheduler: Any, stopper: Any, criterion: dict[str, Any]) -> bool:
    """No stopper, no callable criterion, a scheduler that ignores intermediate results."""
    return (
        stopper is None
        and not any(callable(v) for v in criterion.values())
        and is_noop_hook(scheduler, "on_trial_result")
    )


def _results_written_as_reported(
    executor: Any, scheduler: Any, stopper: Any, criterion: dict[str, Any]
) -> bool:
    """Whether the workers can write the default loggers' files (see
    ``logger/trial_result_files.py``): their workers share this disk, and no driver-side
    decision on a result can change its line (mark it done, or drop the results a trial
    ran past it): no stopper, no callable criterion, a scheduler that ignores
    intermediate results. ``FASTTUNE_DRIVER_WRITES_RESULTS=1`` keeps them on the driver.
    """
    if os.environ.get("FASTTUNE_DRIVER_WRITES_RESULTS", "0") == "1":
        return False
    return bool(getattr(executor, "writes_result_files", False)) and _no_decision_on_results(
        scheduler, stopper, criterion
    )
