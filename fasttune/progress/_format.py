"""Rendering primitives of the progress reports: cells, tables (text or HTML), times."""

from __future__ import annotations

import datetime
import math
import numbers
from collections.abc import Sequence
from typing import Any, Protocol


def _escape(text: str) -> str:
    """``html.escape(text)``; html is imported only for HTML tables (its entity table
    costs ~3 ms of every start otherwise)."""
    import html

    return html.escape(text)


def is_number(value: Any) -> bool:
    """True for real numbers (builtin or numpy) that are not bools."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def format_cell(value: Any) -> str:
    """A table cell: floats with 6 significant digits, None as empty."""
    if value is None:
        return ""
    if is_number(value) and not isinstance(value, numbers.Integral):
        return format(float(value), "g")
    return str(value)


def abbreviate(text: str, max_len: int) -> str:
    """Keep the last characters of ``text`` when it is longer than ``max_len``.

    Example:
        >>> abbreviate("optimizer/learning_rate", 12)
        '...ning_rate'
    """
    if max_len <= 0 or len(text) <= max_len:
        return text
    if max_len <= 3:
        return text[-max_len:]
    return "..." + text[-(max_len - 3) :]


def time_passed_str(start_time: float, now: float) -> str:
    """``Current time: <date> (running for HH:MM:SS.ss)``, with days when over 24 h."""
    elapsed = max(0.0, now - start_time)
    days, rest = divmod(elapsed, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    running = f"{int(days)} days, " if days else ""
    running += f"{int(hours):02d}:{int(minutes):02d}:{seconds:05.2f}"
    stamp = datetime.datetime.fromtimestamp(now).strftime("%Y-%m-%d %H:%M:%S")
    return f"Current time: {stamp} (running for {running})"


def _numeric_columns(rows: Sequence[Sequence[Any]], width: int) -> list[bool]:
    numeric = []
    for i in range(width):
        values = [row[i] for row in rows if row[i] is not None]
        numeric.append(bool(values) and all(is_number(v) for v in values))
    return numeric


class TextFormat:
    """Plain text: lines joined with newlines, tables drawn like ``psql``."""

    name = "text"
    delim = "\n"

    def text(self, line: str) -> str:
        return line

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
        """Draw ``rows`` under ``headers``; numeric columns are right-aligned.

        Example:
            >>> print(TextFormat().table(["name", "x"], [["a", 1.5], ["bb", None]]))
            +------+-----+
            | name |   x |
            |------+-----|
            | a    | 1.5 |
            | bb   |     |
            +------+-----+
        """
        numeric = _numeric_columns(rows, len(headers))
        cells = [[format_cell(v) for v in row] for row in rows]
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
        dashes = ["-" * (w + 2) for w in widths]

        def line(values: Sequence[str]) -> str:
            parts = [
                v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)
            ]
            return "| " + " | ".join(parts) + " |"

        border = "+" + "+".join(dashes) + "+"
        out = [border, line(headers), "|" + "+".join(dashes) + "|"]
        out += [line(r) for r in cells]
        out.append(border)
        return "\n".join(out)


class HtmlFormat:
    """HTML: lines joined with ``<br>``, tables as ``<table>`` elements, text escaped."""

    name = "html"
    delim = "<br>"

    def text(self, line: str) -> str:
        return _escape(line)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
        """An HTML table; numeric cells are right-aligned.

        Example:
            >>> HtmlFormat().table(["a"], [["<b>"]]).splitlines()[1:4]
            ['<thead><tr><th>a</th></tr></thead>', '<tbody>', '<tr><td>&lt;b&gt;</td></tr>']
        """
        numeric = _numeric_columns(rows, len(headers))
        right = ' style="text-align: right;"'
        head = "".join(
            f"<th{right if n else ''}>{_escape(h)}</th>" for h, n in zip(headers, numeric)
        )
        body = [
            "<tr>"
            + "".join(
                f"<td{right if n else ''}>{_escape(format_cell(v))}</td>"
                for v, n in zip(row, numeric)
            )
            + "</tr>"
            for row in rows
        ]
        return "\n".join(
            ["<table>", f"<thead><tr>{head}</tr></thead>", "<tbody>", *body, "</tbody>", "</table>"]
        )


class Format(Protocol):
    """What a report is drawn with: text lines, tables, and the string between lines
    (:class:`TextFormat`, :class:`HtmlFormat`, and on a terminal with rich installed
    ``fasttune.progress._rich.RichFormat``)."""

    name: str
    delim: str

    def text(self, line: str) -> str: ...

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str: ...


FORMATS: dict[str, Format] = {"text": TextFormat(), "psql": TextFormat(), "html": HtmlFormat()}


def get_format(fmt: str | Format) -> Format:
    """The format named ``fmt`` (``"text"``/``"psql"`` or ``"html"``)."""
    if not isinstance(fmt, str):
        return fmt
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"fmt={fmt!r} is not a report format; use 'text' or 'html'.") from None


def is_finite_number(value: Any) -> bool:
    """True for numbers that are not NaN or infinite."""
    return is_number(value) and math.isfinite(float(value))
