"""``CLIReporter``: progress tables on a terminal (redrawn in place) or a plain stream."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from fasttune.progress._format import Format
from fasttune.progress._terminal import PinnedRegion, terminal_size
from fasttune.progress.reporter import TuneReporterBase, extends_init

RICH_MAX_ROWS = 200
"""A final table of more trials is drawn as plain text (rich takes ~1 ms of CPU a row)."""

LIVE_REPORT_FREQUENCY = 1.0
"""Default seconds between redraws when the table is redrawn in place."""


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class CLIReporter(TuneReporterBase):
    """Prints the experiment's status to the console.

    On a terminal the status is redrawn in place in the terminal's bottom rows, by
    default at most once a second, with a progress bar over the trials (done/total
    and an ETA when the number of trials is known); what else is printed meanwhile
    (the trials' own prints too) scrolls above it. It is drawn with rich when rich is
    installed (``pip install "fasttune[rich]"``: colours, tables fitted to the
    terminal's width), else as plain text; the final report is printed as usual. On
    any other stream (a file, a pipe, a CI log) each report is printed below the
    previous one, without escape codes, by default at most every 5 seconds. The last
    report always shows every trial.

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
        self._live = PinnedRegion()

    @property
    def stream(self) -> TextIO:
        """Where reports go."""
        return self._out if self._out is not None else sys.stdout

    @property
    def redraws(self) -> bool:
        """Whether reports replace the previous one in place (on a terminal that is
        not ``TERM=dumb``, unless ``redraw`` says)."""
        if self._redraw is not None:
            return self._redraw
        return _is_tty(self.stream) and os.environ.get("TERM") != "dumb"

    @property
    def max_report_frequency(self) -> float:
        if self._max_report_frequency is None:
            return LIVE_REPORT_FREQUENCY if self.redraws else self.DEFAULT_REPORT_FREQUENCY
        return float(self._max_report_frequency)

    def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
        """Print the status (in place on a terminal)."""
        stream = self.stream
        if self.redraws:
            fmt = self._live_format(stream) if not done or len(trials) <= RICH_MAX_ROWS else None
            text = self._progress_str(trials, done, *sys_info, fmt=fmt or "text", progress_bar=True)
            if done:  # the final report is printed where the live one was, and stays
                self._live.release(stream)
                stream.write(text.rstrip("\n") + "\n")
                stream.flush()
            else:
                self._live.draw(stream, text)
        else:
            text = self._progress_str(trials, done, *sys_info)
            stream.write(text.rstrip("\n") + "\n")
            stream.flush()

    def _live_format(self, stream: TextIO) -> Format | None:
        """rich's format at the terminal's current width, or None for plain text."""
        if self._rich is False:
            return None
        width = terminal_size()[0]
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
        """Print ``line`` (on a terminal it scrolls above the live report)."""
        stream = self.stream
        stream.write(line.rstrip("\n") + "\n")
        stream.flush()
