"""The live report kept in the bottom rows of a terminal, under a scrolling region.

The rows above the report are made a scrolling region (DECSTBM, as apt's progress
line): whatever else is written to the terminal meanwhile, the driver's own lines
and the prints of trials running in worker processes (which share the terminal),
scrolls there and stays readable, while the report is redrawn in place below it.
The report is cut to the terminal's width and to its height less
:data:`MIN_OUTPUT_ROWS`. Releasing the region (at the end of the run, at exit, or
when the terminal is resized) restores the whole screen as the scrolling region.
"""

from __future__ import annotations

import atexit
import re
import shutil
from typing import TextIO

SAVE_CURSOR = "\x1b7"
RESTORE_CURSOR = "\x1b8"
ERASE_LINE = "\x1b[2K"
CLEAR_BELOW = "\x1b[J"
RESET_MARGINS = "\x1b[r"
MIN_OUTPUT_ROWS = 4
"""Rows always left to the scrolling output above the report."""

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # a CSI sequence: takes no columns


def _goto(row: int) -> str:
    return f"\x1b[{row};1H"


def _margins(bottom: int) -> str:
    return f"\x1b[1;{bottom}r"


def terminal_size() -> tuple[int, int]:
    """(columns, lines) of the terminal (80 x 24 when it cannot be told)."""
    size = shutil.get_terminal_size((80, 24))
    return max(20, size.columns), max(MIN_OUTPUT_ROWS + 2, size.lines)


def fit_rows(text: str, columns: int, max_rows: int) -> list[str]:
    """``text`` as screen rows: lines longer than ``columns`` cut (their escape codes
    dropped), and at most ``max_rows`` rows, the last saying how many were left out.

    Example:
        >>> fit_rows("abcdef\\nx\\ny\\nz", columns=4, max_rows=3)
        ['abcd', 'x', '... 2 more lines (a taller terminal shows them)']
    """
    rows = []
    for line in text.rstrip("\n").split("\n"):
        visible = _ESCAPE.sub("", line)
        rows.append(visible[:columns] if len(visible) > columns else line)
    if len(rows) > max_rows:
        hidden = len(rows) - max_rows + 1
        rows = [*rows[: max_rows - 1], f"... {hidden} more lines (a taller terminal shows them)"]
    return rows


class PinnedRegion:
    """The rows at the bottom of a terminal that hold the live report."""

    def __init__(self) -> None:
        self.rows = 0  # rows reserved at the bottom (0: not active)
        self.size: tuple[int, int] | None = None
        self._exit_hook: TextIO | None = None

    @property
    def active(self) -> bool:
        return self.rows > 0

    def draw(self, stream: TextIO, text: str) -> None:
        """Draw ``text`` in the bottom rows, reserving more rows when it grew."""
        columns, lines = terminal_size()
        rows = fit_rows(text, columns, lines - MIN_OUTPUT_ROWS)
        out = []
        if self.active and (columns, lines) != self.size:
            out.append(self._release_sequence())  # resized: start again
        if len(rows) > self.rows:
            out.append(self._reserve_sequence(len(rows), lines))
        self.size = (columns, lines)
        top = lines - self.rows + 1
        out.append(SAVE_CURSOR)
        for i in range(self.rows):
            out.append(_goto(top + i) + ERASE_LINE + (rows[i] if i < len(rows) else ""))
        out.append(RESTORE_CURSOR)
        stream.write("".join(out))
        stream.flush()
        if self._exit_hook is None:
            self._exit_hook = stream
            atexit.register(self.release, stream)

    def release(self, stream: TextIO) -> None:
        """Give the whole screen back to scrolling output; the cursor is left where the
        report was, which is cleared."""
        if self.active:
            stream.write(self._release_sequence())
            stream.flush()

    def _reserve_sequence(self, rows: int, lines: int) -> str:
        """Scroll the screen up so that the bottom ``rows`` are free, and make the rows
        above them the scrolling region, with the cursor at its last row."""
        grow = rows - self.rows
        out = ""
        if self.active:  # the whole screen scrolls, the old report with it
            out += RESET_MARGINS + _goto(lines)
        out += "\n" * grow
        self.rows = rows
        return out + _margins(lines - rows) + _goto(lines - rows)

    def _release_sequence(self) -> str:
        assert self.size is not None
        top = self.size[1] - self.rows + 1
        self.rows = 0
        return RESET_MARGINS + _goto(top) + CLEAR_BELOW
