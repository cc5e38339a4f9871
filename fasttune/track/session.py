"""One trial's results logged outside a Tuner, as Ray Tune's legacy ``TrackSession``."""

from __future__ import annotations

import os
import tempfile
import uuid
from datetime import datetime
from typing import Any

from fasttune import result as R
from fasttune._support.result_values import plain_result
from fasttune.logger.unified import UnifiedLogger
from fasttune.storage.defaults import default_local_dir

__all__ = ["TrackSession"]

_MAX_NAME_IN_DIR = 130  # a trial directory's name stays well under file-name limits


class TrackSession:
    """Log a trial's results to its own directory, without a Tuner.

    The session makes a new trial directory ``<trial_name>_<date>_*`` in
    ``experiment_dir`` and writes there what a trial run by Tune writes
    (``params.json``, ``result.json``, ``progress.csv``, TensorBoard events when
    tensorboardX is installed) through :class:`~fasttune.logger.UnifiedLogger`.

    Args:
        trial_name: A name for the trial: the prefix of its id and of its directory.
        experiment_dir: Where the trial directory goes; default: ``default`` in the
            default storage path (``$FASTTUNE_STORAGE_PATH`` or ``~/fasttune_results``).
        upload_dir: Not supported, as in Ray; must be None.
        trial_config: The trial's parameters, written to ``params.json`` (with its
            ``trial_id``; ``close()`` adds ``trial_completed`` and ``end_time``).

    Raises:
        TypeError: On a bad argument, naming it.
        NotImplementedError: When ``upload_dir`` is given.

    Example:
        >>> import tempfile
        >>> session = TrackSession("demo", experiment_dir=tempfile.mkdtemp(), trial_config={})
        >>> session.log(loss=0.5)
        >>> session.close()
    """

    def __init__(
        self,
        trial_name: str = "",
        experiment_dir: str | None = None,
        upload_dir: str | None = None,
        trial_config: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(trial_name, str):
            raise TypeError(f"TrackSession(trial_name={trial_name!r}): trial_name must be a str.")
        if experiment_dir is not None and not isinstance(experiment_dir, (str, os.PathLike)):
            raise TypeError(
                f"TrackSession(experiment_dir={experiment_dir!r}): experiment_dir must be a "
                "local directory path, or None for the default storage path."
            )
        if trial_config is not None and not isinstance(trial_config, dict):
            raise TypeError(
                f"TrackSession(trial_config={trial_config!r}): trial_config must be a dict "
                "of the trial's parameters, or None."
            )
        if upload_dir:
            raise NotImplementedError(
                f"TrackSession(upload_dir={upload_dir!r}): uploading is not supported (nor "
                "is it in Ray Tune's TrackSession); leave upload_dir=None and copy the "
                "experiment directory afterwards."
            )
        self._name = trial_name
        self._iteration = -1
        self._closed = False
        trial_id = uuid.uuid4().hex[:8]
        self.trial_id = f"{trial_name}_{trial_id}" if trial_name else trial_id
        if experiment_dir is None:
            experiment_dir = os.path.join(default_local_dir(), "default")
        self._experiment_dir = os.path.expanduser(os.fspath(experiment_dir))
        os.makedirs(self._experiment_dir, exist_ok=True)
        stamp = datetime.today().strftime("%Y-%m-%d_%H-%M-%S")
        self._logdir = tempfile.mkdtemp(
            prefix=f"{trial_name[:_MAX_NAME_IN_DIR]}_{stamp}_", dir=self._experiment_dir
        )
        self.trial_config: dict[str, Any] = dict(trial_config or {})
        self.trial_config["trial_id"] = self.trial_id
        self._logger = UnifiedLogger(self.trial_config, self._logdir)

    def log(self, **metrics: Any) -> None:
        """Log one result: ``metrics`` with the ``trial_id`` and ``training_iteration``.

        ``training_iteration`` counts the calls from 0, as in Ray, unless given.

        Raises:
            RuntimeError: After :meth:`close`.
        """
        if self._closed:
            raise RuntimeError(
                f"TrackSession({self.trial_id!r}).log() after close(): the session's files "
                "are closed; start a new TrackSession to log more."
            )
        self._iteration += 1
        result = plain_result(metrics)
        result[R.TRIAL_ID] = self.trial_id
        result.setdefault(R.TRAINING_ITERATION, self._iteration)
        self._logger.on_result(result)

    def close(self) -> None:
        """Mark the trial completed in ``params.json`` and close its files (once)."""
        if self._closed:
            return
        self._closed = True
        self.trial_config["trial_completed"] = True
        self.trial_config["end_time"] = datetime.now().isoformat()
        try:
            self._logger.update_config(self.trial_config)
        finally:
            self._logger.close()

    def __enter__(self) -> TrackSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def logdir(self) -> str:
        """The trial's directory, inside the experiment directory."""
        return self._logdir

    @property
    def trial_name(self) -> str:
        """The trial's name as given, else its id."""
        return self._name or self.trial_id
