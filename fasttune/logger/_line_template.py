"""A result's ``result.json`` line and ``progress.csv`` row, for results of one shape.

A trial reports the same keys with the same value types every iteration, and between
two of its results only the numbers change (the date too, once a second). Writing a
result, most of the cost of its JSON line and of its CSV row is formatting its floats
(~0.6 us each, twice) and walking its keys. A :class:`LineTemplate` keeps the text of
everything but the numbers, from one result, with a slot for each number: a result
of the same shape becomes both texts by formatting its numbers once, into two format
strings: about half the cost of the two encoders (bench/bench_encoding.py).

A template is made from a result the general encoders have just written, and only
if rendering that result with it gives exactly their text; a result that is not of
its shape (other keys or types, other text values, a NaN or an infinity) gets None
and takes the general path. Templates are made per batch of results, so a config
changed in place between batches is never written from an old text.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

from fasttune._support.encoding import encode_result_line
from fasttune.logger.csv import format_row
from fasttune.result import CONFIG

_NUMBER_TYPES = (int, float)  # exact types: a bool is text here (true/false, True/False)
_TEXT_TYPES = frozenset((str, bool, type(None)))
_MARK = "\x1e{}\x1e"  # a number's place while the texts are rendered
_JSON_MARKS = re.compile(r'"\\u001e(\d+)\\u001e"')  # a mark as JSON writes the text
_CSV_MARKS = re.compile("\x1e(\\d+)\x1e")
_NO_CONFIG = object()


def _getter(keys: list[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    if len(keys) == 1:
        key = keys[0]
        return lambda result: (result[key],)
    return operator.itemgetter(*keys)


class LineTemplate:
    """The JSON line and CSV row of results shaped like the one it was made from.

    Use :meth:`make`; then :meth:`encode` for each result.
    """

    __slots__ = (
        "_config",
        "_csv",
        "_fixed",
        "_fixed_values",
        "_json",
        "_numbers",
        "_types",
        "columns",
        "keys",
    )

    def __init__(
        self,
        keys: tuple[str, ...],
        types: tuple[type, ...],
        fixed_keys: list[str],
        fixed_values: tuple[Any, ...],
        config: Any,
        number_keys: list[str],
        json_format: str,
        csv_format: str | None,
    ):
        self.keys = keys
        #: The flattened result's keys (those of the CSV row).
        self.columns = tuple(key for key in keys if key != CONFIG)
        self._types = types
        self._fixed = _getter(fixed_keys) if fixed_keys else None
        self._fixed_values = fixed_values
        self._config = config
        self._numbers = _getter(number_keys)
        self._json = json_format
        self._csv = csv_format

    @classmethod
    def make(
        cls, result: dict[str, Any], json_line: bytes | None, csv_row: str | None
    ) -> LineTemplate | None:
        """A template for results shaped like ``result``, or None if it cannot be one.

        Args:
            result: A result just written by the general encoders; every value but
                ``config`` must be a number, text, a bool or None, and one at least a
                number.
            json_line: The JSON line written for it, if one was.
            csv_row: The CSV row written for it, when its flattened keys were the
                file's columns in order; None: the template makes no rows.
        """
        keys = tuple(result)
        types = tuple(map(type, result.values()))
        fixed_keys: list[str] = []
        number_keys: list[str] = []
        for key, kind in zip(keys, types):
            if type(key) is not str:
                return None
            if kind in _NUMBER_TYPES and key != CONFIG:
                number_keys.append(key)
            elif kind in _TEXT_TYPES:
                fixed_keys.append(key)
            elif key == CONFIG:
                pass  # the same object, or not the same text: {"a": 0} == {"a": -0.0}
            else:
                return None  # lists, arrays, nested results...: the general path
        if not number_keys:
            return None
        marked = dict(result)
        for i, key in enumerate(number_keys):
            marked[key] = _MARK.format(i)
        try:
            count = len(number_keys)
            json_format = _format(encode_result_line(marked).decode("ascii"), count, _JSON_MARKS)
            csv_format = None
            if csv_row is not None:
                row = format_row(value for key, value in marked.items() if key != CONFIG)
                csv_format = _format(row, count, _CSV_MARKS)
        except ValueError:  # a mark was already in a text
            return None
        fixed_values = tuple(result[key] for key in fixed_keys)
        template = cls(
            keys,
            types,
            fixed_keys,
            fixed_values,
            result.get(CONFIG, _NO_CONFIG),
            number_keys,
            json_format,
            csv_format,
        )
        if json_line is None:
            json_line = encode_result_line(result)
        if template.encode(result) != (json_line, csv_row):
            return None  # never expected; the general encoders decide
        return template

    def encode(self, result: dict[str, Any]) -> tuple[bytes, str | None] | None:
        """``result``'s JSON line (bytes) and CSV row (or None if the template makes
        none), or None if ``result`` is not of the template's shape."""
        if (
            tuple(result) != self.keys
            or tuple(map(type, result.values())) != self._types
            or result.get(CONFIG, _NO_CONFIG) is not self._config
            # Texts, flags and None: equal values have equal texts (types are equal).
            or (self._fixed is not None and self._fixed(result) != self._fixed_values)
        ):
            return None
        numbers = self._numbers(result)
        try:
            if not math.isfinite(sum(numbers)):
                return None  # NaN and infinities: JSON writes them its own way
        except OverflowError:  # an int beyond a float
            return None
        texts = tuple(map(repr, numbers))  # what both encoders write for an int or a float
        csv_format = self._csv
        return (
            (self._json % texts).encode("ascii"),
            None if csv_format is None else csv_format % texts,
        )


def _format(text: str, count: int, marks: re.Pattern[str]) -> str:
    """``text`` as a %-format string with ``%s`` at the marks (numbered 0 to
    ``count - 1``, each once, in order).

    Raises:
        ValueError: The marks are not exactly those.
    """
    pieces = marks.split(text)  # texts, with the mark numbers between them
    if pieces[1::2] != [str(i) for i in range(count)]:
        raise ValueError(text)
    return "%s".join(piece.replace("%", "%%") for piece in pieces[0::2])
