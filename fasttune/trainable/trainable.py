"""``Trainable``: the class API, and the contract every trial runs through."""

from __future__ import annotations

import copy
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune._support.process_info import SysUsageMonitor
from fasttune._support.result_values import plain_result
from fasttune.checkpoint import Checkpoint
from fasttune.trainable import _checkpoint_staging as staging
from fasttune.trainable import checkpoint_io as ckpt_io
from fasttune.trainable._legacy_api import LegacyTrainableAPI
from fasttune.trainable._output_capture import OutputCapture
from fasttune.trainable._result_logger import create_result_logger, reopen_logger
from fasttune.trainable._result_metrics import DateCache, auto_filled_metrics, fill_defaults
from fasttune.trainable.session import TrialSession, clear_process_session, set_process_session
from fasttune.trainable.trial_info import pop_runner_keys

if TYPE_CHECKING:
    from datetime import datetime


logger = logging.getLogger(__name__)

SETUP_TIME_WARNING_S = 10.0


class Trainable(LegacyTrainableAPI):
    """Base class for class-API trainables (as ``ray.tune.Trainable``).

    Subclasses implement :meth:`setup`, :meth:`step`, and for checkpointing
    :meth:`save_checkpoint` / :meth:`load_checkpoint`. :meth:`train` calls
    :meth:`step` once and fills in the bookkeeping metrics.

    Args:
        config: Hyperparameters; :meth:`setup` receives a deep copy.
        logger_creator: Callable ``config -> Logger``; the logger's ``logdir`` becomes
            this trainable's log directory. Defaults to a ``UnifiedLogger`` in a new
            directory under the default storage path (or the trial's directory).
        storage: Accepted for compatibility with Ray's signature.

    Example:
        >>> class MyTrainable(Trainable):
        ...     def setup(self, config):
        ...         self.x = config["x"]
        ...     def step(self):
        ...         self.x += 1
        ...         return {"score": self.x}
        >>> t = MyTrainable(config={"x": 1}, logger_creator=None)
        >>> t.train()["score"]
        2
        >>> t.stop()
    """

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        logger_creator: Callable[[dict[str, Any]], Any] | None = None,
        storage: Any = None,
    ):
        self._start_time = time.time()
        self.config: dict[str, Any] = dict(config or {})
        trial_info, stdout_file, stderr_file = pop_runner_keys(self.config)
        self._trial_info = trial_info
        self._storage = storage
        self._experiment_id = (trial_info and trial_info.experiment_id) or uuid.uuid4().hex

        self._reset_counters()
        self._warmup_time: float | None = None
        self._date_cache = DateCache()
        self._monitor = SysUsageMonitor() if self.config.get("log_sys_usage") else None

        self._create_logger(self.config, logger_creator)
        self._session = self._make_session()
        self._output = OutputCapture()
        self._open_logfiles(stdout_file, stderr_file)

        set_process_session(self._session)
        self.setup(copy.deepcopy(self.config))
        setup_time = time.time() - self._start_time
        if setup_time > SETUP_TIME_WARNING_S:
            logger.info(
                "Trainable.setup took %.3f s; if trials start often, consider "
                "TuneConfig(reuse_actors=True) with reset_config() to pay this once.",
                setup_time,
            )

    # ------------------------------------------------------------------ counters
    def _reset_counters(self) -> None:
        self._iteration = 0
        self._time_total = 0.0
        self._timesteps_total: int | float | None = None
        self._episodes_total: int | None = None
        self._time_since_restore = 0.0
        self._timesteps_since_restore: int | float = 0
        self._iterations_since_restore = 0
        self._last_result: dict[str, Any] | None = None
        self._restored = False

    def _make_session(self) -> TrialSession:
        return TrialSession(self._trial_info, self._logdir)

    # ------------------------------------------------------------------ logging
    def _create_logger(
        self, config: dict[str, Any], logger_creator: Callable[[dict[str, Any]], Any] | None
    ) -> None:
        self._result_logger, self._logdir = create_result_logger(
            config, logger_creator, self._trial_info, type(self).__name__
        )

    def _open_logfiles(self, stdout_file: str | None, stderr_file: str | None) -> None:
        """Send this process's ``sys.stdout``/``sys.stderr`` to files in the logdir."""
        self._close_logfiles()
        self._output.open(self._logdir, stdout_file, stderr_file)

    def _close_logfiles(self) -> None:
        self._output.close()

    # ------------------------------------------------------------------ training
    def train(self) -> dict[str, Any]:
        """Run one logical iteration (one :meth:`step`) and return its filled-in result.

        Raises:
            TypeError: When :meth:`step` returns something other than a dict.
        """
        start = time.time()
        if self._warmup_time is None:
            self._warmup_time = start - self._start_time
        set_process_session(self._session)
        result = self.step()
        if not isinstance(result, dict):
            raise TypeError(
                f"{type(self).__name__}.step() must return a dict of metrics, but it "
                f"returned {type(result).__name__}: {result!r}"
            )
        if R.RESULT_DUPLICATE in result:
            return result
        # numpy / torch / Decimal numbers become Python numbers here, once, for every
        # consumer downstream (files, schedulers, searchers, stoppers).
        return self._complete_result(plain_result(result), start)

    def _complete_result(self, result: dict[str, Any], start: float) -> dict[str, Any]:
        self._iteration += 1
        self._iterations_since_restore += 1
        time_this_iter = result.get(R.TIME_THIS_ITER_S)
        if time_this_iter is None:
            time_this_iter = time.time() - start
        self._time_total += time_this_iter
        self._time_since_restore += time_this_iter
        steps = result.get(R.TIMESTEPS_THIS_ITER)
        if steps is not None:
            self._timesteps_total = (self._timesteps_total or 0) + steps
            self._timesteps_since_restore += steps
        episodes = result.get(R.EPISODES_THIS_ITER)
        if episodes is not None:
            self._episodes_total = (self._episodes_total or 0) + episodes
        fill_defaults(result, self._iteration, self._timesteps_total, self._episodes_total)

        result.update(
            self.get_auto_filled_metrics(
                time_this_iter=time_this_iter, timestamp=result.get(R.TIMESTAMP)
            )
        )
        result[R.EXPERIMENT_ID] = self._experiment_id
        result[R.WARMUP_TIME] = self._warmup_time
        if self._monitor is not None:
            result["perf"] = self._monitor.sample()

        self.log_result(result)
        self._output.flush()
        self._last_result = result
        return result

    def get_auto_filled_metrics(
        self,
        now: datetime | None = None,
        time_this_iter: float | None = None,
        timestamp: int | None = None,
        debug_metrics_only: bool = False,
    ) -> dict[str, Any]:
        """The bookkeeping metrics :meth:`train` adds to every result."""
        seconds, date = self._date_cache.now(now)
        return auto_filled_metrics(
            self.trial_id,
            self.config,
            seconds,
            date,
            timestamp,
            time_this_iter,
            self._time_total,
            self._time_since_restore,
            self._iterations_since_restore,
            self._timesteps_since_restore,
            debug_metrics_only=debug_metrics_only,
        )

    def train_buffered(
        self, buffer_time_s: float, max_buffer_length: int = 1000
    ) -> list[dict[str, Any]]:
        """Run :meth:`train` repeatedly and return the results together.

        Stops after at least one result when the trial is done, a result asks for a
        checkpoint (or carries one), the function trainable has finished, the buffer
        holds ``max_buffer_length`` results, or ``buffer_time_s`` has passed.
        """
        results: list[dict[str, Any]] = []
        deadline = time.time() + buffer_time_s
        while True:
            result = self.train()
            results.append(result)
            if (
                result.get(R.DONE)
                or result.get(R.SHOULD_CHECKPOINT)
                or result.get(R.RESULT_DUPLICATE)
                or result.get(R.CHECKPOINT_DIR_NAME)
                or len(results) >= max_buffer_length
                or time.time() >= deadline
            ):
                return results

    # ------------------------------------------------------------------ checkpoints
    def get_state(self) -> dict[str, Any]:
        """The trainable's own state saved beside every checkpoint."""
        return {
            "iteration": self._iteration,
            "timesteps_total": self._timesteps_total,
            "time_total": self._time_total,
            "episodes_total": self._episodes_total,
            "last_result": self._last_result,
        }

    def save(self, checkpoint_dir: str | None = None, prevent_upload: bool = False) -> str:
        """Save the trainable's state and return the checkpoint directory.

        Args:
            checkpoint_dir: Where to save; by default ``<logdir>/checkpoint_<iteration>``.
            prevent_upload: Accepted for compatibility.

        Returns:
            The checkpoint directory, which :meth:`restore` accepts.
        """
        return staging.save_dir(self._save_into, checkpoint_dir, self.logdir, self._iteration)

    def _save_into(self, directory: str) -> None:
        returned = self.save_checkpoint(directory)
        kind, relative = ckpt_io.store_payload(directory, returned)
        state = self.get_state()
        state.update(payload_kind=kind, payload_path=relative)
        ckpt_io.write_state(directory, state)

    def has_checkpoint_state(self) -> bool:
        """Whether :meth:`save` would save state worth restoring (runner hint)."""
        return True

    def save_to_object(self) -> bytes:
        """Save to an in-memory object (bytes) that :meth:`restore_from_object` takes."""
        with staging.scratch_dir("fasttune_save_") as tmp:
            return ckpt_io.pack_dir(self.save(os.path.join(tmp, "checkpoint")))

    def restore(
        self,
        checkpoint_path: str | os.PathLike[str] | Checkpoint,
        checkpoint_node_ip: str | None = None,
        fallback_to_latest: bool = False,
    ) -> bool:
        """Restore user state and counters from a checkpoint.

        Args:
            checkpoint_path: A directory returned by :meth:`save` (or a path inside
                it), or a :class:`~fasttune.Checkpoint`.

        Returns:
            True.
        """
        with staging.local_directory(checkpoint_path) as local:
            self._restore_local(local)
        return True

    def _restore_local(self, path: str) -> None:
        root = ckpt_io.find_checkpoint_root(path)
        state = ckpt_io.read_state(root)
        if state is not None:
            self._iteration = state["iteration"]
            self._timesteps_total = state["timesteps_total"]
            self._time_total = state["time_total"]
            self._episodes_total = state["episodes_total"]
            self._last_result = state["last_result"]
            payload = ckpt_io.load_payload(root, state["payload_kind"], state["payload_path"])
        else:
            payload = root
        self._time_since_restore = 0.0
        self._timesteps_since_restore = 0
        self._iterations_since_restore = 0
        self._restored = True
        self.load_checkpoint(payload)

    def restore_from_object(self, obj: bytes) -> None:
        """Restore from the bytes returned by :meth:`save_to_object`."""
        with staging.scratch_dir("fasttune_restore_") as tmp:
            ckpt_io.unpack_dir(obj, tmp)
            self._restore_local(tmp)

    # ------------------------------------------------------------------ lifecycle
    def reset(
        self,
        new_config: dict[str, Any],
        logger_creator: Callable[[dict[str, Any]], Any] | None = None,
        storage: Any = None,
    ) -> bool:
        """Reuse this trainable for a new config; False if it cannot be reused."""
        new_config = dict(new_config)
        trial_info, stdout_file, stderr_file = pop_runner_keys(new_config)
        self.config = new_config
        self._storage = storage
        if trial_info is not None:
            self._trial_info = trial_info
            if trial_info.experiment_id:
                self._experiment_id = trial_info.experiment_id
        self._result_logger.flush()
        self._result_logger.close()
        if logger_creator is not None or trial_info is not None:
            self._create_logger(new_config, logger_creator)
        else:
            self._result_logger = reopen_logger(self._result_logger, new_config)
        self._session = self._make_session()
        set_process_session(self._session)
        self._open_logfiles(stdout_file, stderr_file)
        if not self.reset_config(copy.deepcopy(new_config)):
            return False
        self._reset_counters()
        self._warmup_time = None
        self._start_time = time.time()
        return True

    def stop(self) -> None:
        """Release resources: flush loggers, call :meth:`cleanup`, close log files."""
        self._result_logger.flush()
        self._result_logger.close()
        try:
            self.cleanup()
        finally:
            self._close_logfiles()
            clear_process_session(self._session)

    def log_result(self, result: dict[str, Any]) -> None:
        """Send a result to the loggers; override to customise."""
        self._result_logger.on_result(result)

    def export_model(
        self, export_formats: str | list[str], export_dir: str | None = None
    ) -> dict[str, str]:
        """Export the model in the given formats; returns format -> path."""
        if isinstance(export_formats, str):
            export_formats = [export_formats]
        export_dir = export_dir or self.logdir
        return self._export_model(export_formats, export_dir)

    # ------------------------------------------------------------------ properties
    @property
    def logdir(self) -> str:
        """Directory of the results and checkpoints of this trainable (no trailing
        separator, as Ray Tune's: ``os.path.basename`` gives the trial folder's name)."""
        return self._logdir.rstrip(os.sep) or self._logdir

    @property
    def trial_name(self) -> str:
        return self._trial_info.trial_name if self._trial_info else "default"

    @property
    def trial_id(self) -> str:
        return self._trial_info.trial_id if self._trial_info else "default"

    @property
    def trial_resources(self) -> Any:
        return self._trial_info.resources if self._trial_info else None

    @property
    def iteration(self) -> int:
        """Current training iteration (number of completed :meth:`train` calls)."""
        return self._iteration

    @property
    def training_iteration(self) -> int:
        return self._iteration

    def get_config(self) -> dict[str, Any]:
        return self.config

    # ------------------------------------------------------------------ to implement
    def setup(self, config: dict[str, Any]) -> None:
        """Initialise the trainable; receives a deep copy of the config."""

    def step(self) -> dict[str, Any]:
        """Run one iteration of training and return a dict of metrics."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any] | str | None:
        """Write state to ``checkpoint_dir``; return None, a dict, or a path inside it."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement save_checkpoint(); implement it "
            "to save checkpoints (needed by checkpoint_frequency, checkpoint_at_end and "
            "schedulers that pause trials), or set CheckpointConfig(checkpoint_at_end=False)."
        )

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        """Restore state from what :meth:`save_checkpoint` produced."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement load_checkpoint(); implement it "
            "to restore from checkpoints."
        )

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Apply a new config in place for actor reuse; return True on success."""
        return False

    def cleanup(self) -> None:
        """Release resources when the trainable stops."""

    def _export_model(self, export_formats: list[str], export_dir: str) -> dict[str, str]:
        return {}

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> Any:
        """Resources this trainable needs for ``config`` (a PlacementGroupFactory), or None."""
        return None

    @classmethod
    def resource_help(cls, config: dict[str, Any]) -> str:
        """A help string on configuring this trainable's resources."""
        return ""


def implements(cls: type, method: str) -> bool:
    """True if ``cls`` overrides ``Trainable.<method>``."""
    return getattr(cls, method, None) is not getattr(Trainable, method, None)
