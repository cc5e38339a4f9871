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
from fasttune.logger._line_template import LineTemplate
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


class _TemplatedRun:
    """Consecutive results encoded by one line template, waiting to be written."""

    __slots__ = ("csv_rows", "flats", "json_lines", "results", "template")

    def __init__(self, template: LineTemplate) -> None:
        self.template = template
        self.results: list[dict[str, Any]] = []
        self.flats: list[dict[str, Any]] = []
        self.json_lines: list[bytes] = []
        self.csv_rows: list[Any] = []

    def add(self, result: dict[str, Any], flat: dict[str, Any], lines: tuple[bytes, Any]) -> None:
        self.results.append(result)
        self.flats.append(flat)
        self.json_lines.append(lines[0])
        self.csv_rows.append(lines[1])


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
        # Whether a template can encode lines for a writer here (see write).
        self._lines_templated = any(
            cls is JsonLoggerCallback or cls is CSVLoggerCallback for cls, *_ in self._writers
        )
        self._rows_templated = any(cls is CSVLoggerCallback for cls, *_ in self._writers)

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
        last = results[-1] if results else None
        # Results of one shape are encoded from a template (see _line_template),
        # bound afresh for each batch: of a shape this process knows, bound to the
        # first result, which the template then encodes too; else made from a result
        # the general encoders wrote. At most twice per batch, should the shape change
        # (the date text, once a second).
        template: LineTemplate | None = None
        templates_left = 2 if self._lines_templated else 0
        # Results the template encoded, written together when the run of them ends.
        run: _TemplatedRun | None = None
        for result in results:
            if result.get(R.RESULT_DUPLICATE):
                if result is not last:
                    flats = None  # only ever last; were it not, the driver sees it all
                continue
            result[R.EXPERIMENT_TAG] = tag
            result.setdefault(R.CHECKPOINT_DIR_NAME, None)
            lines = None if template is None else template.encode(result)
            if lines is None and templates_left:
                known = LineTemplate.for_known_shape(result, rows=self._rows_templated)
                if known is not None:
                    templates_left -= 1
                    template = known
                    lines = template.encode(result)
            if lines is None:
                flat = flatten_result(result, _NOT_FLATTENED)
            else:
                flat = dict(result)  # a template's results hold no nested dict
                flat.pop(R.CONFIG, None)
            if required and not flat.get(R.DONE) and any(m not in flat for m in required):
                self._stopped = True
                flats = None
                break
            if flats is not None:
                flats.append(flat)
            if template is not None and lines is not None:
                if run is not None and run.template is not template:
                    self._write_run(run)
                    run = None
                if run is None:
                    run = _TemplatedRun(template)
                run.add(result, flat, lines)
                continue
            if run is not None:
                self._write_run(run)
                run = None
            line, row = self._write_general(result, flat)
            if templates_left:
                templates_left -= 1
                template = LineTemplate.make(result, line, row)
        if run is not None:
            self._write_run(run)
        for _, writer, _, buffered in self._writers:
            if buffered:
                writer.flush()
        return flats

    def _write_general(
        self, result: dict[str, Any], flat: dict[str, Any]
    ) -> tuple[bytes | None, str | None]:
        """Write ``result`` with each writer's own encoder; the JSON line and the CSV
        row written, where known."""
        line = row = None
        for cls, writer, takes_flat, _ in self._writers:
            written = (
                writer.write_result(result, flat) if takes_flat else writer.write_result(result)
            )
            if cls is JsonLoggerCallback:
                line = written
            elif cls is CSVLoggerCallback:
                row = written
        return line, row

    def _write_run(self, run: _TemplatedRun) -> None:
        """Write the results of ``run``, whose JSON lines and CSV rows its template
        encoded: each writer takes them all in one call."""
        results, flats, template = run.results, run.flats, run.template
        for cls, writer, takes_flat, _ in self._writers:
            if cls is JsonLoggerCallback:
                writer.write_lines(run.json_lines)
            elif cls is CSVLoggerCallback:
                rows = run.csv_rows
                if rows[0] is None or not writer.write_rows(template.columns, rows):
                    for result, flat in zip(results, flats):
                        writer.write_result(result, flat)
            elif cls is TBXLoggerCallback:
                # The template's results share one shape and only finite numbers.
                writer.write_results(results, flats, finite_shape=template)
            elif takes_flat:
                for result, flat in zip(results, flats):
                    writer.write_result(result, flat)
            else:
                for result in results:
                    writer.write_result(result)

    def close(self) -> None:
        """Write each file's last words (TensorBoard's hparams) and close it (idempotent)."""
        writers, self._writers = self._writers, []
        params = self.spec.hparams or self._config
        with contextlib.ExitStack() as closing:  # every file closes, whatever raises
            for _, writer, _, _ in writers:
                closing.callback(writer.close)
            for cls, writer, _, _ in writers:
                cls.last_words(writer, params)
