"""A trial's result files written by the worker that runs it.

The default loggers (JSON, CSV, TensorBoard) turn each result into lines of the
trial's files; nothing in those lines depends on the driver when no driver-side
plugin decides per result (no stopper, a scheduler that ignores intermediate
results). Then the worker writes them itself, as the results come: the encoding
and the five files a trial opens leave the driver, which was the bottleneck of
short trials and of results streamed fast, and run in parallel on the workers.

:func:`offloadable_loggers` picks the logger callbacks that may move; a
:class:`TrialFilesSpec` travels with each trial's launch; :class:`TrialResultFiles`
is the worker's side. The files are the same bytes the driver-side callbacks write
(same writers, same result keys), and their guarantees hold: each batch reaches
the operating system before the driver hears of it, so the files never lag behind
the experiment state; a resumed trial's files are first cut back to where it
resumes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fasttune import result as R
from fasttune._support.flatten import flatten_result
from fasttune.experiment.trial import ResumePoint
from fasttune.logger.logger_callback import (
    CSVLoggerCallback,
    JsonLoggerCallback,
    TBXLoggerCallback,
    _TrialFileLoggerCallback,
)

_NOT_FLATTENED = frozenset((R.CONFIG,))
# The default loggers a worker can run, by their ResultFileKinds field.
_CALLBACKS: tuple[tuple[str, type[_TrialFileLoggerCallback]], ...] = (
    ("json", JsonLoggerCallback),
    ("csv", CSVLoggerCallback),
    ("tensorboard", TBXLoggerCallback),
)


@dataclass(frozen=True)
class ResultFileKinds:
    """Which of the default loggers' files the workers write."""

    json: bool = False
    csv: bool = False
    tensorboard: bool = False

    def __bool__(self) -> bool:
        return self.json or self.csv or self.tensorboard


def offloadable_loggers(callbacks: Iterable[Any]) -> tuple[ResultFileKinds, list[Any]]:
    """Split ``callbacks`` into the file loggers a worker can run and the rest.

    Only instances of exactly :class:`JsonLoggerCallback`, :class:`CSVLoggerCallback`
    and :class:`TBXLoggerCallback` move (a subclass may do anything with a result).

    Returns:
        The kinds of files the workers write, and the callbacks that stay.
    """
    kinds = {"json": False, "csv": False, "tensorboard": False}
    exact = {JsonLoggerCallback: "json", CSVLoggerCallback: "csv", TBXLoggerCallback: "tensorboard"}
    kept = []
    for callback in callbacks:
        kind = exact.get(type(callback))
        if kind is None or kinds[kind]:
            kept.append(callback)
        else:
            kinds[kind] = True
    return ResultFileKinds(**kinds), kept


@dataclass(frozen=True)
class TrialFilesSpec:
    """What a worker needs to write one trial's result files.

    Attributes:
        kinds: Which files.
        experiment_tag: The trial's tag, added to each result as the driver does.
        hparams: The TensorBoard hyperparameters (the trial's evaluated params), or
            None for the trial's config.
        resume_point: For a trial that ran before: where its files are cut back to.
        required_metrics: Results must carry these (else the driver fails the trial,
            and the result is not written).
    """

    kinds: ResultFileKinds
    experiment_tag: str = ""
    hparams: dict[str, Any] | None = None
    resume_point: ResumePoint | None = None
    required_metrics: tuple[str, ...] = ()


class TrialResultFiles:
    """The open result files of the trial a worker runs.

    Args:
        trial_dir: The trial directory.
        spec: What to write.
        config: The trial's config (``params.json``/``params.pkl``, and the
            hyperparameters when ``spec.hparams`` is None).
    """

    def __init__(self, trial_dir: str, spec: TrialFilesSpec, config: dict[str, Any]):
        self.spec = spec
        self._config = config
        # (callback class, writer, takes the flattened result, lines wait for a flush),
        # each opened as that logger callback opens it for the driver.
        self._writers: list[tuple[type[_TrialFileLoggerCallback], Any, bool, bool]] = []
        for name, cls in _CALLBACKS:
            if not getattr(spec.kinds, name):
                continue
            if spec.resume_point is not None:
                cls.rewind_files(trial_dir, spec.resume_point)
            writer = cls.open_writer(trial_dir, config, buffered=True)
            self._writers.append((cls, writer, cls._takes_flat, cls._can_buffer_lines))
        self._stopped = False

    def write(self, results: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Write ``results`` (in order) and hand the lines to the operating system.

        Results are completed as the driver completes them (experiment tag, an empty
        checkpoint name); a duplicate (a function returning without a new result) is
        not written; a result without a required metric ends the writing (the driver
        fails the trial on it).

        Returns:
            The results written, flattened (without ``config``), in order, when every
            one but a last duplicate was; None otherwise (the driver must see them all).
        """
        if self._stopped:
            return None
        flats: list[dict[str, Any]] | None = []
        tag = self.spec.experiment_tag
        required = self.spec.required_metrics
        writers = self._writers
        last = results[-1] if results else None
        for result in results:
            if result.get(R.RESULT_DUPLICATE):
                if result is not last:
                    flats = None  # only ever last; were it not, the driver sees it all
                continue
            result[R.EXPERIMENT_TAG] = tag
            result.setdefault(R.CHECKPOINT_DIR_NAME, None)
            flat = flatten_result(result, _NOT_FLATTENED)
            if required and not flat.get(R.DONE) and any(m not in flat for m in required):
                self._stopped = True
                flats = None
                break
            if flats is not None:
                flats.append(flat)
            for _, writer, takes_flat, _ in writers:
                if takes_flat:
                    writer.write_result(result, flat)
                else:
                    writer.write_result(result)
        for _, writer, _, buffered in writers:
            if buffered:
                writer.flush()
        return flats

    def close(self) -> None:
        """Write each file's last words (TensorBoard's hparams) and close it (idempotent)."""
        writers, self._writers = self._writers, []
        params = self.spec.hparams or self._config
        with contextlib.ExitStack() as closing:  # every file closes, whatever raises
            for _, writer, _, _ in writers:
                closing.callback(writer.close)
            for cls, writer, _, _ in writers:
                cls.last_words(writer, params)
