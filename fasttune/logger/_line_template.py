"""A result's ``result.json`` line and ``progress.csv`` row, for results of one shape.

A trial reports the same keys with the same value types every iteration, and between
two of its results only the numbers change (the date too, once a second). Writing a
result, most of the cost of its JSON line and of its CSV row is formatting its floats
(~0.6 us each, twice) and walking its keys. A :class:`LineTemplate` keeps the text of
everything but the numbers, with a slot for each number: a result of the same shape
becomes both texts by formatting its numbers once, into two format strings: about
half the cost of the two encoders (bench/bench_encoding.py).

Two of the auto-filled numbers need no formatting of their own (a float's ``repr`` is
~0.5 us here, a fifth of a result's nine numbers): ``warmup_time`` and ``pid`` do not
change during a trial, so a template writes their texts as it writes strings (checked
equal for each result); ``time_since_restore`` equals ``time_total_s`` in a trial that
was not restored, so a template bound to such a result writes the latter's text twice
(checked equal for each result, as a restored trial's are not).

The text around the values depends only on the shape (keys and value types), which
the trials a worker runs one after another share: a :class:`_LineShape`, made once
per shape in a process, has a slot for every value. Binding it to a result fills in
the texts of that result's strings, flags, None values and config, each written by
the encoder's own function for its type, which leaves the numbers' slots: a
template, in a few microseconds, without encoding the result in full. A shape is
only kept if the template it binds for the result it was made from renders exactly
the general encoders' text; a result that is not of a template's shape (other keys
or types, other text values, a NaN or an infinity) gets None and takes the general
path. Templates are bound per batch of results, so a config changed in place
between batches is never written from an old text.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from fasttune._support.encoding import encode_result_line
from fasttune.logger.csv import format_row
from fasttune.result import CONFIG, PID, TIME_SINCE_RESTORE, TIME_TOTAL_S, WARMUP_TIME

_NUMBER_TYPES = (int, float)  # exact types: a bool is text here (true/false, True/False)
_TEXT_TYPES = frozenset((str, bool, type(None)))
_MARK = "\x1e{}\x1e"  # a value's place while the texts of a shape are rendered
_JSON_MARKS = re.compile(r'"\\u001e(\d+)\\u001e"')  # a mark as JSON writes the text
_CSV_MARKS = re.compile("\x1e(\\d+)\x1e")
_NO_CONFIG = object()
_NUMBER, _TEXT, _CONFIG, _STICKY = 0, 1, 2, 3  # the kinds of a shape's slots
# Numbers that stay the same through a trial: their texts are bound as a string's are.
_STICKY_KEYS = frozenset((PID, WARMUP_TIME))
# A number written with the text of another, while their values are equal.
_ALIAS, _ALIAS_SOURCE = TIME_SINCE_RESTORE, TIME_TOTAL_S

# Shapes made in this process, by (keys, value types); None: no template for it.
# Bounded: cleared when full (a worker's trials share a few shapes).
_SHAPES: dict[tuple[tuple[Any, ...], tuple[type, ...]], _LineShape | None] = {}
_MAX_SHAPES = 1024
# Each text value's (JSON text, CSV text), %-escaped for a format string; bounded too.
_TEXTS: dict[Any, tuple[str, str]] = {}
_MAX_TEXTS = 4096
_JSON_CONSTANTS = {True: "true", False: "false", None: "null"}
_CSV_CONSTANTS = {True: "True", False: "False", None: ""}


def _getter(keys: list[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    if len(keys) == 1:
        key = keys[0]
        return lambda result: (result[key],)
    return operator.itemgetter(*keys)


def _texts_of(value: Any) -> tuple[str, str]:
    """The JSON and CSV texts of a str, bool or None value, ready for a format string."""
    try:
        return _TEXTS[value]
    except KeyError:
        pass
    if type(value) is str:
        # csv.writer quotes a field by its own content only (a record of nothing but
        # one empty field aside): the field is cut from a row of it and an empty one.
        field = format_row((value, ""))[:-2]
        texts = (
            json.encoder.encode_basestring_ascii(value).replace("%", "%%"),
            field.replace("%", "%%"),
        )
    else:
        texts = (_JSON_CONSTANTS[value], _CSV_CONSTANTS[value])
    if len(_TEXTS) >= _MAX_TEXTS:
        _TEXTS.clear()
    _TEXTS[value] = texts
    return texts


class _LineShape:
    """The JSON line and CSV row of results with given keys and value types, with a
    slot for every value (see :meth:`LineTemplate.make`)."""

    __slots__ = (
        "alias_pair",
        "columns",
        "csv",
        "distinct_numbers",
        "expand",
        "fixed",
        "json",
        "keys",
        "numbers",
        "slots",
        "types",
    )

    def __init__(
        self,
        keys: tuple[str, ...],
        types: tuple[type, ...],
        slots: tuple[tuple[str, int], ...],
        json_format: str,
        csv_format: str,
    ):
        self.keys = keys
        self.types = types
        #: The flattened result's keys (those of the CSV row).
        self.columns = tuple(key for key in keys if key != CONFIG)
        self.slots = slots
        fixed = [key for key, kind in slots if kind in (_TEXT, _STICKY)]
        self.fixed = _getter(fixed) if fixed else None
        numbers = [key for key, kind in slots if kind == _NUMBER]
        self.numbers = _getter(numbers)
        # Without the alias's own number: its text is its source's (see encode).
        self.alias_pair: Callable[[dict[str, Any]], tuple[Any, Any]] | None = None
        self.distinct_numbers: Callable[[dict[str, Any]], tuple[Any, ...]] | None = None
        self.expand: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None
        kinds = dict(zip(keys, types))
        if _ALIAS in numbers and _ALIAS_SOURCE in numbers and kinds[_ALIAS] is kinds[_ALIAS_SOURCE]:
            distinct = [key for key in numbers if key != _ALIAS]
            self.distinct_numbers = _getter(distinct)
            at = {key: i for i, key in enumerate(distinct)}
            at[_ALIAS] = at[_ALIAS_SOURCE]
            self.expand = operator.itemgetter(*(at[key] for key in numbers))
            self.alias_pair = operator.itemgetter(_ALIAS, _ALIAS_SOURCE)
        self.json = json_format
        self.csv = csv_format

    @classmethod
    def make(cls, result: dict[str, Any]) -> _LineShape | None:
        """The shape of ``result``; None for one no template can write."""
        keys = tuple(result)
        types = tuple(map(type, result.values()))
        slots: list[tuple[str, int]] = []
        for key, kind in zip(keys, types):
            if type(key) is not str:
                return None
            if key == CONFIG:
                slots.append((key, _CONFIG))  # its text, whatever it holds, is bound
            elif kind in _NUMBER_TYPES:
                slots.append((key, _STICKY if key in _STICKY_KEYS else _NUMBER))
            elif kind in _TEXT_TYPES:
                slots.append((key, _TEXT))
            else:
                return None  # lists, arrays, nested results...: the general path
        if not any(kind == _NUMBER for _, kind in slots):
            return None
        marked = {key: _MARK.format(i) for i, key in enumerate(keys)}
        try:
            json_format = _format(
                encode_result_line(marked).decode("ascii"), range(len(keys)), _JSON_MARKS
            )
            columns = [i for i, key in enumerate(keys) if key != CONFIG]
            row = format_row(marked[keys[i]] for i in columns)
            csv_format = _format(row, columns, _CSV_MARKS)
        except ValueError:  # a mark was already in a key
            return None
        return cls(keys, types, tuple(slots), json_format, csv_format)

    def bind(self, result: dict[str, Any], rows: bool = True) -> LineTemplate | None:
        """The template of ``result``'s texts and config (a result of this shape);
        ``rows``: whether it makes CSV rows. None when a number that stays the same
        is a NaN or an infinity (the general encoders write those), or a float zero."""
        json_texts: list[str] = []
        csv_texts: list[str] = []
        for key, kind in self.slots:
            if kind == _NUMBER:
                json_texts.append("%s")
                csv_texts.append("%s")
            elif kind == _STICKY:
                value = result[key]
                # An int is written as it is, whatever its size; a float compared by
                # value for each result must not be a zero (-0.0 == 0.0, texts apart).
                if type(value) is float and (not math.isfinite(value) or value == 0):
                    return None
                json_texts.append(repr(value))
                csv_texts.append(repr(value))
            elif kind == _TEXT:
                json_text, csv_text = _texts_of(result[key])
                json_texts.append(json_text)
                csv_texts.append(csv_text)
            else:  # the config: in the JSON line only
                json_texts.append(encode_result_line(result[key])[:-1].decode().replace("%", "%%"))
        pair = self.alias_pair
        aliased = False
        if pair is not None:
            value, source = pair(result)
            aliased = value == source and value != 0  # zeros: -0.0 == 0.0, written apart
        return LineTemplate(
            self,
            None if self.fixed is None else self.fixed(result),
            result.get(CONFIG, _NO_CONFIG),
            self.json % tuple(json_texts),
            self.csv % tuple(csv_texts) if rows else None,
            aliased,
        )


def _shape_key(result: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[type, ...]]:
    return tuple(result), tuple(map(type, result.values()))


class LineTemplate:
    """The JSON line and CSV row of results shaped like the one it was made from.

    Use :meth:`make` or :meth:`for_known_shape`; then :meth:`encode` for each result.
    """

    __slots__ = (
        "_alias_pair",
        "_config",
        "_csv",
        "_expand",
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
        shape: _LineShape,
        fixed_values: tuple[Any, ...] | None,
        config: Any,
        json_format: str,
        csv_format: str | None,
        aliased: bool = False,
    ):
        # The shape's parts are copied here: encode reads them for every result.
        self.keys = shape.keys
        #: The flattened result's keys (those of the CSV row).
        self.columns = shape.columns
        self._types = shape.types
        self._fixed = shape.fixed
        self._fixed_values = fixed_values
        self._numbers = shape.numbers
        self._expand: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None
        self._alias_pair: Callable[[dict[str, Any]], tuple[Any, Any]] | None = None
        if aliased and shape.distinct_numbers is not None:
            # The alias's text is its source's, while their values are equal.
            self._numbers = shape.distinct_numbers
            self._expand, self._alias_pair = shape.expand, shape.alias_pair
        self._config = config
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
        key = _shape_key(result)
        try:
            shape = _SHAPES[key]
            known = True
        except KeyError:
            shape = _LineShape.make(result)
            known = False
        template = None if shape is None else shape.bind(result, rows=csv_row is not None)
        if template is not None:
            if json_line is None:
                json_line = encode_result_line(result)
            if template.encode(result) != (json_line, csv_row):
                # Never expected. The general encoders decide, and the shape is not
                # bound again (for_known_shape does not check what it binds).
                template = shape = None
                known = False
        if not known:
            if len(_SHAPES) >= _MAX_SHAPES:
                _SHAPES.clear()
            _SHAPES[key] = shape
        return template

    @classmethod
    def for_known_shape(cls, result: dict[str, Any], rows: bool = True) -> LineTemplate | None:
        """A template for results shaped like ``result`` when :meth:`make` made one
        for its shape in this process (None otherwise), without encoding ``result``:
        its JSON line and CSV row (with ``rows``) come from :meth:`encode`."""
        shape = _SHAPES.get(_shape_key(result))
        return None if shape is None else shape.bind(result, rows)

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
        if self._expand is not None and self._alias_pair is not None:
            value, source = self._alias_pair(result)
            if value != source or not value:  # zeros: -0.0 == 0.0, written apart
                return None
            texts = self._expand(texts)
        csv_format = self._csv
        return (
            (self._json % texts).encode("ascii"),
            None if csv_format is None else csv_format % texts,
        )


def _format(text: str, marks_expected: Any, marks: re.Pattern[str]) -> str:
    """``text`` as a format string with ``%s`` at the marks, which must be
    ``marks_expected`` (numbers), each once, in order. Formatted twice (a shape's
    slots at binding, then a template's numbers), so a ``%`` of the text is ``%%%%``.

    Raises:
        ValueError: The marks are not exactly those.
    """
    pieces = marks.split(text)  # texts, with the mark numbers between them
    if pieces[1::2] != [str(i) for i in marks_expected]:
        raise ValueError(text)
    return "%s".join(piece.replace("%", "%%%%") for piece in pieces[0::2])
