"""``CLIReporter``: progress tables on a terminal (redrawn in place) or a plain stream."""

from __future__ import annotations

import re
import shutil
import sys
from typing import Any, TextIO

from fasttune.progress._format import Format
from fasttune.progress.reporter import TuneReporterBase, extends_init

CURSOR_UP = "\x1b[{}A"
CLEAR_TO_END = "\x1b[J"
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # a CSI sequence: takes no columns

RICH_MAX_ROWS = 200
"""A final table of more trials is drawn as plain text (rich takes ~1 ms of CPU a row)."""

LIVE_REPORT_FREQUENCY = 1.0
"""Default seconds between redraws when the table is redrawn in place."""


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class _LiveRegion:
    """The block of lines last drawn at the bottom of a terminal, to erase and redraw."""

    def __init__(self) -> None:
        self.rows = 0
        self.text = ""
        self.erased = False  # a line was printed over the block; it needs drawing again

    def _rows_of(self, text: str) -> int:
        columns = max(1, shutil.get_terminal_size((80, 24)).columns)
        lines = _ESCAPE.sub("", text).split("\n")
        return sum(max(1, -(-len(line) // columns)) for line in lines)

    def erase_sequence(self) -> str:
        """Move the cursor to the block's first line and clear everything below."""
        if not self.rows:
            return ""
        return CURSOR_UP.format(self.rows) + "\r" + CLEAR_TO_END

    def draw(self, stream: TextIO, text: str) -> None:
        text = text.rstrip("\n")
        stream.write(self.erase_sequence() + text + "\n")
        stream.flush()
        self.rows, self.text, self.erased = self._rows_of(text), text, False

    def write_above(self, stream: TextIO, line: str) -> None:
        stream.write(self.erase_sequence() + line.rstrip("\n") + "\n")
        stream.flush()
        self.erased = self.erased or self.rows > 0
        self.rows = 0


class CLIReporter(TuneReporterBase):
    """Prints the experiment's status to the console.

    On a terminal the status is redrawn in place (ANSI cursor movement), by default
    at most once a second, with a progress bar over the trials (done/total and an
    ETA when the number of trials is known); it is drawn with rich when rich is
    installed (``pip install "fasttune[rich]"``: colours, tables fitted to the
    terminal's width), else as plain text. On any other stream (a file, a pipe, a CI
    log) each report is printed below the previous one, without escape codes, by
    default at most every 5 seconds. The last report always shows every trial.

    Args:
        metric_columns, parameter_columns, total_samples, max_progress_rows,
        max_error_rows, max_column_length, infer_limit, print_intermediate_tables,
        metric, mode, sort_by_metric, clock: See :class:`TuneReporterBase`.
        max_report_frequency: Seconds between reports (default 1 when redrawing in
            place, else 5).
        out: The stream to write to; defaults to ``sys.stdout`` at each report.
        redraw: Redraw in place; defaults to whether ``out`` is a terminal.
        rich: Draw the in-place report with rich; defaults to whether rich can be
            imported. ``True`` without rich raises ImportError at the first report.

    Example:
        >>> import io
        >>> from fasttune.experiment.trial import Trial
        >>> buf = io.StringIO()
        >>> reporter = CLIReporter(out=buf)
        >>> reporter.report([Trial("f", trial_id="a_00000")], True)
        >>> "Number of trials: 1 (1 PENDING)" in buf.getvalue()
        True
    """

    @extends_init(TuneReporterBase.__init__)
    def __init__(
        self,
        *args: Any,
        out: TextIO | None = None,
        redraw: bool | None = None,
        rich: bool | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self._out = out
        self._redraw = redraw
        self._rich = rich
        self._rich_format: Any = None
        self._live = _LiveRegion()

    @property
    def stream(self) -> TextIO:
        """Where reports go."""
        return self._out if self._out is not None else sys.stdout

    @property
    def redraws(self) -> bool:
        """Whether reports replace the previous one in place."""
        return _is_tty(self.stream) if self._redraw is None else self._redraw

    @property
    def max_report_frequency(self) -> float:
        if self._max_report_frequency is None:
            return LIVE_REPORT_FREQUENCY if self.redraws else self.DEFAULT_REPORT_FREQUENCY
        return float(self._max_report_frequency)

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        """As :meth:`TuneReporterBase.should_report`, and also when a printed line
        has erased the table from the terminal."""
        if self._live.erased:
            self._last_report_time = self._clock()
            return True
        return super().should_report(trials, done)

    def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
        """Print the status (in place on a terminal)."""
        stream = self.stream
        if self.redraws:
            fmt = self._live_format(stream) if not done or len(trials) <= RICH_MAX_ROWS else None
            text = self._progress_str(trials, done, *sys_info, fmt=fmt or "text", progress_bar=True)
            self._live.draw(stream, text)
            if done:
                self._live = _LiveRegion()  # the final report stays on screen
        else:
            text = self._progress_str(trials, done, *sys_info)
            stream.write(text.rstrip("\n") + "\n")
            stream.flush()

    def _live_format(self, stream: TextIO) -> Format | None:
        """rich's format at the terminal's current width, or None for plain text."""
        if self._rich is False:
            return None
        width = max(20, shutil.get_terminal_size((80, 24)).columns)
        if self._rich_format is None or self._rich_format.width != width:
            encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
            try:
                from fasttune.progress._rich import RichFormat

                self._rich_format = RichFormat(width, unicode=encoding.startswith("utf"))
            except ImportError:
                if self._rich:
                    raise ImportError(
                        'CLIReporter(rich=True) needs rich: pip install "fasttune[rich]"'
                    ) from None
                self._rich = False
                return None
        return self._rich_format

    def print_line(self, line: str) -> None:
        """Print ``line``; on a terminal it goes above the live table, which is
        drawn again at the next :meth:`should_report`."""
        stream = self.stream
        if self.redraws:
            self._live.write_above(stream, line)
        else:
            stream.write(line.rstrip("\n") + "\n")
            stream.flush()
