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

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fasttune import result as R
from fasttune._support.flatten import flatten_result
from fasttune.experiment.trial import ResumePoint
from fasttune.logger._rewind import rewind_csv, rewind_event_files, rewind_json_lines
from fasttune.logger.csv import CSVResultWriter
from fasttune.logger.json import JsonResultWriter, write_params
from fasttune.logger.logger_callback import (
    CSVLoggerCallback,
    JsonLoggerCallback,
    TBXLoggerCallback,
)
from fasttune.logger.tensorboardx import TBXResultWriter

_NOT_FLATTENED = frozenset((R.CONFIG,))


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
        kinds = spec.kinds
        point = spec.resume_point
        if point is not None:
            if kinds.json:
                rewind_json_lines(os.path.join(trial_dir, R.EXPR_RESULT_FILE), point.iteration)
            if kinds.csv:
                rewind_csv(os.path.join(trial_dir, R.EXPR_PROGRESS_FILE), point.iteration)
            if kinds.tensorboard:
                rewind_event_files(trial_dir, point.step)
        self._json: JsonResultWriter | None = None
        self._csv: CSVResultWriter | None = None
        self._tb: TBXResultWriter | None = None
        if kinds.json:
            write_params(trial_dir, config)
            self._json = JsonResultWriter(trial_dir, buffered=True)
        if kinds.csv:
            self._csv = CSVResultWriter(trial_dir, buffered=True)
        if kinds.tensorboard:
            self._tb = TBXResultWriter(trial_dir)
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
        json_out, csv_out, tb_out = self._json, self._csv, self._tb
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
            if json_out is not None:
                json_out.write_result(result)
            if csv_out is not None:
                csv_out.write_result(result, flat)
            if tb_out is not None:
                tb_out.write_result(result, flat)
        if json_out is not None:
            json_out.flush()
        if csv_out is not None:
            csv_out.flush()
        return flats

    def close(self) -> None:
        """Write the TensorBoard hyperparameters and close the files (idempotent)."""
        writers = [w for w in (self._json, self._csv) if w is not None]
        tb, self._tb = self._tb, None
        self._json = self._csv = None
        try:
            if tb is not None:
                try:
                    params = self.spec.hparams or self._config
                    if params:
                        tb.write_hparams(params)
                finally:
                    tb.close()
        finally:
            for writer in writers:
                writer.close()
