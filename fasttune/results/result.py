"""``Result``: what one trial produced (as ``ray.tune.Result``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune.checkpoint import Checkpoint
from fasttune.results import _trial_files as files
from fasttune.results._scoring import best_checkpoint, results_dataframe
from fasttune.storage.arrow_view import arrow_filesystem
from fasttune.storage.filesystem import FileSystem, local_filesystem

if TYPE_CHECKING:
    import pandas as pd

# Bookkeeping keys left out of ``repr(result)``, as Ray does.
_HIDDEN_IN_REPR = frozenset(R.AUTO_RESULT_KEYS) | {
    R.CONFIG,
    R.EXPERIMENT_TAG,
    R.SHOULD_CHECKPOINT,
    R.CHECKPOINT_DIR_NAME,
    "_report_on",
}
_ABSENT = object()


class Result:
    """The outcome of one trial: last metrics, checkpoints, error and history.

    Built by :class:`~fasttune.ResultGrid` (or :meth:`from_path`); the constructor
    is not meant for users, as in Ray.

    Attributes:
        metrics: The last reported result (nested dicts as reported), or None.
        checkpoint: The latest checkpoint, or None.
        error: The exception the trial failed with, or None.
        path: The trial directory (within :attr:`filesystem`).
        best_checkpoints: ``(checkpoint, metrics)`` pairs of the kept checkpoints, oldest
            first, or worst first and best last with a checkpoint score attribute.

    Example:
        >>> import json, os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> with open(os.path.join(d, "result.json"), "w") as f:
        ...     _ = f.write(json.dumps({"loss": 0.5, "config": {"lr": 0.1}}) + "\\n")
        >>> result = Result.from_path(d)
        >>> result.metrics["loss"], result.config
        (0.5, {'lr': 0.1})
    """

    def __init__(
        self,
        metrics: dict[str, Any] | None,
        checkpoint: Checkpoint | None,
        error: BaseException | None,
        path: str,
        metrics_dataframe: pd.DataFrame | None = None,
        best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] | None = None,
        _storage_filesystem: FileSystem | None = None,
        *,
        _metrics_dataframe_loader: Callable[[], pd.DataFrame | None] | None = None,
        _config_loader: Callable[[], dict[str, Any] | None] | None = None,
    ):
        self.metrics = metrics
        self.checkpoint = checkpoint
        self.error = error
        self.path = path
        self.best_checkpoints = best_checkpoints
        self._storage_filesystem = _storage_filesystem
        self._metrics_dataframe = metrics_dataframe
        self._metrics_dataframe_loader = _metrics_dataframe_loader
        self._config_loader = _config_loader

    # ------------------------------------------------------------------ properties
    @property
    def config(self) -> dict[str, Any] | None:
        """The trial's config: ``metrics["config"]``, else the saved params."""
        if self.metrics and isinstance(self.metrics.get(R.CONFIG), dict):
            return self.metrics[R.CONFIG]
        return self._config_loader() if self._config_loader is not None else None

    @property
    def filesystem(self) -> Any:
        """The filesystem :attr:`path` and the checkpoints live on: a
        ``pyarrow.fs.FileSystem``, as in Ray Tune (fasttune's own
        :class:`~fasttune.storage.FileSystem` without pyarrow)."""
        return arrow_filesystem(self._filesystem())

    def _filesystem(self) -> FileSystem:
        return self._storage_filesystem or local_filesystem()

    @property
    def metrics_dataframe(self) -> pd.DataFrame | None:
        """Every reported result, one row each, nested keys flattened with ``/``.

        Read on first access from ``result.json`` (or ``progress.csv``); None when
        the trial directory has neither. Needs pandas (``fasttune[pandas]``).
        """
        if self._metrics_dataframe is None:
            loader = self._metrics_dataframe_loader or self._load_dataframe
            self._metrics_dataframe = loader()
            self._metrics_dataframe_loader = None
        return self._metrics_dataframe

    @metrics_dataframe.setter
    def metrics_dataframe(self, value: pd.DataFrame | None) -> None:
        self._metrics_dataframe = value
        self._metrics_dataframe_loader = None

    def _load_dataframe(self) -> pd.DataFrame | None:
        if not self.path:
            return None
        results, source = files.read_results(self._filesystem(), self.path)
        return None if source is None else results_dataframe(results, source)

    # ------------------------------------------------------------------ queries
    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The checkpoint whose metrics are best on ``metric``.

        Checkpoints without a value for ``metric`` are left out; NaN values never win.

        Args:
            metric: Result key to compare (``"a/b"`` for a nested value).
            mode: ``"min"`` or ``"max"``.

        Returns:
            The best checkpoint, or None when every value is NaN.

        Raises:
            RuntimeError: The trial has no checkpoint, or none of its checkpoints
                has ``metric`` (the message lists the metrics they have).
            ValueError: ``mode`` is not ``"min"`` or ``"max"``.
        """
        if not self.best_checkpoints:
            raise RuntimeError(f"No checkpoint exists for the trial at {self.path!r}.")
        if mode not in ("min", "max"):
            raise ValueError(f'`mode` must be one of ["min", "max"], got {mode!r}.')
        scored = [
            (checkpoint, files.lookup(metrics, metric, _ABSENT))
            for checkpoint, metrics in self.best_checkpoints
        ]
        scored = [(c, v) for c, v in scored if v is not _ABSENT]
        if not scored:
            available = sorted({k for _, m in self.best_checkpoints for k in (m or {})})
            raise RuntimeError(
                f"None of the checkpoints of the trial at {self.path!r} has the metric "
                f"{metric!r}; their metrics are: {available}."
            )
        return best_checkpoint(self.best_checkpoints, metric, mode)

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_path(cls, path: str | os.PathLike[str], storage_filesystem: Any = None) -> Result:
        """Rebuild a ``Result`` from a trial directory's files alone.

        Metrics are the last line of ``result.json`` (or row of ``progress.csv``);
        checkpoints are the ``checkpoint_NNNNNN`` subdirectories, by index; the
        error comes from ``error.pkl`` or ``error.txt``; the config from
        ``params.pkl`` (or ``params.json``) when the results do not carry it.

        Args:
            path: The trial directory, a local path or URL.
            storage_filesystem: The filesystem serving ``path`` (a fasttune ``FileSystem``
                or an fsspec one; inferred from the path if omitted).

        Raises:
            RuntimeError: The directory does not exist or has neither results file.
            ValueError: A results file is corrupt (the message names file and line).
        """
        fs, fs_path = files.resolve_filesystem(
            path, storage_filesystem, owner="Result.from_path", param="path"
        )
        if not fs.isdir(fs_path):
            raise RuntimeError(f"Trial directory {fs_path!r} does not exist.")
        results, source = files.read_results(fs, fs_path)
        if source is None:
            raise RuntimeError(
                f"Cannot rebuild a Result from {fs_path!r}: it has neither "
                f"{R.EXPR_RESULT_FILE} nor {R.EXPR_PROGRESS_FILE}."
            )
        found = files.read_checkpoints(fs, fs_path, results)
        best_checkpoints = [
            (Checkpoint(fs.join(fs_path, name), filesystem=fs), metrics) for name, metrics in found
        ]
        return cls(
            metrics=results[-1] if results else {},
            checkpoint=best_checkpoints[-1][0] if best_checkpoints else None,
            error=files.read_error(fs, fs_path),
            path=fs_path,
            best_checkpoints=best_checkpoints or None,
            _storage_filesystem=fs,
            _metrics_dataframe_loader=lambda: results_dataframe(results, source),
            _config_loader=lambda: files.read_config(fs, fs_path),
        )

    # ------------------------------------------------------------------ display
    def _repr(self, indent: int = 0) -> str:
        shown: dict[str, Any] = {}
        if self.error:
            shown["error"] = type(self.error).__name__
        metrics = self.metrics
        if metrics:
            metrics = {k: v for k, v in metrics.items() if k not in _HIDDEN_IN_REPR}
        shown["metrics"] = metrics
        shown["path"] = self.path
        shown["filesystem"] = self._filesystem().type_name
        shown["checkpoint"] = self.checkpoint
        outer, inner = " " * indent, " " * (indent + 2)
        body = ",\n".join(f"{inner}{key}={value!r}" for key, value in shown.items())
        return f"{outer}{type(self).__name__}(\n{body}\n{outer})"

    def __repr__(self) -> str:
        return self._repr(indent=0)
