"""The live report drawn with rich on a terminal: styled lines, fitted tables, a bar.

Imported only when a report is drawn on a terminal and rich is installed
(``pip install "fasttune[rich]"``); without rich the plain text format is used.
Each part is rendered to a string of ANSI codes at the terminal's width, so the
caller redraws the whole report in place as it does plain text.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from fasttune.progress._bar import TrialProgress, progress_label
from fasttune.progress._format import _numeric_columns, format_cell

_STATUS_STYLES = {
    "RUNNING": "bold green",
    "ERROR": "bold red",
    "PENDING": "yellow",
    "PAUSED": "yellow",
    "TERMINATED": "blue",
}


class RichFormat:
    """A report format (as :class:`~fasttune.progress._format.TextFormat`) drawn by rich.

    Args:
        width: The terminal's width in columns; tables are fitted to it, one line a row.
        unicode: Draw box lines and the bar with Unicode characters (else ASCII).

    Raises:
        ImportError: rich is not installed.
    """

    name = "rich"
    delim = "\n"

    def __init__(self, width: int, unicode: bool = True):
        import rich.box
        from rich.console import Console

        self.width = width
        self._box = rich.box.SIMPLE_HEAVY if unicode else rich.box.ASCII
        self._buffer = io.StringIO()
        self._console = Console(
            file=self._buffer,
            width=width,
            force_terminal=True,
            markup=False,
            emoji=False,
            highlight=False,
            legacy_windows=False,
            safe_box=not unicode,
        )

    def _render(self, renderable: Any) -> str:
        with self._console.capture() as capture:
            self._console.print(renderable, end="")
        return capture.get().rstrip("\n")

    def text(self, line: str) -> str:
        from rich.text import Text

        style = "bold" if line.startswith(("== ", "Current best trial")) else ""
        return self._render(Text(line, style=style, overflow="fold"))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
        """Rows one line each, columns shortened with an ellipsis to fit the width."""
        from rich.table import Table
        from rich.text import Text

        numeric = _numeric_columns(rows, len(headers))
        table = Table(box=self._box, header_style="bold", show_edge=False, pad_edge=False)
        # names end with the trial's id: shorten the other columns first
        widest_name = max((len(str(row[0])) for row in rows), default=0)
        min_widths = {0: min(widest_name, self.width // 2), 1: len("TERMINATED")}
        for i, (header, is_numeric) in enumerate(zip(headers, numeric)):
            table.add_column(
                header,
                justify="right" if is_numeric else "left",
                no_wrap=True,
                overflow="ellipsis",
                min_width=min_widths.get(i) if header in ("Trial name", "status") else None,
            )
        status_at = list(headers).index("status") if "status" in headers else -1
        for row in rows:
            cells = [format_cell(v) for v in row]
            texts = [
                Text(c, style=_STATUS_STYLES.get(c, "") if i == status_at else "")
                for i, c in enumerate(cells)
            ]
            table.add_row(*texts)
        return self._render(table)

    def bar(self, progress: TrialProgress) -> str:
        """A bar over the trials (done/total, ETA) or, with no known total, a count."""
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        label = progress_label(progress)
        if progress.total is None:
            return self._render(label)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis")
        bar = ProgressBar(
            total=progress.total,
            completed=progress.done,
            width=min(30, self.width // 3),
            complete_style="green",
            finished_style="bold green",
        )
        grid.add_row(bar, label)
        return self._render(grid)
