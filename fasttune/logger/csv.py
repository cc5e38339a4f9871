"""``progress.csv`` in a trial directory: one row per result, flattened keys as columns.

The file-format logic lives in :class:`CSVResultWriter`, which only needs a
directory; :class:`CSVLogger` (and the driver-side callback) are thin users of it.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from fasttune._support.flatten import flatten_result
from fasttune.logger._appender import LineAppender
from fasttune.logger.logger import Logger
from fasttune.result import CONFIG, EXPR_PROGRESS_FILE
from fasttune.storage.filesystem import atomic_write_bytes

logger = logging.getLogger(__name__)

_LINE_END = "\n"
_MAX_ROWS_PENDING = 1024  # buffered rows handed to the file at least this often
_EXCLUDED = frozenset((CONFIG,))


class _Lines:
    """A file-like sink collecting the lines a ``csv.writer`` produces.

    ``write`` is the list's own ``append`` (a C method): a Python ``write`` method
    called for every row cost about a third of writing the row.
    """

    __slots__ = ("lines", "write")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.write = self.lines.append

    def take(self) -> bytes:
        """The collected lines as one encoded chunk; the sink is emptied."""
        data = _encode("".join(self.lines))
        self.lines.clear()
        return data


def format_row(values: Iterable[Any]) -> str:
    """One row's text, as :class:`CSVResultWriter` writes it (with its line end)."""
    sink = _Lines()
    csv.writer(sink, lineterminator=_LINE_END).writerow(values)
    return sink.lines[0]


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")


class CSVResultWriter:
    """Writes results as rows of ``progress.csv`` in a trial directory.

    Nested dicts are flattened with ``/`` (``{"a": {"b": 1}}`` -> column ``a/b``)
    and the ``config`` key is left out. The header comes from the first result.
    When a later result brings new keys, the file is rewritten once with the
    extended header, older rows getting blanks in the new columns, and replaces the
    old one atomically; keys missing from a result are left blank. An existing
    file (a restored trial) is appended to under its own header.

    Each row reaches the operating system whole, so the file always parses with
    :class:`csv.DictReader`. The file is opened at the first result.

    Args:
        logdir: The trial directory (created if missing).
        buffered: Keep rows in memory until :meth:`flush` (at most 1,024 of them).
    """

    def __init__(self, logdir: str, buffered: bool = False):
        self.logdir = logdir
        self._buffered = buffered
        self.path = os.path.join(logdir, EXPR_PROGRESS_FILE)
        self._out: LineAppender | None = None
        self._fieldnames: list[str] | None = None
        self._known: set[str] = set()
        self._last_keys: tuple[str, ...] = ()
        # Whether the last keys are the columns, in order (a row is then the values).
        self._keys_are_columns = False
        self._sink = _Lines()
        self._csv = csv.writer(self._sink, lineterminator=_LINE_END)
        self._closed = False

    @property
    def fieldnames(self) -> list[str] | None:
        """The columns of the file, or None before the first result."""
        return None if self._fieldnames is None else list(self._fieldnames)

    def _open(self) -> LineAppender:
        if self._closed:
            raise ValueError(f"Cannot write to {self.path}: the writer is closed.")
        # Rows wait in the sink, not in the appender. A new file (the usual case: a
        # trial's first result) is not read for a header.
        self._out = LineAppender(self.path)
        header = self._read_header() if self._out.size_at_open else None
        if header:
            self._set_fieldnames(header)
        return self._out

    def _read_header(self) -> list[str] | None:
        try:
            with open(self.path, newline="", encoding="utf-8") as f:
                return next(csv.reader(f), None)
        except FileNotFoundError:
            return None

    def _set_fieldnames(self, fieldnames: list[str]) -> None:
        self._fieldnames = fieldnames
        self._known = set(fieldnames)

    def write_result(
        self, result: dict[str, Any], flat: Mapping[str, Any] | None = None
    ) -> str | None:
        """Append ``result`` as one row, extending the header first if it has new keys.

        Args:
            result: The result.
            flat: ``result`` already flattened with "/" and without ``config``, if known.

        Returns:
            The row's text when the flattened keys are the columns in order (then
            :meth:`write_rows` takes rows of such results); None otherwise.
        """
        out = self._out or self._open()
        if flat is None:
            flat = flatten_result(result, _EXCLUDED)
        keys = tuple(flat)
        if keys != self._last_keys:
            self._last_keys = keys
            if self._fieldnames is None:
                self._set_fieldnames(list(keys))
                self._csv.writerow(keys)
            else:
                new = [k for k in keys if k not in self._known]
                if new:
                    out = self._extend_header(new)
            self._keys_are_columns = list(keys) == self._fieldnames
        row = None
        if self._keys_are_columns:
            self._csv.writerow(flat.values())
            row = self._sink.lines[-1]
        else:
            get = flat.get
            self._csv.writerow([get(k, "") for k in self._fieldnames])  # type: ignore[union-attr]
        self._hand_over_if_due(out)
        return row

    def write_rows(self, keys: tuple[str, ...], rows: list[str]) -> bool:
        """Append ``rows``, the texts of results whose flattened keys are ``keys``.

        Only when ``keys`` are the columns of the last row :meth:`write_result` wrote
        (and returned the text of), or of the file (then they are its header when
        it has none yet); otherwise nothing is written.

        Returns:
            Whether the rows were written.
        """
        out = self._out
        if out is None:
            out = self._open()
            if self._fieldnames is None:
                self._set_fieldnames(list(keys))
                self._csv.writerow(keys)
            elif list(keys) != self._fieldnames:
                return False  # write_result decides (a restored file's other header)
            self._last_keys = keys
            self._keys_are_columns = True
        elif not self._keys_are_columns or keys != self._last_keys:
            return False
        self._sink.lines.extend(rows)
        self._hand_over_if_due(out)
        return True

    def _hand_over_if_due(self, out: LineAppender) -> None:
        """Hand the collected rows over now unless buffered and fewer than the bound."""
        if not self._buffered or len(self._sink.lines) >= _MAX_ROWS_PENDING:
            out.append(self._sink.take())

    def _hand_over(self) -> None:
        """Write the rows collected in the sink to the file, in one system call."""
        if self._sink.lines and self._out is not None:
            self._out.append(self._sink.take())

    def _extend_header(self, new_keys: list[str]) -> LineAppender:
        """Rewrite the file with ``new_keys`` added to the header, atomically."""
        assert self._out is not None and self._fieldnames is not None
        fieldnames = self._fieldnames + new_keys
        logger.debug("Adding columns %s to %s", new_keys, self.path)
        self._hand_over()
        self._out.close()
        with open(self.path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator=_LINE_END)
        writer.writerow(fieldnames)
        width = len(fieldnames)
        for row in rows[1:]:
            writer.writerow(row + [""] * (width - len(row)))
        atomic_write_bytes(self.path, _encode(buffer.getvalue()))
        self._set_fieldnames(fieldnames)
        self._out = LineAppender(self.path)
        return self._out

    def flush(self) -> None:
        """Hand buffered rows to the operating system."""
        self._hand_over()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the file; closing twice is harmless."""
        self._closed = True
        if self._out is not None:
            self._hand_over()
            self._out.close()


class CSVLogger(Logger):
    """Logs results to ``progress.csv`` in the trial directory.

    Nested dicts are flattened: ``{"a": {"b": 1, "c": 2}}`` gives the columns
    ``a/b`` and ``a/c``. See :class:`CSVResultWriter` for how new keys are handled.

    Example:
        >>> import tempfile
        >>> log = CSVLogger({}, tempfile.mkdtemp())
        >>> log.on_result({"training_iteration": 1, "metrics": {"loss": 0.5}})
        >>> log.close()
    """

    def _init(self) -> None:
        self._writer = CSVResultWriter(self.logdir)

    def on_result(self, result: dict[str, Any]) -> None:
        """Append ``result`` as one row of ``progress.csv``."""
        self._writer.write_result(result)

    def flush(self) -> None:
        """Push pending writes to storage (every row is already handed to the OS)."""
        self._writer.flush()

    def close(self) -> None:
        """Close ``progress.csv``."""
        self._writer.close()


def __getattr__(name: str) -> Any:
    # Ray has ``CSVLoggerCallback`` in this module; it is defined in logger_callback, which
    # imports this module's writer, so it is looked up here on first use.
    if name == "CSVLoggerCallback":
        from fasttune.logger import logger_callback

        return logger_callback.CSVLoggerCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
