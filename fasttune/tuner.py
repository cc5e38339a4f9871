"""``Tuner``: configure, run and restore an experiment (as ``ray.tune.Tuner``)."""

from __future__ import annotations

import errno
import logging
import os
from typing import Any

from fasttune._internal.executor_choice import (
    default_executor,
    local_workers_chosen,
    prestart,
    runs_inline,
    start_fork_server,
    started_local_executor,
    warm_ray_connection,
)
from fasttune.config import RunConfig
from fasttune.tune_config import TuneConfig

# The experiment folder's lock and checks (experiment_folder, storage.experiment_lock:
# ~11-17 ms with the storage package) are imported where used, after Tuner() has
# started the fork server: its start (~0.1 s) then overlaps them.

logger = logging.getLogger(__name__)


class Tuner:
    """Runs a hyperparameter search.

    Args:
        trainable: A function ``train_fn(config)``, a ``fasttune.Trainable`` subclass,
            or the name of a registered trainable.
        param_space: The search space (sampling functions, ``grid_search``, constants).
        tune_config: Search settings (metric, mode, searcher, scheduler, samples...).
        run_config: Storage, stopping, checkpointing, failure handling, callbacks.

    Example:
        >>> import fasttune as tune
        >>> def train_fn(config):
        ...     tune.report({"score": config["x"] ** 2})
        >>> tuner = tune.Tuner(
        ...     train_fn,
        ...     param_space={"x": tune.grid_search([1, 2, 3])},
        ...     tune_config=tune.TuneConfig(metric="score", mode="min"),
        ...     run_config=tune.RunConfig(verbose=0),
        ... )
        >>> tuner.fit().get_best_result().config["x"]
        1
    """

    def __init__(
        self,
        trainable: Any = None,
        *,
        param_space: dict[str, Any] | None = None,
        tune_config: TuneConfig | None = None,
        run_config: RunConfig | None = None,
        _executor: Any = None,
        _restoring: bool = False,
    ):
        if trainable is None:
            raise TypeError("Tuner(trainable=...) is required: a function or a Trainable class.")
        if tune_config is not None and not isinstance(tune_config, TuneConfig):
            raise TypeError(
                f"Tuner(tune_config=...) must be a fasttune.TuneConfig, got "
                f"{type(tune_config).__name__}"
            )
        if run_config is not None and not isinstance(run_config, RunConfig):
            raise TypeError(
                f"Tuner(run_config=...) must be a fasttune.RunConfig, got "
                f"{type(run_config).__name__}"
            )
        if param_space is not None and not isinstance(param_space, dict):
            # ValueError, as Ray raises
            raise ValueError(
                f"Tuner(param_space=...) must be a dict of config keys to values or search "
                f"spaces, got {type(param_space).__name__}: {param_space!r:.80}"
            )
        # The local workers' fork server starts now: its interpreter start and imports
        # (~0.1-0.15 s) overlap the rest of this set-up instead of following it in fit().
        local = _executor is None and not _restoring and local_workers_chosen()
        if local:
            start_fork_server()
        elif _executor is None and not runs_inline(None):
            warm_ray_connection()  # the same for a Ray cluster's first actors
        # After the server's start: this import (cloudpickle, the function trainable)
        # takes ~15-25 ms.
        from fasttune._internal.trainable_resolution import pickle_trainable, resolve_trainable

        self._trainable = trainable
        self._trainable_cls = resolve_trainable(trainable)
        # Workers receive the trainable pickled: a TypeError naming what it captures is
        # raised here, where the Tuner is built, as Ray raises it.
        self._trainable_blob = (
            None if runs_inline(_executor) else pickle_trainable(self._trainable_cls)[0]
        )
        self._warm_executor = started_local_executor(self._trainable_blob) if local else None
        self._param_space = param_space if param_space is not None else {}
        self._tune_config = tune_config or TuneConfig()
        self._run_config = run_config or RunConfig()
        self._executor = _executor
        self._restore: dict[str, Any] | None = None
        self._results: Any = None
        # Set when this Tuner wrote the experiment's tuner.pkl on construction.
        self._experiment_hash: str | None = None
        if not _restoring:
            self._announce_experiment()

    def _announce_experiment(self) -> None:
        """Name the experiment and write its ``tuner.pkl`` now, as Ray Tune does, so
        that ``Tuner.can_restore`` is True from here on and a crash before ``fit()``
        leaves an experiment ``Tuner.restore`` can run.

        Local storage only (remote storage gets its state at ``fit()``), and only into
        a folder that holds no run's results and no live driver. Whatever fails here
        is left for ``fit()`` to report.
        """
        from dataclasses import replace

        from fasttune._internal.experiment_folder import holds_results
        from fasttune._internal.spec_builder import default_experiment_name, trainable_name_of
        from fasttune.experiment.trial import new_experiment_hash
        from fasttune.storage.experiment_lock import ExperimentInUseError, ExperimentLock
        from fasttune.storage.location import experiment_storage

        trainable_name = trainable_name_of(self._trainable_cls)
        if self._run_config.name is None:  # named once: fit() uses the same folder
            name = default_experiment_name(trainable_name)
            self._run_config = replace(self._run_config, name=name)
        run_config = self._run_config
        try:
            storage = experiment_storage(
                run_config.storage_path, run_config.storage_filesystem, run_config.name or ""
            )
        except (ValueError, TypeError, ImportError):
            return
        if storage.is_remote:
            return
        path = storage.local_path
        experiment_hash = new_experiment_hash()
        try:
            os.makedirs(path, exist_ok=True)
            lock = ExperimentLock(path)
            lock.acquire()
        except (OSError, ExperimentInUseError):
            return
        try:
            if holds_results(path):
                return  # fit() moves that run aside first
            self._save_tuner_file(
                path, self._pickle_tuner_inputs(), experiment_hash, trainable_name
            )
            self._experiment_hash = experiment_hash
        except OSError:
            return
        finally:
            lock.release()

    def __getstate__(self) -> dict[str, Any]:
        # A Tuner can be pickled (to run it in a Ray task, say): its started local
        # executor stays here; the unpickled Tuner starts one in fit().
        state = dict(self.__dict__)
        state["_warm_executor"] = None
        return state

    def _take_warm_executor(self) -> Any:
        """The local executor started when this Tuner was built, if the local executor
        is still the one to use (``fasttune.init(address=...)`` may have come since)."""
        warm, self._warm_executor = self._warm_executor, None
        if warm is not None and not local_workers_chosen():
            warm.shutdown()
            return None
        return warm

    # ------------------------------------------------------------------ running
    def fit(self) -> Any:
        """Run the experiment and return its :class:`~fasttune.ResultGrid`."""
        from fasttune._internal.controller import TuneController
        from fasttune._internal.experiment_folder import (
            holds_results,
            move_earlier_run_aside,
            remove_cut_writes,
        )
        from fasttune._internal.spec_builder import build_run_spec
        from fasttune.results import ExperimentAnalysis, ResultGrid
        from fasttune.storage.experiment_lock import ExperimentLock

        if self._restore:
            from fasttune._internal.restore_source import check_same_trainable

            check_same_trainable(self._trainable_cls, self._restore["trainable_name"])
        executor = (
            self._executor or self._take_warm_executor() or default_executor(self._trainable_blob)
        )
        prestart(executor, self._trainable_cls)
        # Pickled before the plugins are configured, so that a restore gets them as
        # the user built them.
        tuner_blob = self._pickle_tuner_inputs()
        spec = build_run_spec(
            self._trainable_cls,
            self._param_space,
            self._tune_config,
            self._run_config,
            experiment_hash=(
                self._restore["experiment_hash"] if self._restore else self._experiment_hash
            ),
            restoring=self._restore is not None,
            executor=executor,
        )
        lock = ExperimentLock(spec.experiment_path)
        lock.acquire()  # one driver per experiment: a second one is refused here
        lease = None
        try:
            lease = _remote_lease(spec.storage)  # the same, across machines, for remote storage
            if not self._restore and holds_results(spec.experiment_path):
                lock.release()
                move_earlier_run_aside(spec.experiment_path)
                lock.acquire()
            remove_cut_writes(spec.experiment_path)
            loaded = self._take_loaded_state() if self._restore else None
            restored = self._restored_trials(spec, loaded) if loaded is not None else None
            self._save_tuner(spec, tuner_blob)
            controller = TuneController(spec, restored)
            if lease is not None and controller.storage_sync is not None:
                controller.storage_sync.set_guard(lease.ensure_held)
            if loaded is not None:
                from fasttune._internal.restore import restore_plugin_state

                restore_plugin_state(controller, loaded)
                del loaded  # its search and plugin states: held by the plugins now
            controller.run()
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            from fasttune.error import StorageFullError

            raise StorageFullError(
                f"No space left for the experiment in {spec.experiment_path!r}: writing "
                f"{e.filename or 'its files'} failed ({e.strerror}). What was written "
                "before is kept: free some space, then continue with "
                f"Tuner.restore({spec.experiment_path!r}, trainable=...).fit()."
            ) from None
        finally:
            if lease is not None:
                lease.release()
            lock.release()
        storage = spec.storage
        if controller.interrupted:
            logger.warning(
                "Experiment interrupted; its state is saved. Resume it with: "
                "Tuner.restore(%r, trainable=...).fit()",
                storage.uri if storage is not None else spec.experiment_path,
            )
        path, filesystem = spec.experiment_path, None
        if storage is not None and storage.is_remote:
            from fasttune._internal.trial_state import move_trials

            # The results are read where they are kept: in storage, not in staging.
            move_trials(controller.trials, storage.path)
            path, filesystem = storage.path, storage.filesystem
        analysis = ExperimentAnalysis(
            path,
            storage_filesystem=filesystem,
            trials=controller.trials,
            default_metric=spec.metric,
            default_mode=spec.mode,
        )
        self._results = ResultGrid(analysis)
        return self._results

    def get_results(self) -> Any:
        """The :class:`~fasttune.ResultGrid` of this experiment (after ``fit`` or restore)."""
        if self._results is None:
            if self._restore is None:
                raise RuntimeError("Tuner.get_results() needs fit() to have run first.")
            from fasttune.results import ExperimentAnalysis, ResultGrid

            storage = self._restore["storage"]
            metric, mode = self._tune_config.metric, self._tune_config.mode
            self._results = ResultGrid(
                ExperimentAnalysis(
                    storage.path,
                    storage_filesystem=storage.filesystem,
                    # the restored TuneConfig's, as Ray's get_best_result() uses
                    default_metric=metric if isinstance(metric, str) else None,
                    default_mode=mode if isinstance(metric, str) and mode else None,
                )
            )
        return self._results

    def _pickle_tuner_inputs(self) -> bytes:
        """What ``Tuner.restore`` needs, pickled; unpicklable parts are left out.

        A left-out ``param_space`` (or config object) must be passed again to
        ``Tuner.restore``.
        """
        import cloudpickle

        data: dict[str, Any] = {
            "param_space": self._param_space,
            "tune_config": self._tune_config,
            "run_config": self._run_config,
        }
        for drop in (None, ("run_config", "tune_config"), ("param_space",)):
            for key in drop or ():
                data[key] = None
            try:
                return cloudpickle.dumps(data)
            except Exception:
                continue
        return cloudpickle.dumps({"param_space": None, "tune_config": None, "run_config": None})

    def _save_tuner(self, spec: Any, tuner_blob: bytes) -> None:
        self._save_tuner_file(
            spec.experiment_path,
            tuner_blob,
            spec.trial_factory.experiment_hash,
            spec.meta["trainable_name"],
        )

    @staticmethod
    def _save_tuner_file(
        path: str, tuner_blob: bytes, experiment_hash: str, trainable_name: str
    ) -> None:
        from fasttune._internal.experiment_state import ExperimentStateStore

        # The inputs stay pickled: unpickling them here would rebind the user's
        # ``__main__`` classes to copies.
        data = {
            "inputs": tuner_blob,
            "experiment_hash": experiment_hash,
            "trainable_name": trainable_name,
        }
        ExperimentStateStore(path).save_tuner(data)

    # ------------------------------------------------------------------ restoring
    @classmethod
    def can_restore(cls, path: str | os.PathLike[str], storage_filesystem: Any = None) -> bool:
        """True if ``path`` holds an experiment that :meth:`restore` can continue.

        Args:
            path: The experiment directory: a local path, a URL, or a path in
                ``storage_filesystem``.
            storage_filesystem: The filesystem ``path`` is on (fsspec or pyarrow).
        """
        from fasttune._internal.restore_source import can_restore

        return can_restore(path, storage_filesystem)

    @classmethod
    def restore(
        cls,
        path: str | os.PathLike[str],
        trainable: Any,
        resume_unfinished: bool = True,
        resume_errored: bool = False,
        restart_errored: bool = False,
        param_space: dict[str, Any] | None = None,
        storage_filesystem: Any = None,
        _executor: Any = None,
    ) -> Tuner:
        """Continue an interrupted or crashed experiment, on this machine or any other.

        Finished trials are kept; unfinished ones resume from their latest checkpoint
        (or restart); errored ones are resumed or restarted per the flags. The search
        algorithm continues from its saved state. An experiment in remote storage is
        downloaded (its state, and the result files of the trials that will run again)
        into a fresh staging directory; workers download the checkpoints they resume.

        Args:
            path: The experiment directory (``<storage_path>/<name>``): a local path,
                a URL (``s3://bucket/prefix/name``), or a path in ``storage_filesystem``.
            trainable: The same trainable the experiment ran.
            resume_unfinished: Resume trials that had not finished (else end them).
            resume_errored: Resume errored trials from their latest checkpoint.
            restart_errored: Restart errored trials from scratch.
            param_space: Pass it again if it held values that could not be pickled, or
                if the experiment's ``tuner.pkl`` was lost: its trials are then rebuilt
                from their folders (their configs, results and checkpoints) and the
                run goes on with this ``param_space``, the given ``trainable`` and the
                default ``TuneConfig``/``RunConfig`` (the ones the run had were in
                ``tuner.pkl``).
            storage_filesystem: The filesystem ``path`` is on (fsspec or pyarrow), as
                ``RunConfig(storage_filesystem=...)``; inferred from ``path`` if omitted.
        """
        from fasttune._internal.restore_source import (
            load_trials_to_continue,
            read_saved_experiment,
        )

        experiment = read_saved_experiment(path, storage_filesystem, param_space)
        tuner = cls(
            trainable,
            param_space=experiment.param_space,
            tune_config=experiment.tune_config,
            run_config=experiment.run_config,
            _executor=_executor,
            _restoring=True,
        )
        tuner._restore = {
            "storage": experiment.storage,
            "experiment_hash": experiment.saved["experiment_hash"],
            "loaded": load_trials_to_continue(experiment, param_space),
            "resume_unfinished": resume_unfinished,
            "resume_errored": resume_errored,
            "restart_errored": restart_errored,
            # checked by fit(): reading the results back needs no trainable
            "trainable_name": experiment.saved.get("trainable_name"),
        }
        return tuner

    def _take_loaded_state(self) -> Any:
        """The restored experiment's state: the one ``Tuner.restore`` read, for the
        first ``fit()``; a later ``fit()`` reads it again, as the first one changed it."""
        assert self._restore is not None
        loaded = self._restore.pop("loaded", None)
        if loaded is None:
            from fasttune._internal.experiment_state import ExperimentStateStore

            # folders_only: an experiment restored from its folders alone has no state
            # files until a fit writes them (the first may have failed before).
            loaded = ExperimentStateStore(self._restore["storage"].local_path).load(
                folders_only=True
            )
        return loaded

    def _restored_trials(self, spec: Any, loaded: Any) -> Any:
        from fasttune._internal.restore import restored_trials

        assert self._restore is not None
        return restored_trials(
            loaded,
            spec,
            resume_unfinished=self._restore["resume_unfinished"],
            resume_errored=self._restore["resume_errored"],
            restart_errored=self._restore["restart_errored"],
        )


def _remote_lease(storage: Any) -> Any:
    """The lease of a remote experiment, taken (None for local storage: the lock does).

    Raises:
        ExperimentInUseError: A live driver (on any machine) holds it.
    """
    if storage is None or not storage.is_remote:
        return None
    from fasttune.storage.experiment_lease import ExperimentLease

    lease = ExperimentLease(storage.filesystem, storage.path, storage.uri)
    lease.acquire()
    return lease
